package podstate

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SlimEndpointSlice is an EndpointSlice with only what ServiceKeys, ReadyWhen and an Event
// on the Service read: its identity, labels (the service's name) and owner references (the
// Service's UID), and of each endpoint its first address, target and conditions. managedFields, annotations, ports, zones, nodes and hints go: a weeder Job
// that covers a storm's thousand services keeps a thousand slices for its whole run.
func SlimEndpointSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
			Labels: s.Labels, OwnerReferences: s.OwnerReferences, DeletionTimestamp: s.DeletionTimestamp,
		},
		AddressType: s.AddressType,
	}
	if s.Endpoints != nil {
		out.Endpoints = make([]discoveryv1.Endpoint, len(s.Endpoints))
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		o := &out.Endpoints[i]
		o.Conditions = e.Conditions
		if len(e.Addresses) > 0 {
			o.Addresses = e.Addresses[:1:1] // the endpoint's key when it has no target
		}
		if r := e.TargetRef; r != nil {
			o.TargetRef = &corev1.ObjectReference{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
		}
	}
	return out
}

// TransformEndpointSlice is SlimEndpointSlice as an informer's transform; anything else (a
// tombstone) passes unchanged.
func TransformEndpointSlice(obj any) (any, error) {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		return SlimEndpointSlice(s), nil
	}
	return obj, nil
}
