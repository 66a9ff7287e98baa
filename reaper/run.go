package reaper

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// runner is the state of one run. It is owned by the single goroutine that runs Run's loop:
// cycles and watched pods are handled one at a time, so nothing overlaps and nothing here
// needs a lock.
type runner struct {
	ctx    context.Context // the caller's; only for values, API calls in flight outlive its cancellation
	client kubernetes.Interface
	events *events
	opts   Options
	log    logrus.FieldLogger
	sel    selector
	fields string
	clock  func() time.Time

	sum     Summary
	quota   quota
	cool    cooldown // REAP_COOLDOWN, per owner
	cycle   int
	lastErr error // the most recent cycle's list failure; nil once a cycle lists again
}

// Run performs the run: a first cycle at start, then one on every SCHEDULE tick, plus WATCH
// mode. It returns when ctx is cancelled (SIGTERM) or RUN_DURATION elapses, after finishing the
// pod in hand. The first cycle always completes unless ctx is cancelled, so a RUN_DURATION
// shorter than a cycle makes a one-shot run. The error is non-nil only when the run could not
// do its job: the options are unusable or the last cycle could not list pods.
//
// With START_WHEN_READY, Run is armed first: it follows the service's EndpointSlices and
// reaps nothing until the service has a ready endpoint; everything above then starts at that
// moment (RUN_DURATION included). The pod informers (WATCH) start at once, so their cache is
// warm when the gate opens. MAX_WAIT or SIGTERM before then ends the run with nothing reaped
// and no error. After the gate opened, reaping pauses while the service is down again and
// resumes, with a cycle and a full RUN_DURATION from that moment, when it is Ready.
func Run(ctx context.Context, client kubernetes.Interface, opts Options, log logrus.FieldLogger) (Summary, error) {
	return RunWith(ctx, Clients{API: client, Events: client}, opts, log)
}

// Clients are a run's API clients: API for pods and EndpointSlices, Events for its Events, each
// with its own rate limit (ClientLimits), so that Events never delay a delete.
type Clients struct {
	API, Events kubernetes.Interface
}

// RunWith is Run with the Events written through a client of their own. A TARGETS run is one
// run over all its services (runBatch); anything else is one run (runOne).
func RunWith(ctx context.Context, c Clients, opts Options, log logrus.FieldLogger) (Summary, error) {
	if err := opts.validate(); err != nil {
		return Summary{}, err
	}
	ev := newEvents(c.Events, log)
	defer ev.close(log)
	if len(opts.Targets) > 0 {
		return runBatch(ctx, c.API, ev, opts, log)
	}
	return runOne(ctx, c.API, ev, opts, log)
}

// runOne is the run of one service, or of a plain pod-reaper configuration.
func runOne(ctx context.Context, client kubernetes.Interface, ev *events, opts Options, log logrus.FieldLogger) (Summary, error) {
	r := newRunner(ctx, client, ev, opts, log)
	for _, w := range opts.Warnings {
		r.log.WithField("setting", w).Warnf("Accepted an odd setting: %s", w)
	}

	// bg carries the informers (pods with WATCH, the gate's EndpointSlices): they live until
	// the run ends, whatever ends it.
	bg, cancelBG := context.WithCancel(ctx)
	defer cancelBG()

	var g *gate
	armedAt := time.Now()
	if opts.StartWhenReady != nil {
		r.armedLine(armedAt)
		var err error
		if g, err = startGate(bg, client, *opts.StartWhenReady, opts.onGateSynced); err != nil {
			r.sum.NotStarted = true
			if ctx.Err() != nil {
				r.finishLine("asked to stop while waiting for service " + opts.StartWhenReady.String() + " (SIGTERM or context cancelled); nothing was reaped")
				return r.sum, nil
			}
			r.log.WithError(err).Error("Cannot follow the service's readiness; nothing was reaped.")
			return r.sum, err
		}
	}
	var w *watcher
	if opts.Watch {
		// Started before the first cycle (and before the gate opens: the pods are then already
		// in the cache) so that no transition is missed; the pods it reports wait in the queue
		// until the worker may act.
		w = startWatcher(bg, client, opts, r.fields, g != nil, log)
	}
	shutdown := func() {
		cancelBG()
		if w != nil {
			w.shutdown() // waits for the informers' goroutines: none outlives Run
		}
		if g != nil {
			g.shutdown()
		}
	}

	if g != nil {
		if opened, why := r.waitForGate(ctx, g, armedAt); !opened {
			shutdown()
			r.sum.NotStarted = true
			r.finishLine(why)
			return r.sum, nil
		}
	}
	// pod-reaper's contract: a plain schedule reaps at its first tick, never at start (a cron
	// SCHEDULE whose first tick is hours away must not reap the moment a Deployment rolls).
	// A cycle at start is what REAP_AT_START asks for; WATCH reaps every matching pod the
	// moment its informer lists it anyway, so its first cycle at start changes nothing but
	// makes it explicit; and an opened gate is the moment the run exists for.
	atStart := opts.ReapAtStart || opts.Watch || g != nil
	firstTick := opts.Schedule.Next(time.Now())
	if g == nil {
		if atStart {
			r.log.WithFields(r.startFields()).Info("Reaper starting: first cycle now, then on the schedule.")
		} else {
			r.log.WithFields(r.startFields()).WithField("first_cycle_at", firstTick.UTC().Format(time.RFC3339)).
				Infof("Reaper starting: first cycle at the schedule's first tick, %s (REAP_AT_START=true would run one now).", firstTick.UTC().Format(time.RFC3339))
		}
	}

	// stop ends everything after the first cycle: SIGTERM (ctx) or RUN_DURATION, counted from
	// now (the start, or the moment the gate opened) and, with the gate, from each later return
	// of the service: every return is a recovery of its own and gets the full window, as
	// dependency-watchdog gives each return a fresh watchDuration.
	stop, cancelStop := context.WithCancel(ctx)
	defer cancelStop()
	window := newRunWindow(opts.RunDuration, cancelStop)
	defer window.stop()

	planned := firstTick
	if atStart {
		r.runCycle(ctx) // only a cancelled ctx stops the first cycle, never RUN_DURATION
		planned = opts.Schedule.Next(time.Now())
	}
	timer := time.NewTimer(time.Until(planned))
	defer timer.Stop()
	var watched, gateChanged <-chan struct{}
	if w != nil {
		watched = w.queue.ready
	}
	if g != nil {
		gateChanged = g.changed
	}
	paused := false
	for stop.Err() == nil {
		select {
		case <-stop.Done():
		case <-timer.C:
			if !paused {
				r.runCycle(stop)
			}
			// Computed after the cycle, so ticks that fell inside it are skipped, not queued;
			// and from no earlier than the tick just served, so a wall clock reading a hair
			// behind the timer cannot make the same tick fire twice.
			planned = opts.Schedule.Next(latest(time.Now(), planned))
			if planned.IsZero() {
				// robfig/cron's "no time within five years"; LoadOptions rejects such specs,
				// but a zero time here must not turn into a tight loop of cycles.
				r.log.Error("The schedule has no next run; no more cycles.")
				continue
			}
			timer.Reset(time.Until(planned))
		case <-watched:
			if !paused {
				r.drainWatched(stop, w.queue)
			}
		case <-gateChanged:
			switch ready := g.Ready(); {
			case !ready && !paused:
				paused = true
				r.pausedLine(g.ref)
			case ready && paused:
				paused = false
				if !window.restart() {
					continue // the window ended just now: the run is over
				}
				r.resumedLine(g.ref)
				r.cool.reset() // a new return of the service is a new recovery
				r.runCycle(stop)
				if w != nil {
					r.drainWatched(stop, w.queue)
				}
			}
		}
	}

	why := "RUN_DURATION elapsed"
	if ctx.Err() != nil {
		why = "asked to stop (SIGTERM or context cancelled)"
	}
	cancelStop()
	shutdown()
	r.finishLine(why)
	if r.lastErr != nil {
		return r.sum, fmt.Errorf("reaper: the last cycle could not list pods: %w", r.lastErr)
	}
	return r.sum, nil
}

// waitForGate waits until the gate's service is Ready (opened=true), MAX_WAIT passes or ctx
// is cancelled; why says which, for the summary line.
func (r *runner) waitForGate(ctx context.Context, g *gate, armedAt time.Time) (opened bool, why string) {
	timer := time.NewTimer(r.opts.MaxWait - time.Since(armedAt))
	defer timer.Stop()
	for {
		if g.Ready() {
			r.readyLine(g.ref, time.Now(), armedAt)
			return true, ""
		}
		select {
		case <-ctx.Done():
			return false, fmt.Sprintf("asked to stop while waiting for service %s (SIGTERM or context cancelled); nothing was reaped", g.ref)
		case <-timer.C:
			why := fmt.Sprintf("MAX_WAIT %s elapsed and service %s never became Ready; nothing was reaped", r.opts.MaxWait, g.ref)
			r.log.WithFields(logrus.Fields{"service": g.ref.String(), "max_wait": r.opts.MaxWait.String()}).Warnf("%s.", why)
			return false, why
		case <-g.changed:
		}
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func newRunner(ctx context.Context, client kubernetes.Interface, ev *events, opts Options, log logrus.FieldLogger) *runner {
	clock := opts.now
	if clock == nil {
		clock = time.Now
	}
	return &runner{
		ctx: ctx, client: client, events: ev, opts: opts, log: log, clock: clock,
		sel:    selector{filter: opts.filter(), rules: opts.Rules, done: map[types.UID]int{}},
		fields: opts.fieldSelector(),
		quota:  quota{max: opts.MaxPods},
		cool:   newCooldown(opts.ReapCooldown),
		sum:    Summary{DryRun: opts.DryRun},
	}
}

// runCycle lists, selects and reaps once. stop is checked between pods only.
func (r *runner) runCycle(stop context.Context) { r.cycleOver(stop, r.collect) }

// cycleOver is one cycle over the matches collect finds (a list, or a batch's cache).
func (r *runner) cycleOver(stop context.Context, collect func(context.Context) ([]match, error)) {
	r.cycle++
	r.quota.used = 0 // MAX_PODS is per cycle; watch reaps until the next cycle count against it
	before := r.sum
	log := r.log.WithField("cycle", r.cycle)
	log.Debug(msgCycleStarting)
	matches, err := collect(stop)
	if err != nil {
		if stop.Err() != nil {
			return // stopped while listing: not a failure
		}
		r.sum.FailedCycles++
		r.lastErr = err
		log.WithField("error", err.Error()).Errorf("Cycle %d could not list pods, it will be retried on the schedule: %v", r.cycle, err)
		return
	}
	r.sum.Cycles++
	r.lastErr = nil
	r.pruneDone()
	r.cool.prune(r.clock())
	sortMatches(matches, r.opts.Sorting, r.opts.shuffle)

	for i, m := range matches {
		if stop.Err() != nil {
			log.Infof("Stopping between pods: %d matched pods left alone.", len(matches)-i)
			break
		}
		if r.quota.full() {
			log.Infof("MAX_PODS=%d reached: %d matched pods left for a later cycle.", r.opts.MaxPods, len(matches)-i)
			for _, left := range matches[i:] {
				r.maxPodsLine(left.pod, left.reasons)
			}
			break
		}
		r.handle(m)
	}
	log.WithFields(logrus.Fields{
		"seen": r.sum.Seen - before.Seen, "matched": r.sum.Matched - before.Matched,
		"reaped": r.sum.Reaped - before.Reaped, "skipped": r.sum.Skipped - before.Skipped,
		"errors": r.sum.Errors - before.Errors, "deferred": r.sum.Deferred - before.Deferred,
	}).Infof("Cycle %d done.", r.cycle)
}

// collect lists every OR-ed selector and keeps only the matches (copied out of their page).
// A pod listed by several selectors is judged once: each selector skips pods an earlier one
// already covers, which needs no memory of the pods seen.
func (r *runner) collect(ctx context.Context) ([]match, error) {
	now := r.clock()
	var matches []match
	selectors := r.opts.Selectors
	for i, s := range selectors {
		err := listPods(ctx, r.client, r.opts.Namespace, s.String(), r.fields, func(p *corev1.Pod) {
			if coveredByEarlier(selectors[:i], p) {
				return
			}
			r.sum.Seen++
			if _, done := r.sel.done[p.UID]; done {
				r.sel.done[p.UID] = r.cycle // still there: keep remembering it
				return
			}
			if m, ok := r.sel.evaluate(p, now); ok {
				m.pod = slimPod(p) // out of the page, and only what is read later
				matches = append(matches, m)
				r.sum.Matched++
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return matches, nil
}

func coveredByEarlier(earlier []labels.Selector, p *corev1.Pod) bool {
	for _, s := range earlier {
		if s.Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}

// pruneDone forgets UIDs acted on that the last complete listing no longer returned: a UID is
// never reused, so a vanished pod cannot come back, and a forever run's memory stays bounded.
func (r *runner) pruneDone() {
	for uid, c := range r.sel.done {
		if c < r.cycle {
			delete(r.sel.done, uid)
		}
	}
}

// handle reaps one match, unless REAP_COOLDOWN defers it, and does the bookkeeping: quota,
// summary, the acted-on UIDs and the owner's round.
func (r *runner) handle(m match) {
	o := ownerOf(m.pod)
	now := r.clock() // before the delete: the owner's replacements are created after it
	v := r.cool.decide(o.uid, m.pod.CreationTimestamp.Time, now)
	if v == verdictDefer {
		r.deferPod(m, o, now)
		return
	}
	switch r.reap(m) {
	case outcomeReaped:
		r.quota.take()
		r.sum.Reaped++
		r.sel.done[m.pod.UID] = r.cycle
		r.cool.reaped(o.uid, v, now)
	case outcomeGone:
		r.sum.Gone++
		r.sel.done[m.pod.UID] = r.cycle
	case outcomeSkipped:
		r.sum.Skipped++ // not remembered: a PodDisruptionBudget may allow it later
	case outcomeFailed:
		r.sum.Errors++ // not remembered: tried again on the next cycle or update
	}
}

// drainWatched handles the pods the informers reported, one at a time, until the queue is
// empty or the run is stopping.
func (r *runner) drainWatched(stop context.Context, q *podQueue) {
	for stop.Err() == nil {
		pod, ok := q.pop()
		if !ok {
			return
		}
		r.judge(pod)
	}
}

// judge handles one pod a watch reported: reaped if it matches and MAX_PODS leaves room.
func (r *runner) judge(pod *corev1.Pod) {
	m, ok := r.sel.evaluate(pod, r.clock())
	if !ok {
		return
	}
	r.sum.Matched++
	if r.quota.full() {
		r.maxPodsLine(pod, m.reasons)
		return
	}
	r.handle(m)
}

// runWindow is RUN_DURATION: when it elapses, end is called (0 = forever, never). restart
// starts a full window afresh from now.
type runWindow struct {
	d     time.Duration
	timer *time.Timer
}

func newRunWindow(d time.Duration, end func()) *runWindow {
	w := &runWindow{d: d}
	if d > 0 {
		w.timer = time.AfterFunc(d, end)
	}
	return w
}

// restart reports false when the window had already ended (end was called or is being
// called): a run that is ending is not revived.
func (w *runWindow) restart() bool {
	if w.timer == nil {
		return true
	}
	if !w.timer.Stop() {
		return false
	}
	w.timer.Reset(w.d)
	return true
}

func (w *runWindow) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
