package reaper

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

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
	API kubernetes.Interface
	// Events writes the run's Events; nil: the run records none (it may not).
	Events kubernetes.Interface
}

// NewClients builds a run's two clients from cfg with the run's own limits (Effective), as a
// Job's pod does: the API's, and the Events' own. noEvents leaves Events nil.
func NewClients(cfg *rest.Config, limits ClientLimits, noEvents bool) (Clients, error) {
	limits = limits.Effective()
	return ClientsFor(limits.API.Apply(cfg), limits.Events.Apply(cfg), noEvents)
}

// ClientsFor builds a run's two clients from api and events as they are, rate limiters
// included: in the coordinator's process (package coordinator/inprocess) they are the
// process's own, shared by every run and the controller (apilimit.Limit.Shared), so the run
// keeps to the process's budget and not to limits of its own. Everything a reap run reads and
// writes (pods, Events, EndpointSlices, evictions) is a built-in type, so they speak
// protobuf: several times smaller on the wire than JSON and cheaper to decode
// (docs/benchmarks.md), which is what a cycle over a large cluster spends its time on.
// noEvents leaves Events nil.
func ClientsFor(api, events *rest.Config, noEvents bool) (Clients, error) {
	var c Clients
	var err error
	if c.API, err = kubernetes.NewForConfig(protobuf(api)); err != nil {
		return Clients{}, fmt.Errorf("building a Kubernetes client: %w", err)
	}
	if noEvents {
		return c, nil
	}
	if c.Events, err = kubernetes.NewForConfig(protobuf(events)); err != nil {
		return Clients{}, fmt.Errorf("building a Kubernetes client for Events: %w", err)
	}
	return c, nil
}

// protobuf is a copy of cfg (its rate limiter the same) that speaks protobuf.
func protobuf(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
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

// runOne is the run of one service, or of a plain pod-reaper configuration: it starts what
// it follows, waits for the gate if it has one, reaps until it is told to stop, and ends with
// the summary line.
func runOne(ctx context.Context, client kubernetes.Interface, ev *events, opts Options, log logrus.FieldLogger) (Summary, error) {
	r := newRunner(ctx, client, ev, opts, log)
	logOddSettings(log, opts.Warnings)
	armedAt := time.Now()
	src, err := r.startSources(ctx, armedAt)
	if err != nil {
		return r.gateFailed(ctx, err)
	}
	defer src.cancel()
	g := &oneGate{g: src.gate, rules: gateRules{runDuration: opts.RunDuration, maxWait: opts.MaxWait, armedAt: armedAt}}
	if src.gate != nil {
		if opened, why := r.waitForGate(ctx, g); !opened {
			src.shutdown()
			r.sum.NotStarted = true
			r.finishLine(why)
			return r.sum, nil
		}
	}
	why := r.reapUntilStopped(ctx, src, g)
	src.shutdown()
	r.finishLine(why)
	if r.lastErr != nil {
		return r.sum, fmt.Errorf("reaper: the last cycle could not list pods: %w", r.lastErr)
	}
	return r.sum, nil
}

// sources are what a run follows in the background: the gate's EndpointSlices
// (START_WHEN_READY) and the pods (WATCH), each nil when the run has none. They live until the
// run ends, whatever ends it.
type sources struct {
	gate   *gate
	watch  *watcher
	cancel context.CancelFunc
}

// startSources starts the gate and the pod informers. The pod informers start before the
// first cycle, and before the gate opens, so that no transition is missed: their cache is
// warm when the gate opens, and the pods they report wait in the queue until the run may act.
func (r *runner) startSources(ctx context.Context, armedAt time.Time) (*sources, error) {
	bg, cancel := context.WithCancel(ctx)
	src := &sources{cancel: cancel}
	if r.opts.StartWhenReady != nil {
		r.armedLine(armedAt)
		g, err := startGate(bg, r.client, *r.opts.StartWhenReady, r.opts.ReadyWhen, r.opts.onGateSynced)
		if err != nil {
			cancel()
			return nil, err
		}
		src.gate = g
	}
	if r.opts.Watch {
		src.watch = startWatcher(bg, r.client, r.opts, r.fields, src.gate != nil, r.log)
	}
	return src, nil
}

// shutdown stops the sources and waits for their goroutines: none outlives the run.
func (src *sources) shutdown() {
	src.cancel()
	if src.watch != nil {
		src.watch.shutdown()
	}
	if src.gate != nil {
		src.gate.shutdown()
	}
}

// watched is the channel of the watched pods' keys: nil, never ready, without WATCH or while
// reaping is paused, so the keys wait in the queue.
func (src *sources) watched(paused bool) <-chan cache.ObjectName {
	if src.watch == nil || paused {
		return nil
	}
	return src.watch.keys
}

// gateChanged is signalled when the gate's readiness may have changed; nil without a gate.
func (src *sources) gateChanged() <-chan struct{} {
	if src.gate == nil {
		return nil
	}
	return src.gate.changed
}

// gateFailed ends a run whose gate could not start: nothing was reaped, and that is an error
// unless the run was asked to stop meanwhile.
func (r *runner) gateFailed(ctx context.Context, err error) (Summary, error) {
	r.sum.NotStarted = true
	if ctx.Err() != nil {
		r.finishLine(stoppedWhileWaiting(*r.opts.StartWhenReady))
		return r.sum, nil
	}
	r.log.WithError(err).Error("Cannot follow the service's readiness; nothing was reaped.")
	return r.sum, err
}

// reapUntilStopped runs the first cycle, if the run has one at start, then serves the
// SCHEDULE ticks, the watched pods and the gate's changes one at a time until SIGTERM (ctx)
// or RUN_DURATION ends the run; it returns why, for the summary line.
func (r *runner) reapUntilStopped(ctx context.Context, src *sources, g *oneGate) string {
	atStart, planned := r.startLine(src.gate != nil)
	if src.gate == nil {
		g.step() // the service of a run without a gate is Ready from the start: it opens now
	}
	// stop ends everything after the first cycle: SIGTERM (ctx) or the gate's window
	// (RUN_DURATION), which every later return of the service starts afresh.
	stop, cancelStop := context.WithCancel(ctx)
	defer cancelStop()
	window := newRunWindow(g.state.windowEnd, cancelStop)
	defer window.stop()

	if atStart {
		r.runCycle(ctx) // only a cancelled ctx stops the first cycle, never RUN_DURATION
		planned = r.opts.Schedule.Next(time.Now())
	}
	timer := time.NewTimer(time.Until(planned))
	defer timer.Stop()
	for stop.Err() == nil {
		select {
		case <-stop.Done():
		case <-timer.C:
			if g.state.reaping() {
				r.runCycle(stop)
			}
			planned = r.nextTick(planned, timer)
		case key := <-src.watched(!g.state.reaping()):
			r.judgeWatched(stop, src.watch, key)
		case <-src.gateChanged():
			r.followGate(stop, g, window)
		}
	}
	if ctx.Err() != nil {
		return whyStopped
	}
	return "RUN_DURATION elapsed"
}

// nextTick plans the cycle after the tick just served and sets timer for it. It is computed
// after the cycle, so ticks that fell inside it are skipped, not queued; and from no earlier
// than the tick just served, so a wall clock reading a hair behind the timer cannot make the
// same tick fire twice.
func (r *runner) nextTick(served time.Time, timer *time.Timer) time.Time {
	next := r.opts.Schedule.Next(latest(time.Now(), served))
	if next.IsZero() {
		// robfig/cron's "no time within five years"; LoadOptions rejects such specs, but a
		// zero time here must not turn into a tight loop of cycles.
		r.log.Error("The schedule has no next run; no more cycles.")
		return next
	}
	timer.Reset(time.Until(next))
	return next
}

// judgeWatched judges the pod of a key the watch queued, as the caches hold it now, unless
// the run is stopping.
func (r *runner) judgeWatched(stop context.Context, w *watcher, key cache.ObjectName) {
	defer w.queue.Done(key)
	if stop.Err() != nil {
		return
	}
	if pod, ok := w.pod(key); ok {
		r.judge(pod)
	}
}

// oneGate is the gate of a run of one service: stepGate over what its gate's readiness says
// on the wall clock. Without START_WHEN_READY (g nil) the service is Ready from the start, so
// only RUN_DURATION ends it.
type oneGate struct {
	g     *gate
	rules gateRules
	view  serviceView
	state gateState
}

// step moves the gate by what its service says now.
func (o *oneGate) step() gateStep {
	now := time.Now()
	o.view = o.view.seen(o.g == nil || o.g.Ready(), now)
	var st gateStep
	o.state, st = stepGate(o.state, o.rules, o.view, now)
	return st
}

// followGate steps the gate on a change of its service's readiness: reaping pauses while the
// service is down again and resumes, with a cycle and a full RUN_DURATION from that return,
// when it is Ready.
func (r *runner) followGate(stop context.Context, g *oneGate, window *runWindow) {
	switch st := g.step(); {
	case st.ended:
		window.end()
	case st.paused:
		r.pausedLine(g.g.ref)
	case st.resumed:
		if !window.moveTo(g.state.windowEnd) {
			return // the window ended just now: the run is over
		}
		r.resumedLine(g.g.ref)
		r.cool.reset() // a new return of the service is a new recovery
		r.runCycle(stop)
	}
}

// waitForGate steps the gate until its service is Ready (opened=true), MAX_WAIT passes or
// ctx is cancelled; why says which, for the summary line.
func (r *runner) waitForGate(ctx context.Context, g *oneGate) (opened bool, why string) {
	for {
		st := g.step()
		switch {
		case st.opened:
			r.readyLine(g.g.ref, st.returnAt, g.rules.armedAt)
			return true, ""
		case st.gaveUp:
			return false, r.maxWaitLine(g.g.ref)
		}
		timer := time.NewTimer(time.Until(st.wakeAt))
		select {
		case <-ctx.Done():
			timer.Stop()
			return false, stoppedWhileWaiting(g.g.ref)
		case <-timer.C:
		case <-g.g.changed:
			timer.Stop()
		}
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// runWindow ends the run (end) when the gate's window ends; a zero end time: never.
type runWindow struct {
	timer *time.Timer
	end   func()
}

func newRunWindow(until time.Time, end func()) *runWindow {
	w := &runWindow{end: end}
	if !until.IsZero() {
		w.timer = time.AfterFunc(time.Until(until), end)
	}
	return w
}

// moveTo moves the window's end to until (a later return's fresh window). It reports false
// when the window had already ended (end was called or is being called): a run that is
// ending is not revived.
func (w *runWindow) moveTo(until time.Time) bool {
	if w.timer == nil {
		return true
	}
	if !w.timer.Stop() {
		return false
	}
	w.timer.Reset(time.Until(until))
	return true
}

func (w *runWindow) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
