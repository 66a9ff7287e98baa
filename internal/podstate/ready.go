package podstate

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

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
