package reaper

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/depwatch/depwatch/internal/podstate"
)

// Every run is a batch (see the package comment): one EndpointSlice informer (none for a plain
// run) and, with WATCH or TARGETS, one pod informer for all its targets (no list per target);
// a plain run's cycles and those of a START_WHEN_READY run that does not watch list, as
// pod-reaper's do. A target's turn comes on a workqueue keyed by the target, whenever its
// service's readiness changes, a pod in its namespace changes, a SCHEDULE tick comes or its
// window or MAX_WAIT ends; the queue never hands one target to two workers at once, so a
// target's state needs no lock, and a few workers reap different targets' pods side by side,
// so the hundredth return is served as fast as the first.

// The targets handled at the same moment: enough that a storm's returns are not served one
// delete after the other, few enough to stay inside the client's limits. A batch's client
// grows with its targets (the coordinator's BatchClientLimits), and so do its workers: one
// per batchTargetsPerWorker targets, at least minBatchWorkers (or one per target), at most
// maxBatchWorkers. A storm's batch of 500 services has 50, so that its services' returns wait
// on the API server's delete latency no longer than ten workers' batch of 100 did.
const (
	minBatchWorkers       = 10
	maxBatchWorkers       = 50
	batchTargetsPerWorker = 10
)

// batchWorkers is the number of workers of a batch of n targets.
func batchWorkers(n int) int {
	return min(n, max(minBatchWorkers, n/batchTargetsPerWorker), maxBatchWorkers)
}

// batchTarget is one target. Only the worker holding its key touches run and gate.
type batchTarget struct {
	ref      ServiceRef
	pods     string // the dependents' namespace; "" = every namespace (START_WHEN_READY without NAMESPACE)
	run      *runner
	gate     gateState
	nextTick time.Time   // SCHEDULE's next tick, a cycle when the gate is open; zero: none
	atStart  bool        // a plain run's first cycle (REAP_AT_START, WATCH), whatever RUN_DURATION says
	changed  changedPods // its watched pods that changed since its last turn
}

type batch struct {
	opts     Options
	single   bool   // a START_WHEN_READY or plain run: a batch of one, whose lines are a run's own
	plain    bool   // no gate (neither START_WHEN_READY nor TARGETS): pod-reaper's run
	followed string // the services followed, for errors: "service <ref> (START_WHEN_READY)" or "the targets' services (TARGETS)"
	log      logrus.FieldLogger
	rules    gateRules
	targets  []*batchTarget
	byRef    map[ServiceRef][]int // a service with dependents in several namespaces has a target for each
	byNS     map[string][]int     // by the dependents' namespace
	queue    workqueue.TypedDelayingInterface[int]
	services *serviceTracker // nil: a plain run follows no service
	pods     *podCache       // nil: cycles list (a run without WATCH or TARGETS)
	// The informers of both caches: the pods' first, then the services' (none in a plain run).
	informers []cache.SharedIndexInformer
	left      atomic.Int64
	allEnded  context.CancelFunc // stops the run once every target ended
}

func runBatch(ctx context.Context, client kubernetes.Interface, ev *events, opts Options, log logrus.FieldLogger) (Summary, error) {
	for _, w := range opts.Warnings { // accepted values worth a word, once per run
		log.WithField("setting", w).Warnf("Accepted an odd setting: %s", w)
	}
	b, err := newBatch(ctx, client, ev, opts, log)
	if err != nil {
		return Summary{}, err
	}
	if !b.single {
		log.WithField("targets", len(b.targets)).Infof("Weeder run for %d services: each is followed on its own and its dependents are restarted once it is Ready.", len(b.byRef))
	}
	if b.plain {
		b.targets[0].atStart = b.targets[0].run.startLine()
	} else {
		for _, t := range b.targets {
			t.run.armedLine(b.rules.armedAt)
		}
	}
	// One small list up front, so that a missing right fails the run at once rather than
	// leaving the informers retrying while every target waits out MAX_WAIT.
	if b.services != nil {
		if _, err := client.DiscoveryV1().EndpointSlices(b.services.namespace).List(ctx, metav1.ListOptions{LabelSelector: b.services.selector, Limit: 1}); err != nil {
			if ctx.Err() != nil {
				b.finishStopped()
				return b.total(), nil
			}
			for _, t := range b.targets {
				t.run.sum.NotStarted = true
			}
			log.WithError(err).Errorf("Cannot follow the readiness of %s; nothing was reaped.", b.followed)
			return b.total(), fmt.Errorf("listing the EndpointSlices of %s: %w", b.followed, err)
		}
	}

	bg, cancel := context.WithCancel(ctx)
	defer cancel()
	b.allEnded = cancel
	var wg sync.WaitGroup
	for _, inf := range b.informers {
		wg.Go(func() { inf.RunWithContext(bg) })
	}
	wg.Go(func() { b.whenSynced(bg) })
	start := time.Now()
	firstTick := b.nextTick(start, start)
	for i, t := range b.targets {
		t.nextTick = firstTick
		b.queue.Add(i) // MAX_WAIT counts before the caches sync too
	}
	for range batchWorkers(len(b.targets)) {
		wg.Go(func() {
			for {
				i, shutdown := b.queue.Get()
				if shutdown {
					return
				}
				b.turn(ctx, i)
				b.queue.Done(i)
			}
		})
	}
	<-bg.Done()
	b.queue.ShutDown()
	wg.Wait()
	b.finishStopped()
	sum := b.total()
	if !b.single {
		log.WithFields(logrus.Fields{"targets": len(b.targets), "reaped": sum.Reaped, "errors": sum.Errors, "deferred": sum.Deferred}).
			Infof("Weeder run for %d services finished: %s", len(b.byRef), sum)
	}
	for _, t := range b.targets {
		if t.run.lastErr != nil { // only a run whose cycles list can fail one
			return sum, fmt.Errorf("reaper: the last cycle could not list pods: %w", t.run.lastErr)
		}
	}
	return sum, nil
}

// finishStopped writes the last line of every target that SIGTERM ended before its window
// did (a run of one service: the run's last line).
func (b *batch) finishStopped() {
	for _, t := range b.targets {
		if t.gate.phase != phaseEnded {
			t.run.sum.NotStarted = t.gate.phase == phaseWaiting
			why := "asked to stop (SIGTERM or context cancelled)"
			if t.run.sum.NotStarted {
				why = fmt.Sprintf("asked to stop while waiting for service %s (SIGTERM or context cancelled); nothing was reaped", t.ref)
			}
			t.run.finishLine(why)
		}
	}
}

// newBatch builds the run's targets and caches. The gates run on the wall clock; opts.now
// (tests) is the rules' and the cooldown's clock only.
func newBatch(ctx context.Context, client kubernetes.Interface, ev *events, opts Options, log logrus.FieldLogger) (*batch, error) {
	b := &batch{
		opts: opts, log: log, single: len(opts.Targets) == 0,
		plain: len(opts.Targets) == 0 && opts.StartWhenReady == nil,
		byRef: map[ServiceRef][]int{}, byNS: map[string][]int{},
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[int]{Name: ""}),
	}
	b.rules = gateRules{runDuration: opts.RunDuration, maxWait: opts.MaxWait, armedAt: time.Now()}
	when := map[ServiceRef]podstate.ReadyWhen{}
	var selectors = opts.Selectors[:0:0]
	add := func(ref ServiceRef, pods string, one Options, log logrus.FieldLogger) {
		i := len(b.targets)
		when[ref] = one.ReadyWhen
		b.targets = append(b.targets, &batchTarget{ref: ref, pods: pods, run: newRunner(ctx, client, ev, one, log)})
		b.byRef[ref] = append(b.byRef[ref], i)
		b.byNS[pods] = append(b.byNS[pods], i)
		selectors = append(selectors, one.Selectors...)
	}
	switch {
	case b.plain:
		add(ServiceRef{}, opts.Namespace, opts, log)
		// A service Ready from the start: reaping, its window counting from the run's start.
		b.targets[0].gate = gateState{phase: phaseOpen, windowEnd: windowFrom(b.rules.armedAt, opts.RunDuration)}
	case b.single:
		b.followed = "service " + opts.StartWhenReady.String() + " (START_WHEN_READY)"
		add(*opts.StartWhenReady, opts.Namespace, opts, log)
	default:
		b.followed = "the targets' services (TARGETS)"
		for _, t := range opts.Targets {
			add(t.ref(), t.pods(), opts.forTarget(t), log.WithField("target", t.String()))
		}
	}
	b.left.Store(int64(len(b.targets)))
	if !b.plain {
		var err error
		b.services, err = newServiceTracker(client, when, func(ref ServiceRef) {
			for _, i := range b.byRef[ref] {
				b.queue.Add(i)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("following %s: %w", b.followed, err)
		}
	}
	if opts.Watch || !b.single {
		b.pods = newPodCache(client, selectors, opts.fieldSelector(), onlyOne(sets.KeySet(b.byNS)), b.podChanged)
		b.informers = append(b.informers, b.pods.informers...)
	}
	if b.services != nil {
		b.informers = append(b.informers, b.services.informer)
	}
	return b, nil
}

// podChanged hands a pod that was added or changed to the targets of its namespace, unless it
// is terminating already.
func (b *batch) podChanged(pod *corev1.Pod) {
	if pod.DeletionTimestamp != nil {
		return
	}
	key := cache.MetaObjectToName(pod)
	for _, ns := range []string{pod.Namespace, ""} { // "": the targets of every namespace
		for _, i := range b.byNS[ns] {
			b.targets[i].changed.add(key)
			b.queue.Add(i)
		}
	}
}

// whenSynced opens the gates' eyes once both caches hold the world: before, a service without
// a ready endpoint in a half-listed cache may only be unlisted yet, and a cycle over a
// half-listed pod cache would miss dependents. A plain run's gate is open from the start: the
// sync only tells that its watch is warm.
func (b *batch) whenSynced(ctx context.Context) {
	var hasSynced []cache.InformerSynced
	for _, inf := range b.informers {
		hasSynced = append(hasSynced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), hasSynced...) {
		return
	}
	if b.services != nil {
		b.services.resync()
	}
	switch {
	case !b.single:
		b.log.WithField("pod_label_selectors", fmt.Sprintf("%q", b.pods.selectors)).
			Infof("Watching the EndpointSlices of %d services and their pods with one shared cache each (cache warm): a service's dependents are reaped the moment it is Ready.", len(b.byRef))
	case b.pods != nil && b.plain:
		b.log.Info("Watching pods: a pod is reaped the moment it matches.")
	case b.pods != nil:
		b.log.Info("Watching pods (cache warm): once the gate opens, a pod is reaped the moment it matches.")
	}
	for i := range b.targets {
		b.queue.Add(i)
	}
	if b.opts.onSynced != nil {
		b.opts.onSynced()
	}
}

// nextTick is SCHEDULE's first tick after the one served (after) that is still to come at now:
// planned from the tick, not the clock, a clock reading a hair behind cannot make one tick fire
// twice, and ticks that come while a target's cycle runs are one cycle after it, not a queue
// of them. A target's ticks come on the queue (AddAfter), like its window's end.
func (b *batch) nextTick(after, now time.Time) time.Time {
	next := b.opts.Schedule.Next(after)
	for !next.IsZero() && !next.After(now) {
		next = b.opts.Schedule.Next(next)
	}
	if next.IsZero() {
		// robfig/cron's "no time within five years"; LoadOptions rejects such specs, but a
		// zero time here must not turn into a tight loop of cycles.
		b.log.Error("The schedule has no next run; no more cycles.")
	}
	return next
}

// turn moves target i's gate by what the caches say now, logs what changed and reaps while
// its gate is open: a cycle when it opens or resumes and on SCHEDULE's ticks, and the watched
// pods that changed since its last turn in between.
func (b *batch) turn(stop context.Context, i int) {
	t := b.targets[i]
	if t.gate.phase == phaseEnded {
		return
	}
	now := time.Now()
	tick := !t.nextTick.IsZero() && !now.Before(t.nextTick)
	if tick {
		t.nextTick = b.nextTick(t.nextTick, now)
	}
	gate, st := stepGate(t.gate, b.rules, b.services.view(t.ref), now)
	t.gate = gate
	r := t.run
	if st.opened {
		r.readyLine(t.ref, st.returnAt, b.rules.armedAt)
	}
	if st.resumed {
		r.resumedLine(t.ref)
		r.cool.reset() // a new return of the service is a new recovery
	}
	if st.paused {
		r.pausedLine(t.ref)
	}
	if t.atStart { // pod-reaper's one-shot run: RUN_DURATION shorter than a cycle still has one
		t.atStart = false
		b.cycle(stop, t)
	}
	if st.ended {
		b.end(t, st)
		return
	}
	if gate.reaping() && !gate.windowEnd.IsZero() { // the window's end stops a cycle between two pods
		var cancel context.CancelFunc
		stop, cancel = context.WithDeadline(stop, gate.windowEnd)
		defer cancel()
	}
	switch {
	case !gate.reaping():
		// a paused target's cycle comes with its return: the tick is spent
	case st.opened || st.resumed || tick:
		b.cycle(stop, t)
	case b.pods != nil:
		for _, key := range t.changed.take() {
			if stop.Err() != nil {
				break
			}
			if pod, ok := b.pods.get(key); ok {
				r.judge(pod)
			}
		}
	}
	for _, at := range []time.Time{st.wakeAt, t.nextTick} {
		if !at.IsZero() {
			b.queue.AddAfter(i, at.Sub(now))
		}
	}
}

// cycle runs one cycle of target t: over the pod cache, or a list (a plain run's cycles, as
// pod-reaper's, and those of a run without a pod cache). It covers the pods that changed
// before it.
func (b *batch) cycle(stop context.Context, t *batchTarget) {
	t.changed.take()
	if b.pods == nil || b.plain {
		t.run.cycleOver(stop, t.run.collect)
		return
	}
	t.run.cycleOver(stop, func(context.Context) ([]match, error) {
		return t.run.collectCached(b.pods.inNamespace(t.pods)), nil
	})
}

// end finishes target t: its own last line, as a run of its own would log it.
func (b *batch) end(t *batchTarget, st gateStep) {
	why := "RUN_DURATION elapsed"
	if st.gaveUp {
		t.run.sum.NotStarted = true
		why = t.run.maxWaitLine(t.ref)
	}
	t.run.finishLine(why)
	if b.left.Add(-1) == 0 {
		b.allEnded()
	}
}

// total adds up the targets' summaries; the run never started only if no target did.
func (b *batch) total() Summary {
	total := Summary{NotStarted: true, DryRun: b.opts.DryRun}
	for _, t := range b.targets {
		total.add(t.run.sum)
	}
	return total
}
