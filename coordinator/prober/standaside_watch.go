package prober

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// standAsideKey is the queue key of the stand-aside decision (no namespace has a colon in
// its name).
const standAsideKey = "lease:dependency-watchdog-prober"

// standAsideWaitSync bounds how long leading waits for the Lease's cache before its first
// decision; a Lease still unreadable then counts as held.
const standAsideWaitSync = 30 * time.Second

// standAsideWatch follows dependency-watchdog's prober Lease: an informer on that one Lease
// (a field selector on its name), and the decision last made and said.
type standAsideWatch struct {
	lease  LeaseRef
	off    string // not followed, and why ("": followed)
	inf    cache.SharedIndexInformer
	synced func() bool
	self   *corev1.ObjectReference // what the Events are about; nil: none

	mu      sync.Mutex
	verdict StandAsideVerdict
	known   bool // verdict was made and said since this replica began to lead
}

// newStandAsideWatch follows the Lease the config names, unless the setting is off or the
// Lease is the one this coordinator elects through (dependency-watchdog's replacement): it
// queues the decision on every change of the Lease, and says why the Lease cannot be read
// when it cannot.
func (p *Controller) newStandAsideWatch(d Deps) (*standAsideWatch, error) {
	ref, on := d.Config.StandAsideLease(d.DWDLeaseNamespace)
	w := &standAsideWatch{lease: ref, self: d.Self, synced: func() bool { return true }}
	switch {
	case !on:
		w.off = "prober.standAsideForDependencyWatchdog.enabled is false: probing whether or not dependency-watchdog's prober runs"
	case d.OwnLease != nil && *d.OwnLease == ref:
		w.off = fmt.Sprintf("the Lease %s is this coordinator's own: it elects through it in dependency-watchdog's prober's place", ref)
	default:
		w.inf = coordinationinformers.NewFilteredLeaseInformer(d.Client, ref.Namespace, 0, cache.Indexers{},
			func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ref.Name).String()
			})
		_ = w.inf.SetTransform(jobs.StripManagedFields)
		w.synced = w.inf.HasSynced
		queue := func(any) { p.queue.Add(standAsideKey) }
		if _, err := w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: queue, UpdateFunc: func(_, o any) { queue(o) }, DeleteFunc: queue}); err != nil {
			return nil, fmt.Errorf("prober: the Lease %s's handler: %w", w.lease, err)
		}
		return w, w.inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			log := p.log.WithError(err).WithField("lease", w.lease.String())
			if apierrors.IsForbidden(err) {
				log.Warn("Cannot read dependency-watchdog's prober Lease: the coordinator needs get, list and watch on it (or set prober.standAsideForDependencyWatchdog.enabled: false). Until it can, the prober stands aside.")
				return
			}
			log.Warn("Cannot watch dependency-watchdog's prober Lease; retrying.")
		})
	}
	return w, nil
}

// WatchStandAside runs the Lease's informer until ctx ends (at once when there is none). It
// is not among Informers: a Lease it may not read holds back the prober alone, never the
// coordinator's readiness or the weeder.
func (p *Controller) WatchStandAside(ctx context.Context) {
	w := p.aside
	if w.inf == nil {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { w.inf.RunWithContext(ctx) })
	if cache.WaitForCacheSync(ctx.Done(), w.inf.HasSynced) {
		p.queue.Add(standAsideKey) // no Lease: no event says the cache synced
	}
}

// decide reads the cache and decides.
func (w *standAsideWatch) decide(now time.Time) StandAsideVerdict {
	in := StandAsideInput{Lease: w.lease, OffWhy: w.off, Synced: w.synced(), Now: now}
	if w.inf != nil {
		if obj, ok, err := w.inf.GetIndexer().GetByKey(w.lease.String()); err == nil && ok {
			in.Object, _ = obj.(*coordinationv1.Lease)
		}
	}
	return DecideStandAside(in)
}

// standingAside is why the prober stands aside now ("": it does not), as last decided.
func (p *Controller) standingAside() string {
	w := p.aside
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.verdict.Aside { // endStandAside resets it
		return w.verdict.Why
	}
	return ""
}

// startStandAside makes the first decision of a replica that begins to lead, before any
// namespace's: it waits (bounded) for the Lease's cache.
func (p *Controller) startStandAside(ctx context.Context) {
	w := p.aside
	if w.inf != nil && !w.synced() {
		wctx, cancel := context.WithTimeout(ctx, standAsideWaitSync)
		cache.WaitForCacheSync(wctx.Done(), w.synced)
		cancel()
	}
	p.reconcileStandAside()
}

// endStandAside forgets the decision when the replica stops leading.
func (p *Controller) endStandAside() {
	w := p.aside
	w.mu.Lock()
	w.known, w.verdict = false, StandAsideVerdict{}
	w.mu.Unlock()
	p.metrics.ProbeStandingAside.Set(0)
}

// reconcileStandAside decides again; on a change it says so (log line, Event on a change of a
// decision made before, metric) and
// looks at every namespace again: standing aside, each leaves its shard (its running Job
// stops probing it at once) and no Job is launched; no longer, each is probed as a newly
// selected one, from its initialDelay on.
func (p *Controller) reconcileStandAside() {
	w := p.aside
	now := p.now()
	v := w.decide(now)
	w.mu.Lock()
	prev, known := w.verdict, w.known
	w.verdict, w.known = v, true
	w.mu.Unlock()
	p.metrics.ProbeStandingAside.Set(map[bool]float64{true: 1}[v.Aside])
	if v.Aside && !v.Until.IsZero() {
		// Not renewed, the Lease stops counting then; a renewal queues the key sooner.
		p.queue.AddAfter(standAsideKey, max(v.Until.Sub(now), 0)+100*time.Millisecond)
	}
	if known && prev.Aside == v.Aside {
		return
	}
	log := p.log.WithFields(logrus.Fields{"lease": w.lease.String(), "holder": v.Holder, "reason": v.Why, "action": "stand-aside"})
	switch {
	case v.Aside:
		log.Warn("Standing aside: dependency-watchdog's prober holds its Lease, so this prober probes and scales nothing until that Lease is no longer renewed (prober.standAsideForDependencyWatchdog.enabled: false probes regardless).")
		p.event(corev1.EventTypeWarning, "ProberStandingAside", "The prober probes and scales nothing: "+v.Why+".")
	case known:
		log.Info("No longer standing aside: dependency-watchdog's prober does not hold its Lease; probing as usual, each namespace from its initialDelay on.")
		p.event(corev1.EventTypeNormal, "ProberResumed", "The prober probes again: "+v.Why+".")
	default:
		log.Info("Not standing aside for dependency-watchdog's prober: probing as usual.")
	}
	if known {
		p.enqueueAll()
	}
}

func (p *Controller) event(typ, reason, msg string) {
	if p.recorder != nil && p.aside.self != nil {
		p.recorder.Event(p.aside.self, typ, reason, msg)
	}
}
