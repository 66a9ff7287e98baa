package weeder

// The weeder's readiness path: an endpoints event (the source's informer) is folded into the
// service's own view (fold, through apply), and the edge it makes, if any, is queued
// (onEndpoints).

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/jobs"
)

// onEndpoints folds an endpoints event into the service's state and, when it makes an edge,
// queues the service. It makes no API call.
func (c *Controller) onEndpoints(obj any, deleted bool) {
	key, ok := c.keyOf(obj)
	if !ok {
		return
	}
	if !c.follows(key) {
		return // legacy Endpoints of every service, and slices of a name in other namespaces
	}
	now := c.now()
	c.mu.Lock()
	edge := c.fold(key, obj, deleted, now)
	c.mu.Unlock()
	if edge != nil {
		c.queue.Add(key)
	}
}

// fold applies one event to the service's view and records the edge it makes, if any, with
// its time; c.mu must be held.
func (c *Controller) fold(key string, obj any, deleted bool, now time.Time) *recordedEdge {
	st := c.state(key)
	prev := st.seen
	st.seen = c.apply(&st.view, key, obj, deleted)
	st.relevant = c.relevant(key)
	c.countReady(st)
	c.reportExclusion(key, st)
	edge := edgeOf(prev, st.seen, now)
	if !st.relevant {
		edge = nil
	}
	if edge != nil {
		if old := st.owed; old != nil && !old.catchUp && old.edge != edge.edge {
			// The queue had not reached the older edge when this one came: it is over, and
			// the action for this one is what can still help.
			c.metrics.EdgesOvertaken.WithLabelValues(old.edge.String()).Inc()
		}
		st.owed = edge
	}
	if !st.seen.Known && st.owed == nil {
		c.forget(key, st)
	}
	return edge
}

// edgeOf is the edge owed an action when a service's readiness goes from prev to now (nil:
// none).
func edgeOf(prev, now Observation, at time.Time) *recordedEdge {
	switch edge := Decide(prev, now); {
	case edge == EdgeReady:
		return &recordedEdge{edge: EdgeReady, trigger: jobs.TriggerReady, at: at}
	case edge == EdgeOutage:
		return &recordedEdge{edge: EdgeOutage, trigger: jobs.TriggerOutage, at: at}
	case edge == EdgeGone:
		return &recordedEdge{edge: EdgeGone, trigger: "gone", at: at}
	case !prev.Known && now.Ready:
		// A first sighting says nothing of what happened before it: if a dependent is
		// crash-looping, an outage the coordinator never saw may have just ended.
		return catchUpEdge(at)
	}
	return nil
}

// countReady keeps the services_ready gauge; c.mu must be held.
func (c *Controller) countReady(st *serviceState) {
	if ready := st.relevant && st.seen.Ready; ready != st.inReadyGauge {
		st.inReadyGauge = ready
		if ready {
			c.metrics.ServicesReady.Inc()
		} else {
			c.metrics.ServicesReady.Dec()
		}
	}
}

// view is the event handler's own picture of one service's endpoints objects, built from the
// events in the order they arrive. The informer's cache may already be ahead of the event
// being handled; reading it instead could skip a short outage between two events.
type view struct {
	slices podstate.ServiceSlices // EndpointSlices
	ep     *corev1.Endpoints      // legacy Endpoints
}

// serviceUID is the UID of the Service that owns the slices ("" when unknown: legacy
// Endpoints, or no slice with an owner reference).
func (v view) serviceUID() types.UID {
	for _, sl := range v.slices {
		for _, o := range sl.OwnerReferences {
			if o.Kind == "Service" && o.APIVersion == "v1" {
				return o.UID
			}
		}
	}
	return ""
}

func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// keyOf is the service key <namespace>/<name> of an endpoints object (or tombstone).
func (c *Controller) keyOf(obj any) (string, bool) {
	if c.cfg.UseEndpoints {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		return key, err == nil
	}
	keys, _ := podstate.ServiceKeys(obj)
	if len(keys) == 0 {
		return "", false
	}
	return keys[0], true
}

// apply applies one event's object (added or updated; deleted: removed) to the event
// handler's own view of its service key and returns the service's readiness after it.
func (c *Controller) apply(v *view, key string, obj any, deleted bool) Observation {
	if !c.cfg.UseEndpoints {
		v.slices.Apply(obj, deleted)
		_, svc, _ := cache.SplitMetaNamespaceKey(key)
		return Observation{Known: v.slices.Known(), Ready: v.slices.Ready(c.cfg.ReadyWhenOf(svc))}
	}
	if ep, ok := unwrap(obj).(*corev1.Endpoints); ok {
		v.ep = ep
		if deleted {
			v.ep = nil
		}
	}
	return EndpointsObservation(v.ep)
}

// Keys is the configured services whose endpoints the cache holds (<namespace>/<service>).
func (c *Controller) Keys() []string {
	if !c.cfg.UseEndpoints {
		return podstate.FollowedServices(c.src)
	}
	keys := c.src.GetIndexer().ListKeys()
	slices.Sort(keys)
	return keys
}

// newSource is the informer of where readiness comes from. By default the EndpointSlices of
// the configured service names only, in every namespace (podstate.SliceFollower: filtered
// server-side, slim, indexed by service); a weeder whose config names no service follows only
// the services workloads' annotations name (each with a follower of its own), and this one
// lists and watches nothing. With useEndpoints (clusters without EndpointSlices) legacy v1
// Endpoints, which cannot be filtered by name server-side, so objects of other services are
// cut down to their metadata before they are cached.
func newSource(client kubernetes.Interface, cfg *Config) (cache.SharedIndexInformer, error) {
	if !cfg.UseEndpoints {
		_, inf, _, err := podstate.SliceFollower(client, metav1.NamespaceAll, cfg.Services())
		return inf, err
	}
	wanted := sets.New(cfg.Services()...)
	inf := coreinformers.NewEndpointsInformer(client, metav1.NamespaceAll, 0, cache.Indexers{})
	_ = inf.SetTransform(func(obj any) (any, error) {
		ep, ok := obj.(*corev1.Endpoints)
		if !ok {
			return obj, nil
		}
		if !wanted.Has(ep.Name) {
			return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: ep.Name, Namespace: ep.Namespace, ResourceVersion: ep.ResourceVersion}}, nil
		}
		ep.ManagedFields = nil
		return ep, nil
	})
	return inf, nil
}

// serviceState is what the weeder knows of one service besides the caches.
type serviceState struct {
	// view is the handler's own picture of the service's endpoints objects, folded event by
	// event: the informer's cache may already be past the event being handled, and reading
	// it instead could skip an outage shorter than the gap between two events.
	view view
	// seen is the readiness after the last event folded: the "before" of the next edge.
	seen Observation
	// relevant: configured and in a watched namespace when last looked at. A namespace's
	// labels change it, and a service that becomes relevant counts as first seen.
	relevant bool
	// inReadyGauge: the service is counted in services_ready, so it is taken out once.
	inReadyGauge bool
	// excluded: followed, but in a namespace the config leaves out; counted in
	// weeder_services_excluded and warned about once (exclusion.go).
	excluded bool
	// owed is the edge owed an action: the last one the handler recorded, with the time it
	// happened. The sync acts on it however late the queue reaches the key, which is why no
	// outage is lost: the cache, read later, would show only where the service ended up. A
	// newer edge replaces it, because the older one is over (its outage ended, or its return
	// was followed by a new outage): the action for the newer one is what can still help.
	owed *recordedEdge
	// launched is the last weeder Job this coordinator created for the service. While the
	// Job cache has not shown it (jobExpectations), it covers the service all the same.
	launched *launchedJob
}

// onJobAdded: the view shows the run, so it is no longer only expected.
func (c *Controller) onJobAdded(r jobs.Run) {
	c.mu.Lock()
	c.expectations.observe(r.Name, c.now())
	c.mu.Unlock()
}

// state returns (creating) the state of key; c.mu must be held.
func (c *Controller) state(key string) *serviceState {
	st, ok := c.services[key]
	if !ok {
		st = &serviceState{}
		c.services[key] = st
	}
	return st
}

// recordedEdge is an edge owed an action.
type recordedEdge struct {
	edge Edge
	// trigger is the Job's trigger: ready, outage or catch-up ("gone" for EdgeGone).
	trigger string
	// at is when the handler saw the edge: the weeder's latency counts from it.
	at time.Time
	// catchUp: a Ready service first seen, or found Ready on taking the lead: act only if a
	// dependent is crash-looping, and keep any weeder already active.
	catchUp bool
	// triggerCounted: in triggers_total already (a retry does not count it again).
	triggerCounted bool
}

// catchUpEdge is the edge of a Ready service the weeder has no history of: it says nothing
// of what happened before, so a crash-looping dependent may be owed a weeder.
func catchUpEdge(at time.Time) *recordedEdge {
	return &recordedEdge{edge: EdgeReady, trigger: jobs.TriggerCatchUp, at: at, catchUp: true}
}

// launchedJob is a weeder Job this coordinator created for a service.
type launchedJob struct {
	name  string
	uid   types.UID
	armed bool
	// own: the Job covers this service alone, so it may be replaced or stopped for it.
	own bool
}

// expectationTTL is how long a created Job is expected before the Job cache shows it, as
// kube-controller-manager's ControllerExpectations do with their timeout: a Job deleted
// before the cache ever saw it would otherwise count as active for ever.
const expectationTTL = 2 * time.Minute

// jobExpectations are the weeder Jobs created (name → when) that the Job cache has not
// shown yet: expected on create, observed when the Job informer adds the Job, dropped after
// expectationTTL. Between the create and the informer's add, only they say that the service
// is covered and that the Job counts under --max-weeder-jobs. The informer may show a Job
// before its creator expects it, and it may be gone from the cache by then (an in-process run
// that ends at once): that sighting is kept, and the expectation it answers is never made.
// The caller holds Controller.mu.
type jobExpectations map[string]expectation

type expectation struct {
	at   time.Time
	seen bool // the informer showed the Job first
}

func (e jobExpectations) expect(name string, now time.Time) {
	if x, ok := e[name]; ok && x.seen {
		delete(e, name)
		return
	}
	e[name] = expectation{at: now}
}

func (e jobExpectations) observe(name string, now time.Time) {
	if x, ok := e[name]; ok && !x.seen {
		delete(e, name)
		return
	}
	e[name] = expectation{at: now, seen: true}
}

// pending: name was created, and neither observed nor expired.
func (e jobExpectations) pending(name string, now time.Time) bool {
	x, ok := e[name]
	return ok && !x.seen && now.Sub(x.at) < expectationTTL
}

// count is the number of pending expectations; expired ones (and sightings) are dropped.
func (e jobExpectations) count(now time.Time) int {
	n := 0
	for name, x := range e {
		if now.Sub(x.at) >= expectationTTL {
			delete(e, name)
			continue
		}
		if !x.seen {
			n++
		}
	}
	return n
}
