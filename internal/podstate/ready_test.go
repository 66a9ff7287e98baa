package podstate

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func readySlice(name string, family discoveryv1.AddressType, ready ...*bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "shoot", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "etcd"}},
		AddressType: family,
	}
	for _, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: r}})
	}
	return s
}

// TestReadyAnyIsAPropertyOfTheServiceAcrossItsSlices: one ready endpoint in any slice makes
// the service Ready. The cases marked "differs from dependency-watchdog" are the intended
// differences documented in docs/coordinator.md (it judges each slice alone and wants every
// endpoint of it ready).
func TestReadyAnyIsAPropertyOfTheServiceAcrossItsSlices(t *testing.T) {
	v4, v6 := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	yes, no := ptr.To(true), ptr.To(false)
	tests := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   bool
	}{
		{"no slice", nil, false},
		{"one slice, every endpoint ready", []*discoveryv1.EndpointSlice{readySlice("a", v4, yes, yes)}, true},
		{"one slice, no endpoint ready", []*discoveryv1.EndpointSlice{readySlice("a", v4, no, no)}, false},
		{"one ready endpoint among not-ready ones (differs from dependency-watchdog: it wants all)", []*discoveryv1.EndpointSlice{readySlice("a", v4, no, yes)}, true},
		{"a slice without endpoints is not Ready (differs from dependency-watchdog: it takes it as ready)", []*discoveryv1.EndpointSlice{readySlice("a", v4)}, false},
		{"ready condition not set counts as ready, the API's contract (differs from dependency-watchdog)", []*discoveryv1.EndpointSlice{readySlice("a", v4, nil)}, true},
		{"ready endpoint only in the second of two slices", []*discoveryv1.EndpointSlice{readySlice("a", v4, no), readySlice("b", v4, yes)}, true},
		{"large service: many slices, none ready", []*discoveryv1.EndpointSlice{readySlice("a", v4, no), readySlice("b", v4, no), readySlice("c", v4)}, false},
		{"dual-stack: only the IPv6 slice ready", []*discoveryv1.EndpointSlice{readySlice("a", v4, no), readySlice("b", v6, yes)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReadyAny.Ready(tc.slices); got != tc.want {
				t.Errorf("ReadyAny.Ready = %v, want %v", got, tc.want)
			}
		})
	}
}
