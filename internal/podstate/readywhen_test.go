package podstate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// ep is an endpoint of pod name; ready and terminating nil mean not set.
func ep(name string, ready, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{"10.0.0." + name},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating},
	}
}

func slice(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{Endpoints: eps}
}

var yes, no = ptr.To(true), ptr.To(false)

// TestReadyWhen: when a service counts as back, for each readyWhen.
func TestReadyWhen(t *testing.T) {
	two := ReadyWhen{Min: 2}
	tests := []struct {
		name           string
		slices         []*discoveryv1.EndpointSlice
		any, all, min2 bool
	}{
		{"no slice", nil, false, false, false},
		{"a slice without endpoints", []*discoveryv1.EndpointSlice{slice()}, false, false, false},
		{"etcd: two of three members ready", []*discoveryv1.EndpointSlice{slice(ep("1", yes, nil), ep("2", yes, nil), ep("3", no, nil))}, true, false, true},
		{"every member ready", []*discoveryv1.EndpointSlice{slice(ep("1", yes, nil), ep("2", yes, nil), ep("3", yes, nil))}, true, true, true},
		{"ready not set counts as ready", []*discoveryv1.EndpointSlice{slice(ep("1", nil, nil), ep("2", nil, nil))}, true, true, true},
		{"a terminating member does not hold all back", []*discoveryv1.EndpointSlice{slice(ep("1", yes, nil), ep("2", no, yes))}, true, true, false},
		{"only terminating members", []*discoveryv1.EndpointSlice{slice(ep("1", no, yes))}, false, false, false},
		{"a terminating member still ready counts", []*discoveryv1.EndpointSlice{slice(ep("1", yes, yes), ep("2", yes, nil))}, true, true, true},
		{"one pod in two slices (dual-stack) counts once", []*discoveryv1.EndpointSlice{slice(ep("1", yes, nil)), slice(ep("1", yes, nil))}, true, true, false},
		{"a duplicate ready in one copy is ready", []*discoveryv1.EndpointSlice{slice(ep("1", no, nil)), slice(ep("1", yes, nil)), slice(ep("2", yes, nil))}, true, true, true},
		{"members across slices", []*discoveryv1.EndpointSlice{slice(ep("1", yes, nil)), slice(ep("2", no, nil))}, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				w    ReadyWhen
				want bool
			}{{ReadyAny, tt.any}, {ReadyAll, tt.all}, {two, tt.min2}} {
				if got := c.w.Ready(tt.slices); got != c.want {
					t.Errorf("readyWhen %s: Ready = %v, want %v", c.w, got, c.want)
				}
			}
		})
	}
}

// TestParseReadyWhenRoundTrip: ParseReadyWhen reads what String writes, and refuses the rest.
func TestParseReadyWhenRoundTrip(t *testing.T) {
	for _, w := range []ReadyWhen{ReadyAny, ReadyAll, {Min: 2}, {Min: 5}} {
		got, err := ParseReadyWhen(w.String())
		if err != nil || got != w {
			t.Errorf("ParseReadyWhen(%q) = %+v, %v; want %+v", w.String(), got, err, w)
		}
	}
	if got, err := ParseReadyWhen("1"); err != nil || got != ReadyAny {
		t.Errorf(`ParseReadyWhen("1") = %+v, %v; want any`, got, err)
	}
	for _, bad := range []string{"0", "-1", "some", "2.5", "ALL"} {
		if _, err := ParseReadyWhen(bad); err == nil {
			t.Errorf("ParseReadyWhen(%q) accepted", bad)
		}
	}
}
