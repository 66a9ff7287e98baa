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
