package podstate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A slimmed slice is judged as the full one, and keeps its service's key and owner.
func TestSlimEndpointSliceKeepsWhatReadinessReads(t *testing.T) {
	full := func(name, pod string, ready bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "svc"},
				Annotations:     map[string]string{"a": "b"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "svc", UID: "svc-uid"}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{"10.0.0.1", "10.0.0.2"},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Terminating: ptr.To(false)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: pod, UID: "u"},
				NodeName:   ptr.To("node"),
			}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}},
		}
	}
	for _, when := range []ReadyWhen{ReadyAny, {All: true}, {Min: 2}} {
		for _, set := range [][]*discoveryv1.EndpointSlice{
			{full("a", "p1", true)},
			{full("a", "p1", false)},
			{full("a", "p1", true), full("b", "p1", false)}, // the same pod twice: counts once
			{full("a", "p1", true), full("b", "p2", true)},
		} {
			slim := make([]*discoveryv1.EndpointSlice, len(set))
			for i, s := range set {
				slim[i] = SlimEndpointSlice(s)
			}
			if got, want := when.Ready(slim), when.Ready(set); got != want {
				t.Errorf("%v over %d slices: slim %v, full %v", when, len(set), got, want)
			}
		}
	}
	s, _ := TransformEndpointSlice(full("a", "p1", true))
	sl := s.(*discoveryv1.EndpointSlice)
	if sl.ManagedFields != nil || sl.Annotations != nil || sl.Ports != nil || sl.Endpoints[0].NodeName != nil {
		t.Errorf("kept what nothing reads: %+v", sl)
	}
	// An Event on the Service takes its UID from the slice's owner (kubectl describe matches by it).
	if len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].UID != "svc-uid" {
		t.Errorf("owner references = %v, want the Service's", sl.OwnerReferences)
	}
	if keys, _ := ServiceKeys(sl); len(keys) != 1 || keys[0] != "ns/svc" {
		t.Errorf("ServiceKeys = %v, want [ns/svc]", keys)
	}
}
