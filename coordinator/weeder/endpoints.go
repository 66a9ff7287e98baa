package weeder

// The weeder's readiness path: an endpoints event (the source's informer) is folded into the
// service's own view (fold, through the source's ApplyEvent), and the edge it makes, if any,
// is queued (onEndpoints).

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/jobs"
)

// onEndpoints folds an endpoints event into the service's state and, when it makes an edge,
// queues the service. It makes no API call.
func (c *Controller) onEndpoints(obj any, deleted bool) {
	key, ok := c.src.KeyOf(obj)
	if !ok {
		return
	}
	if !c.follows(c.running, key) {
		return // legacy Endpoints of every service, and slices of a name in other namespaces
	}
	rc, now := c.running, c.now()
	c.mu.Lock()
	edge := c.fold(rc, key, obj, deleted, now)
	c.mu.Unlock()
	if edge != nil {
		c.queue.Add(key)
	}
}

// fold applies one event to the service's view and records the edge it makes, if any, with
// its time; c.mu must be held.
func (c *Controller) fold(rc *runningConfig, key string, obj any, deleted bool, now time.Time) *recordedEdge {
	st := c.state(key)
	prev := st.seen
	st.seen = c.src.ApplyEvent(&st.view, obj, deleted)
	st.relevant = c.relevant(rc, key)
	c.countReady(st)
	c.reportExclusion(rc, key, st)
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

// source is where readiness comes from: EndpointSlices (default) or legacy Endpoints.
type source interface {
	Informer() cache.SharedIndexInformer
	// KeyOf maps an informer object (or tombstone) to its service key <namespace>/<name>.
	KeyOf(obj any) (string, bool)
	// Keys lists the services present in the cache.
	Keys() []string
	// ApplyEvent applies one event's object (added or updated; deleted: removed) to the
	// event handler's own view of its service and returns the service's readiness after it.
	ApplyEvent(v *view, obj any, deleted bool) Observation
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

// sliceSource watches discovery/v1 EndpointSlices of the configured service names only, in
// every namespace (podstate.SliceFollower: filtered server-side, slim, indexed by service).
// readyWhen says when a service (its name) counts as back. A weeder whose config names no
// service follows only the services workloads' annotations name (each with a follower of its
// own); its own lists and watches nothing.
type sliceSource struct {
	inf       cache.SharedIndexInformer
	readyWhen func(service string) podstate.ReadyWhen
}

func newSliceSource(client kubernetes.Interface, services []string, readyWhen func(string) podstate.ReadyWhen) (*sliceSource, error) {
	_, inf, _, err := podstate.SliceFollower(client, metav1.NamespaceAll, services)
	if err != nil {
		return nil, err
	}
	return &sliceSource{inf: inf, readyWhen: readyWhen}, nil
}

func (s *sliceSource) Informer() cache.SharedIndexInformer { return s.inf }

func (s *sliceSource) KeyOf(obj any) (string, bool) {
	keys, _ := podstate.ServiceKeys(obj)
	if len(keys) == 0 {
		return "", false
	}
	return keys[0], true
}

func (s *sliceSource) ApplyEvent(v *view, obj any, deleted bool) Observation {
	v.slices.Apply(obj, deleted)
	key, _ := s.KeyOf(obj) // the service the event is for: the view's
	_, svc, _ := cache.SplitMetaNamespaceKey(key)
	return Observation{Known: v.slices.Known(), Ready: v.slices.Ready(s.readyWhen(svc))}
}

func (s *sliceSource) Keys() []string { return podstate.FollowedServices(s.inf) }

// endpointsSource watches legacy v1 Endpoints (--use-endpoints, for clusters without
// EndpointSlices). Endpoints cannot be filtered by name server-side, so objects of other
// services are cut down to their metadata before they are cached.
type endpointsSource struct{ inf cache.SharedIndexInformer }

func newEndpointsSource(client kubernetes.Interface, services []string) *endpointsSource {
	wanted := map[string]bool{}
	for _, s := range services {
		wanted[s] = true
	}
	inf := coreinformers.NewEndpointsInformer(client, metav1.NamespaceAll, 0, cache.Indexers{})
	_ = inf.SetTransform(func(obj any) (any, error) {
		ep, ok := obj.(*corev1.Endpoints)
		if !ok {
			return obj, nil
		}
		if !wanted[ep.Name] {
			return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: ep.Name, Namespace: ep.Namespace, ResourceVersion: ep.ResourceVersion}}, nil
		}
		ep.ManagedFields = nil
		return ep, nil
	})
	return &endpointsSource{inf: inf}
}

func (s *endpointsSource) Informer() cache.SharedIndexInformer { return s.inf }

func (s *endpointsSource) KeyOf(obj any) (string, bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return key, err == nil
}

func (s *endpointsSource) ApplyEvent(v *view, obj any, deleted bool) Observation {
	if ep, ok := unwrap(obj).(*corev1.Endpoints); ok {
		v.ep = ep
		if deleted {
			v.ep = nil
		}
	}
	return EndpointsObservation(v.ep)
}

func (s *endpointsSource) Keys() []string {
	keys := s.inf.GetIndexer().ListKeys()
	sort.Strings(keys)
	return keys
}
