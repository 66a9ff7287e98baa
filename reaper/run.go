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

// RunWith is Run with the Events written through a client of their own. A gated run
// (START_WHEN_READY, or TARGETS) is runBatch, a single service being a batch of one
// target; anything else is pod-reaper's run (runOne).
func RunWith(ctx context.Context, c Clients, opts Options, log logrus.FieldLogger) (Summary, error) {
	if err := opts.validate(); err != nil {
		return Summary{}, err
	}
	ev := newEvents(c.Events, log)
	defer ev.close(log)
	if len(opts.Targets) > 0 || opts.StartWhenReady != nil {
		return runBatch(ctx, c.API, ev, opts, log)
	}
	return runOne(ctx, c.API, ev, opts, log)
}

// runOne is the run of a plain pod-reaper configuration (no gate): it starts the pod
// informers (WATCH), reaps until it is told to stop or RUN_DURATION ends it, and ends with the
// summary line.
func runOne(ctx context.Context, client kubernetes.Interface, ev *events, opts Options, log logrus.FieldLogger) (Summary, error) {
	r := newRunner(ctx, client, ev, opts, log)
	logOddSettings(log, opts.Warnings)
	// The pod informers start before the first cycle, so that no transition is missed.
	bg, cancel := context.WithCancel(ctx)
	var w *watcher
	if opts.Watch {
		w = startWatcher(bg, client, opts, r.fields, log)
	}
	why := r.reapUntilStopped(ctx, w)
	cancel()
	if w != nil {
		w.shutdown() // none of its goroutines outlives the run
	}
	r.finishLine(why)
	if r.lastErr != nil {
		return r.sum, fmt.Errorf("reaper: the last cycle could not list pods: %w", r.lastErr)
	}
	return r.sum, nil
}

// reapUntilStopped runs the first cycle, if the run has one at start, then serves the
// SCHEDULE ticks and the watched pods (w; nil without WATCH) one at a time until SIGTERM (ctx)
// or RUN_DURATION ends the run; it returns why, for the summary line.
func (r *runner) reapUntilStopped(ctx context.Context, w *watcher) string {
	atStart, planned := r.startLine()
	// stop ends everything after the first cycle: SIGTERM (ctx) or RUN_DURATION.
	stop, cancelStop := context.WithCancel(ctx)
	defer cancelStop()
	if r.opts.RunDuration > 0 {
		window := time.AfterFunc(r.opts.RunDuration, cancelStop)
		defer window.Stop()
	}
	var keys <-chan cache.ObjectName // nil, never ready, without WATCH
	if w != nil {
		keys = w.keys
	}

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
			r.runCycle(stop)
			planned = r.nextTick(planned, timer)
		case key := <-keys:
			r.judgeWatched(stop, w, key)
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

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
