package podstate

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// ServiceSlices is one service's EndpointSlices as the events about them told them, folded
// in the order the events came: the one way depwatch follows "is the service back?" (the
// coordinator's weeder, and the reaper's gate in a weeder run). An event handler that judges
// the service from its own fold sees it as it was right after that event; an informer's
// cache may already hold a later event, and reading it instead could skip a short outage
// between the two.
type ServiceSlices map[string]*discoveryv1.EndpointSlice // by slice name

// Apply folds one event in: its slice (or the tombstone of one) was added or updated, or,
// with deleted, removed. Objects that are not EndpointSlices change nothing.
func (s *ServiceSlices) Apply(obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	sl, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	if deleted {
		delete(*s, sl.Name)
		return
	}
	if *s == nil {
		*s = ServiceSlices{}
	}
	(*s)[sl.Name] = sl
}

// Known: the service has at least one slice.
func (s ServiceSlices) Known() bool { return len(s) > 0 }

// Ready is w's judgement over the slices folded in.
func (s ServiceSlices) Ready(w ReadyWhen) bool {
	list := make([]*discoveryv1.EndpointSlice, 0, len(s))
	for _, sl := range s {
		list = append(list, sl)
	}
	return w.Ready(list)
}
