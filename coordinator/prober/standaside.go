package prober

import (
	"cmp"
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
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/jobs"
)

// On a seed where dependency-watchdog's prober still runs, a second prober would scale the
// same controllers. dependency-watchdog's prober elects its leader through a Lease
// (controller-runtime, id dwd-prober-leader-election, in its --leader-election-namespace,
// default garden, where gardenlet deploys it); while that Lease is live, depwatch's prober
// stands aside: it probes and scales nothing, and says so.

// Defaults of prober.standAsideForDependencyWatchdog: dependency-watchdog's.
const (
	// DefaultDWDLeaseNamespace is dependency-watchdog's --leader-election-namespace default
	// (gardenlet passes none and deploys it in garden).
	DefaultDWDLeaseNamespace = "garden"
	// DefaultDWDLeaseName is the id dependency-watchdog's prober elects through.
	DefaultDWDLeaseName = "dwd-prober-leader-election"
	// StandAsideGrace is added to a Lease's renewTime + leaseDurationSeconds before it counts
	// as no longer renewed: the holder's clock and ours may differ a little.
	StandAsideGrace = 5 * time.Second
)

// StandAside is prober.standAsideForDependencyWatchdog:
//
//	standAsideForDependencyWatchdog:
//	  enabled: true                          # false: probe whatever dependency-watchdog does
//	  namespace: garden                      # its --leader-election-namespace
//	  leaseName: dwd-prober-leader-election  # its prober's Lease
type StandAside struct {
	Enabled   *bool  `json:"enabled,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	LeaseName string `json:"leaseName,omitempty"`
}

// LeaseRef names a Lease.
type LeaseRef struct {
	Namespace, Name string
}

func (r LeaseRef) String() string { return r.Namespace + "/" + r.Name }

// StandAsideLease is the Lease the prober stands aside for, and whether it does at all.
// defaultNamespace is the namespace when the config names none ("": garden).
func (p *Config) StandAsideLease(defaultNamespace string) (LeaseRef, bool) {
	s := ptr.Deref(p.StandAsideForDependencyWatchdog, StandAside{})
	return LeaseRef{Namespace: cmp.Or(s.Namespace, defaultNamespace, DefaultDWDLeaseNamespace), Name: cmp.Or(s.LeaseName, DefaultDWDLeaseName)},
		ptr.Deref(s.Enabled, true)
}

// StandAsideInput is everything the decision to stand aside depends on.
type StandAsideInput struct {
	Lease LeaseRef
	// OffWhy: why it never stands aside ("": it may): the setting is disabled, or the Lease
	// is the coordinator's own (it elects through it as dependency-watchdog's replacement).
	OffWhy string
	// Synced: the Lease's cache has synced (Found and Object are known).
	Synced bool
	Object *coordinationv1.Lease // nil: no such Lease
	Now    time.Time
}

// StandAsideVerdict is DecideStandAside's answer.
type StandAsideVerdict struct {
	Aside  bool
	Holder string
	// Why is a sentence for the log, the Event and the paused namespaces' reason.
	Why string
	// Until: when the Lease, not renewed, stops counting: look again then (zero: only on
	// the Lease's next change).
	Until time.Time
}

// DecideStandAside: the prober stands aside while dependency-watchdog's prober holds its
// Lease: a holder is set and renewTime + leaseDurationSeconds
// + StandAsideGrace is still ahead. A Lease that cannot be read yet counts as held: the
// prober does not act on what it cannot see.
func DecideStandAside(in StandAsideInput) StandAsideVerdict {
	switch {
	case in.OffWhy != "":
		return StandAsideVerdict{Why: in.OffWhy}
	case !in.Synced:
		return StandAsideVerdict{Aside: true, Why: fmt.Sprintf("the Lease %s of dependency-watchdog's prober cannot be read yet (the coordinator needs get, list and watch on it)", in.Lease)}
	case in.Object == nil:
		return StandAsideVerdict{Why: fmt.Sprintf("no Lease %s: dependency-watchdog's prober does not run", in.Lease)}
	}
	l := in.Object.Spec
	holder := ptr.Deref(l.HolderIdentity, "")
	renewed := ptr.Deref(l.RenewTime, ptr.Deref(l.AcquireTime, metav1.MicroTime{})).Time
	until := renewed.Add(time.Duration(ptr.Deref(l.LeaseDurationSeconds, 0))*time.Second + StandAsideGrace)
	switch {
	case holder == "":
		return StandAsideVerdict{Why: fmt.Sprintf("the Lease %s has no holder: dependency-watchdog's prober released it", in.Lease)}
	case renewed.IsZero():
		return StandAsideVerdict{Holder: holder, Why: fmt.Sprintf("the Lease %s held by %s was never renewed", in.Lease, holder)}
	case !in.Now.Before(until):
		return StandAsideVerdict{Holder: holder, Why: fmt.Sprintf("the Lease %s held by %s has not been renewed since %s (it expired at %s)",
			in.Lease, holder, renewed.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))}
	}
	return StandAsideVerdict{Aside: true, Holder: holder, Until: until,
		Why: fmt.Sprintf("dependency-watchdog's prober (%s) holds the Lease %s, renewed at %s: two probers would scale the same controllers",
			holder, in.Lease, renewed.UTC().Format(time.RFC3339))}
}

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
