package probe

import (
	"context"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"
)

// fleet is the namespaces a run probes, each with its own runner. It starts with the run's
// NAMESPACE or NAMESPACES; a run that follows a membership ConfigMap starts and stops runners
// as the membership changes.
type fleet struct {
	ctx   context.Context // SIGTERM
	stop  context.Context // the end of the schedule: RUN_DURATION or SIGTERM
	deps  Deps
	opts  Options
	log   logrus.FieldLogger
	slots chan struct{}
	multi bool

	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	live   map[string]*member // namespace → its runner now
	all    []*member          // every runner the run had, in start order
}

// member is one namespace's runner in the fleet.
type member struct {
	r        *runner
	settings NamespaceSettings
	cancel   context.CancelFunc
	err      error
}

// start starts namespace t's runner; the caller holds f.mu or is the only user of f.
func (f *fleet) start(t nsTarget) {
	if f.closed {
		return
	}
	ctx, cancelCtx := context.WithCancel(f.ctx)
	stop, cancelStop := context.WithCancel(f.stop)
	r := &runner{deps: f.deps, opts: t.opts, log: f.log.WithField("namespace", t.opts.Namespace), slots: f.slots, stop: stop,
		sum: Summary{Namespace: t.opts.Namespace, DryRun: f.opts.DryRun, Results: map[Result]int{}}}
	m := &member{r: r, settings: t.settings, cancel: func() { cancelCtx(); cancelStop() }}
	f.live[t.opts.Namespace] = m
	f.all = append(f.all, m)
	var spread time.Duration
	if f.multi && f.opts.Schedule != nil && f.opts.Jitter > 0 {
		now := time.Now()
		interval := f.opts.Schedule.Next(now).Sub(now)
		spread = wait.Jitter(interval, f.opts.Jitter) - interval
	}
	f.wg.Go(func() {
		defer m.cancel()
		m.err = r.run(ctx, stop, t.notBefore, spread)
	})
}

// follow makes the fleet probe what m says: a namespace that joined starts (its first probe
// at its notBefore), one that left stops at once (a probe still reading is abandoned, no
// level or resource of a scaling starts after it, and it is not probed again), and one whose
// own settings changed starts again with them.
func (f *fleet) follow(m Membership) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	running := make(map[string]NamespaceSettings, len(f.live))
	for ns, mem := range f.live {
		running[ns] = mem.settings
	}
	start, stop := membershipDiff(running, m)
	for _, ns := range stop {
		mem := f.live[ns]
		mem.r.left.Store(true)
		mem.cancel()
		delete(f.live, ns)
		mem.r.log.WithFields(logrus.Fields{"action": "stop", "reason": "left the shard's membership"}).
			Info("Not probing this namespace any more: the coordinator took it out of this shard (it is not probed, or another shard probes it). Nothing more is probed or scaled here.")
	}
	for _, ns := range start {
		t := f.opts.target(ns, m.Settings[ns])
		f.start(t)
		f.live[ns].r.log.WithFields(logrus.Fields{"action": "start", "reason": "joined the shard's membership"}).
			Info("Probing this namespace from now on: the coordinator added it to this shard.")
	}
}

// close stops the fleet from starting runners and waits for those it has.
func (f *fleet) close() []*member {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
	return f.all
}

// report is the run's Report and Summaries from every runner it had: a namespace that was
// stopped and started again (settings changed, or it left and came back) is reported by its
// latest probe.
func report(members []*member, end time.Time, dryRun bool) Report {
	rep := Report{End: end, DryRun: dryRun, Results: map[string]int{}, Ops: map[string]int{}, Namespaces: map[string]NamespaceResult{}}
	latest := map[string]time.Time{}
	for _, m := range members {
		r := m.r
		ns := r.opts.Namespace
		e := NamespaceResult{Last: r.sum.Last, Throttled: r.throttled}
		if r.sum.Probes == 0 {
			e.Last = ResultNotProbed
		} else {
			e.Ago = max(end.Sub(r.lastAt), 0)
		}
		if prev, seen := rep.Namespaces[ns]; !seen || (r.sum.Probes > 0 && (prev.Last == ResultNotProbed || r.lastAt.After(latest[ns]))) {
			rep.Namespaces[ns] = e
			latest[ns] = r.lastAt
		}
		for res, n := range r.sum.Results {
			rep.Results[string(res)] += n
		}
		for op, n := range r.sum.Ops() {
			rep.Ops[op] += n
		}
	}
	return rep
}
