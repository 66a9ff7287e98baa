package podstate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// "Is the service back?" is followed one way, by the coordinator's weeder and by the
// reaper's gate in a weeder run alike: an EndpointSlice informer from SliceFollower, whose
// handlers fold each event into the service's ServiceSlices and judge them with its
// ReadyWhen.

// ServiceIndex names the index ServiceKeys builds.
const ServiceIndex = "depwatch-service"

// noService is a label selector that no object matches (a label both set and not set): the
// informer of a follower given no service name lists and watches nothing.
const noService = discoveryv1.LabelServiceName + ",!" + discoveryv1.LabelServiceName

// SliceFollower is the informer factory of the EndpointSlices of the named services (label
// kubernetes.io/service-name, filtered server-side; no name: a selector nothing matches), in
// namespace ("" = every namespace), and its one informer: slim (SlimEndpointSlice) and indexed
// by service (ServiceIndex). selector is the label selector, for a caller's own list.
func SliceFollower(client kubernetes.Interface, namespace string, names []string) (factory informers.SharedInformerFactory, inf cache.SharedIndexInformer, selector string, err error) {
	selector = noService
	if len(names) > 0 {
		op := selection.In
		if len(names) == 1 {
			op = selection.Equals
		}
		req, err := labels.NewRequirement(discoveryv1.LabelServiceName, op, names)
		if err != nil {
			return nil, nil, "", fmt.Errorf("building the EndpointSlice selector of services %q: %w", names, err)
		}
		selector = labels.NewSelector().Add(*req).String()
	}
	factory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = selector }),
		informers.WithTransform(TransformEndpointSlice))
	inf = factory.Discovery().V1().EndpointSlices().Informer()
	if err := inf.AddIndexers(cache.Indexers{ServiceIndex: ServiceKeys}); err != nil {
		return nil, nil, "", fmt.Errorf("indexing EndpointSlices by service: %w", err)
	}
	return factory, inf, selector, nil
}

// ServiceKeys is a cache.IndexFunc: an EndpointSlice's service as <namespace>/<name> (the
// key cache.SplitMetaNamespaceKey splits), from its kubernetes.io/service-name label. A slice
// without the label (or a tombstone of one) belongs to no service.
func ServiceKeys(obj any) ([]string, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{s.Namespace + "/" + name}, nil
}

// FollowedServices lists the services inf's cache holds slices of, in key order.
func FollowedServices(inf cache.SharedIndexInformer) []string {
	keys := inf.GetIndexer().ListIndexFuncValues(ServiceIndex)
	sort.Strings(keys)
	return keys
}

// ServiceSlices is one service's EndpointSlices as the events about them told them, folded
// in the order the events came. An event handler that judges the service from its own fold
// sees it as it was right after that event; an informer's cache may already hold a later
// event, and reading it instead could skip a short outage between the two.
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

// ReadyWhen is when a service counts as back: ReadyAny (one ready endpoint, the default, and
// dependency-watchdog v1.5's), ReadyAll (every endpoint that is not terminating is ready,
// dependency-watchdog v1.6+'s EndpointSlice semantics), or at least N ready endpoints. The
// zero value is ReadyAny. ParseReadyWhen reads what String writes.
type ReadyWhen struct {
	All bool
	Min int // ready endpoints needed when !All; 0 means 1
}

var (
	ReadyAny = ReadyWhen{}
	ReadyAll = ReadyWhen{All: true}
)

// String is "any", "all" or the minimum count.
func (w ReadyWhen) String() string {
	switch {
	case w.All:
		return "all"
	case w.Min <= 1:
		return "any"
	}
	return strconv.Itoa(w.Min)
}

// ParseReadyWhen reads "any", "all" or a count of at least 1 ("1" is "any").
func ParseReadyWhen(v string) (ReadyWhen, error) {
	switch s := strings.TrimSpace(v); s {
	case "any", "":
		return ReadyAny, nil
	case "all":
		return ReadyAll, nil
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return ReadyWhen{}, fmt.Errorf(`must be "any", "all" or a count of ready endpoints of at least 1, not %q`, v)
		}
		if n == 1 {
			return ReadyAny, nil
		}
		return ReadyWhen{Min: n}, nil
	}
}

// Ready decides whether a service with these EndpointSlices counts as back: what "the
// service is Ready" means everywhere in depwatch (the coordinator's weeder, and the gate of
// a weeder run), always over the service's slices as ServiceSlices folds them. It is a
// property of the service, not of one slice: a Service sends traffic to any ready endpoint
// of any of its slices (a large service's endpoints are spread over several; a dual-stack
// service has one per address family). A slice without endpoints says nothing is ready. An
// endpoint listed by several slices (a dual-stack service has a slice per address family; a
// slice being replaced overlaps its successor) counts once, by its target (its pod) or else
// its first address, and is ready when any copy is. A ready condition that is not set counts
// as ready (discovery/v1: "nil should be interpreted as
// true"). Terminating endpoints are never ready and are not among "all": a member that is
// being replaced does not hold its service back.
func (w ReadyWhen) Ready(slices []*discoveryv1.EndpointSlice) bool {
	ready, live := map[string]bool{}, map[string]bool{}
	for _, s := range slices {
		for i := range s.Endpoints {
			e := &s.Endpoints[i]
			key := endpointKey(e)
			isReady := e.Conditions.Ready == nil || *e.Conditions.Ready
			if e.Conditions.Terminating != nil && *e.Conditions.Terminating && !isReady {
				continue
			}
			live[key] = true
			if isReady {
				ready[key] = true
			}
		}
	}
	if w.All {
		return len(live) > 0 && len(ready) == len(live)
	}
	return len(ready) >= max(w.Min, 1)
}

// endpointKey names the thing behind an endpoint: its target object, else its address.
func endpointKey(e *discoveryv1.Endpoint) string {
	if r := e.TargetRef; r != nil && r.Name != "" {
		return "ref/" + r.Kind + "/" + r.Namespace + "/" + r.Name
	}
	if len(e.Addresses) > 0 {
		return "addr/" + e.Addresses[0]
	}
	return fmt.Sprintf("anon/%p", e) // no name at all: itself
}

// MarshalText writes String, so a readyWhen travels in JSON (a weeder Job's TARGETS) as
// "any", "all" or "2".
func (w ReadyWhen) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// UnmarshalText is ParseReadyWhen.
func (w *ReadyWhen) UnmarshalText(b []byte) error {
	v, err := ParseReadyWhen(string(b))
	if err != nil {
		return err
	}
	*w = v
	return nil
}
