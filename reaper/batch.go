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

// A gated run is a batch: TARGETS is one run over many services, not many runs in one pod,
// and START_WHEN_READY is a batch of one target (its NAMESPACE, "" for every namespace, and
// its selectors as they are). One EndpointSlice informer and, with WATCH or TARGETS, one pod
// informer for all of them (no list per target); without them (a START_WHEN_READY run that
// does not watch) a cycle lists. Each target's gate and window is decided from those caches
// (stepGate) on the wall clock. A target's turn comes on a
// workqueue keyed by the target, whenever its service's readiness changes, a pod in its
// namespace changes, a SCHEDULE tick comes or its window or MAX_WAIT ends; the queue never
// hands one target to two workers at once, so a target's state needs no lock, and a few
// workers reap different targets' pods side by side, so the hundredth return is served as
// fast as the first.

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
	cycleDue atomic.Bool // a SCHEDULE tick asked for a cycle
	ended    bool
}

type batch struct {
	opts     Options
	single   bool   // a START_WHEN_READY run: a batch of one, whose lines are a run's own
	followed string // the services followed, for errors: "service <ref> (START_WHEN_READY)" or "the targets' services (TARGETS)"
	log      logrus.FieldLogger
	clock    func() time.Time
	rules    gateRules
	targets  []*batchTarget
	byRef    map[ServiceRef][]int // a service with dependents in several namespaces has a target for each
	byNS     map[string][]int     // by the dependents' namespace
	queue    workqueue.TypedDelayingInterface[int]
	services *serviceTracker
	pods     *podCache   // nil: cycles list (a START_WHEN_READY run without WATCH)
	synced   atomic.Bool // both caches have synced: the services' readiness means something
	left     atomic.Int64
	allEnded chan struct{}
}

func runBatch(ctx context.Context, client kubernetes.Interface, ev *events, opts Options, log logrus.FieldLogger) (Summary, error) {
	logOddSettings(log, opts.Warnings)
	b := newBatch(ctx, client, ev, opts, log)
	if !b.single {
		log.WithField("targets", len(b.targets)).Infof("Weeder run for %d services: each is followed on its own and its dependents are restarted once it is Ready.", len(b.byRef))
	}
	for _, t := range b.targets {
		t.run.armedLine(b.rules.armedAt)
	}
	// One small list up front, so that a missing right fails the run at once rather than
	// leaving the informers retrying while every target waits out MAX_WAIT.
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

	bg, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	b.services.factory.Start(bg.Done())
	for _, f := range b.pods.allFactories() {
		f.Start(bg.Done())
	}
	wg.Go(func() { b.whenSynced(bg) })
	wg.Go(func() { b.tick(bg) })
	for i := range b.targets {
		b.queue.Add(i) // MAX_WAIT counts before the caches sync too
	}
	for range batchWorkers(len(b.targets)) {
		wg.Go(func() {
			for b.next(ctx) {
			}
		})
	}
	select {
	case <-ctx.Done():
	case <-b.allEnded:
	}
	cancel()
	b.queue.ShutDown()
	b.services.factory.Shutdown()
	for _, f := range b.pods.allFactories() {
		f.Shutdown()
	}
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
		if !t.ended {
			t.run.sum.NotStarted = t.gate.phase == phaseWaiting
			why := whyStopped
			if t.run.sum.NotStarted {
				why = stoppedWhileWaiting(t.ref)
			}
			t.run.finishLine(why)
		}
	}
}

// newBatch builds the run's targets and caches. The gates run on the wall clock; opts.now
// (tests) is the rules' and the cooldown's clock only.
func newBatch(ctx context.Context, client kubernetes.Interface, ev *events, opts Options, log logrus.FieldLogger) *batch {
	b := &batch{
		opts: opts, log: log, clock: time.Now, single: len(opts.Targets) == 0,
		byRef: map[ServiceRef][]int{}, byNS: map[string][]int{},
		queue:    workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[int]{Name: ""}),
		allEnded: make(chan struct{}),
	}
	b.rules = gateRules{runDuration: opts.RunDuration, maxWait: opts.MaxWait, armedAt: b.clock()}
	when := map[ServiceRef]podstate.ReadyWhen{}
	var selectors = opts.Selectors[:0:0]
	podNamespaces := sets.New[string]()
	add := func(ref ServiceRef, pods string, one Options, log logrus.FieldLogger) {
		i := len(b.targets)
		when[ref] = one.ReadyWhen
		b.targets = append(b.targets, &batchTarget{ref: ref, pods: pods, run: newRunner(ctx, client, ev, one, log)})
		b.byRef[ref] = append(b.byRef[ref], i)
		b.byNS[pods] = append(b.byNS[pods], i)
		podNamespaces.Insert(pods)
		selectors = append(selectors, one.Selectors...)
	}
	if b.single {
		b.followed = "service " + opts.StartWhenReady.String() + " (START_WHEN_READY)"
		add(*opts.StartWhenReady, opts.Namespace, opts, log)
	} else {
		b.followed = "the targets' services (TARGETS)"
		for _, t := range opts.Targets {
			add(t.ref(), t.pods(), opts.forTarget(t), log.WithField("target", t.String()))
		}
	}
	b.left.Store(int64(len(b.targets)))
	b.services = newServiceTracker(client, when, b.clock, func(ref ServiceRef) {
		for _, i := range b.byRef[ref] {
			b.queue.Add(i)
		}
	})
	if opts.Watch || !b.single {
		b.pods = newPodCache(client, selectors, opts.fieldSelector(), onlyOne(podNamespaces), func(ns string) {
			for _, key := range []string{ns, ""} { // "": the targets of every namespace
				for _, i := range b.byNS[key] {
					b.queue.Add(i)
				}
			}
		})
	}
	return b
}

// whenSynced opens the gates' eyes once both caches hold the world: before, a service without
// a ready endpoint in a half-listed cache may only be unlisted yet, and a cycle over a
// half-listed pod cache would miss dependents.
func (b *batch) whenSynced(ctx context.Context) {
	synced := append([]cache.InformerSynced{b.services.informer.HasSynced}, b.pods.synced()...)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	b.synced.Store(true)
	b.services.resync()
	switch {
	case !b.single:
		b.log.WithField("pod_label_selectors", b.pods.String()).
			Infof("Watching the EndpointSlices of %d services and their pods with one shared cache each (cache warm): a service's dependents are reaped the moment it is Ready.", len(b.byRef))
	case b.pods != nil:
		b.log.Info("Watching pods (cache warm): once the gate opens, a pod is reaped the moment it matches.")
	}
	for i := range b.targets {
		b.queue.Add(i)
	}
	for _, f := range []func(){b.opts.onGateSynced, b.opts.onWatchSynced} {
		if f != nil {
			f()
		}
	}
}

// tick asks every target for a cycle on each SCHEDULE tick (over the cache: no list).
func (b *batch) tick(ctx context.Context) {
	for {
		next := b.opts.Schedule.Next(time.Now())
		if next.IsZero() {
			return
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		for i, t := range b.targets {
			t.cycleDue.Store(true)
			b.queue.Add(i)
		}
	}
}

// next handles one target's turn; false once the queue is shut down.
func (b *batch) next(stop context.Context) bool {
	i, shutdown := b.queue.Get()
	if shutdown {
		return false
	}
	defer b.queue.Done(i)
	b.turn(stop, i)
	return true
}

// turn moves target i's gate by what the caches say now, logs what changed and reaps while
// its gate is open.
func (b *batch) turn(stop context.Context, i int) {
	t := b.targets[i]
	if t.ended {
		return
	}
	now := b.clock()
	v := b.services.view(t.ref)
	v.Known = v.Known && b.synced.Load()
	gate, st := stepGate(t.gate, b.rules, v, now)
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
	if st.ended {
		b.end(t, st)
		return
	}
	switch {
	case !gate.reaping():
		t.cycleDue.Store(false) // a paused target's cycle comes with its return
	case st.opened || st.resumed || t.cycleDue.Swap(false):
		if b.pods == nil {
			r.runCycle(stop)
			break
		}
		r.cycleOver(stop, func(context.Context) ([]match, error) {
			return r.collectCached(b.pods.inNamespace(t.pods)), nil
		})
	case b.pods != nil:
		r.drainPods(stop, b.pods.inNamespace(t.pods))
	}
	if !st.wakeAt.IsZero() {
		b.queue.AddAfter(i, st.wakeAt.Sub(now))
	}
}

// end finishes target t: its own last line, as a run of its own would log it.
func (b *batch) end(t *batchTarget, st gateStep) {
	t.ended = true
	why := "RUN_DURATION elapsed"
	if st.gaveUp {
		t.run.sum.NotStarted = true
		why = t.run.maxWaitLine(t.ref)
	}
	t.run.finishLine(why)
	if b.left.Add(-1) == 0 {
		close(b.allEnded)
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

// collectCached is collect over pods from a cache: no list, the same judgement.
func (r *runner) collectCached(pods []*corev1.Pod) []match {
	now := r.clock()
	var matches []match
	for _, p := range pods {
		r.sum.Seen++
		if _, done := r.sel.done[p.UID]; done {
			r.sel.done[p.UID] = r.cycle // still there: keep remembering it
			continue
		}
		if m, ok := r.sel.evaluate(p, now); ok {
			matches = append(matches, m)
			r.sum.Matched++
		}
	}
	return matches
}

// drainPods judges the cached pods of a target's namespace after one of them changed.
func (r *runner) drainPods(stop context.Context, pods []*corev1.Pod) {
	for _, pod := range pods {
		if stop.Err() != nil {
			return
		}
		r.judge(pod)
	}
}
