package podstate

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// SlicesReady is what "the service is Ready" means everywhere in depwatch (the reaper's
// START_WHEN_READY gate and the coordinator's weeder): at least one endpoint, in any of the
// service's EndpointSlices, is ready, where a ready condition that is not set counts as ready
// (the discovery/v1 contract). It is a property of the service, not of one slice: a Service
// sends traffic to any ready endpoint of any of its slices, so its dependents can work again
// as soon as one is ready, whichever slice holds it (a large service's endpoints are spread
// over several slices; a dual-stack service has one slice per address family). A slice
// without endpoints says nothing is ready. Terminating endpoints are not ready (the
// EndpointSlice controller sets ready=false for them).
func SlicesReady(slices []*discoveryv1.EndpointSlice) bool {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				return true
			}
		}
	}
	return false
}

// ServiceIndex names the index ServiceKeys builds.
const ServiceIndex = "depwatch-service"

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
