package weeder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/internal/podstate"
)

func TestDecideTransitionTable(t *testing.T) {
	unknown := Observation{}
	down := Observation{Known: true}
	up := Observation{Known: true, Ready: true}
	cases := []struct {
		name      string
		prev, now Observation
		want      Edge
	}{
		{"notReady → Ready is a return", down, up, EdgeReady},
		{"Ready → Ready is none", up, up, EdgeNone},
		{"Ready → notReady is an outage", up, down, EdgeOutage},
		{"notReady → notReady is none", down, down, EdgeNone},
		{"first seen Ready is not a transition", unknown, up, EdgeNone},
		{"first seen notReady is not a transition", unknown, down, EdgeNone},
		{"deleted while Ready is gone", up, unknown, EdgeGone},
		{"deleted while notReady is gone", down, unknown, EdgeGone},
		{"unknown and still unknown is none", unknown, unknown, EdgeNone},
	}
	for _, tc := range cases {
		if got := Decide(tc.prev, tc.now); got != tc.want {
			t.Errorf("%s: Decide = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestPlanWeederTable(t *testing.T) {
	cases := []struct {
		name string
		in   WeederInput
		want Action
	}{
		// Arming on (the default).
		{"outage, nothing running: arm a weeder", WeederInput{Edge: EdgeOutage, Arm: true}, ActionArmWeeder},
		{"outage while an unarmed weeder reaps: replace it with an armed one", WeederInput{Edge: EdgeOutage, Arm: true, Active: UnarmedWeeder}, ActionArmWeeder},
		{"outage while an armed weeder is active (flapping): keep it, it pauses", WeederInput{Edge: EdgeOutage, Arm: true, Active: ArmedWeeder}, ActionKeepWeeder},
		{"return with an armed weeder waiting: keep it, it opens by itself", WeederInput{Edge: EdgeReady, Arm: true, Active: ArmedWeeder}, ActionKeepWeeder},
		{"return without an armed weeder (expired, coordinator was down): launch unarmed", WeederInput{Edge: EdgeReady, Arm: true}, ActionLaunchWeeder},
		{"return while an unarmed weeder runs: replace it", WeederInput{Edge: EdgeReady, Arm: true, Active: UnarmedWeeder}, ActionLaunchWeeder},
		// Arming off: the weeder is launched on the return, and stopped when the service goes down.
		{"arm off, outage, weeder running: stop it", WeederInput{Edge: EdgeOutage, Active: UnarmedWeeder}, ActionStopWeeder},
		{"arm off, outage, nothing running: nothing", WeederInput{Edge: EdgeOutage}, ActionNone},
		{"arm off, return: launch", WeederInput{Edge: EdgeReady}, ActionLaunchWeeder},
		{"arm off, return, an armed weeder left from before: keep it", WeederInput{Edge: EdgeReady, Active: ArmedWeeder}, ActionKeepWeeder},
		{"arm off, outage, an armed weeder left from before: keep it", WeederInput{Edge: EdgeOutage, Active: ArmedWeeder}, ActionKeepWeeder},
		// Going away: never armed, its weeder stopped.
		{"outage of a service being deleted: not armed", WeederInput{Edge: EdgeOutage, Arm: true, Going: true}, ActionNone},
		{"outage of a service being deleted, unarmed weeder running: stop it", WeederInput{Edge: EdgeOutage, Arm: true, Active: UnarmedWeeder, Going: true}, ActionStopWeeder},
		{"outage of a service being deleted, armed weeder waiting: stop it", WeederInput{Edge: EdgeOutage, Arm: true, Active: ArmedWeeder, Going: true}, ActionStopWeeder},
		{"gone with its namespace, armed weeder waiting: stop it", WeederInput{Edge: EdgeGone, Arm: true, Active: ArmedWeeder, Going: true}, ActionStopWeeder},
		{"gone, namespace stays: keep the armed weeder (the service may come back)", WeederInput{Edge: EdgeGone, Arm: true, Active: ArmedWeeder}, ActionNone},
		{"gone, nothing running", WeederInput{Edge: EdgeGone, Arm: true, Going: true}, ActionNone},
		// No edge.
		{"no edge", WeederInput{Arm: true, Active: ArmedWeeder}, ActionNone},
		{"no edge, nothing", WeederInput{}, ActionNone},
	}
	for _, tc := range cases {
		if got := PlanWeeder(tc.in); got != tc.want {
			t.Errorf("%s: PlanWeeder = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func ep(ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

func slice(ns, svc, name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
	}
}

func TestReadinessAggregatesAcrossTheServiceSlices(t *testing.T) {
	cases := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   Observation
	}{
		{"no slices: unknown", nil, Observation{}},
		{"one empty slice: known, not ready", []*discoveryv1.EndpointSlice{slice("n", "s", "a")}, Observation{Known: true}},
		{"only not-ready endpoints", []*discoveryv1.EndpointSlice{slice("n", "s", "a", ep(ptr.To(false)), ep(ptr.To(false)))}, Observation{Known: true}},
		{"a ready endpoint", []*discoveryv1.EndpointSlice{slice("n", "s", "a", ep(ptr.To(false)), ep(ptr.To(true)))}, Observation{Known: true, Ready: true}},
		{"nil ready counts as ready", []*discoveryv1.EndpointSlice{slice("n", "s", "a", ep(nil))}, Observation{Known: true, Ready: true}},
		{"ready endpoint in the second slice", []*discoveryv1.EndpointSlice{slice("n", "s", "a", ep(ptr.To(false))), slice("n", "s", "b", ep(ptr.To(true)))}, Observation{Known: true, Ready: true}},
	}
	for _, tc := range cases {
		if got := observeSlices(tc.slices, podstate.ReadyAny); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestLegacyEndpointsReadiness(t *testing.T) {
	cases := []struct {
		name string
		ep   *corev1.Endpoints
		want Observation
	}{
		{"absent", nil, Observation{}},
		{"no subsets", &corev1.Endpoints{}, Observation{Known: true}},
		{"only notReadyAddresses", &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{{IP: "1.2.3.4"}}}}}, Observation{Known: true}},
		{"a ready address", &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{}, {Addresses: []corev1.EndpointAddress{{IP: "1.2.3.4"}}}}}, Observation{Known: true, Ready: true}},
	}
	for _, tc := range cases {
		if got := EndpointsObservation(tc.ep); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func crashPod(ns, name string, lbl map[string]string, init bool) *corev1.Pod {
	st := corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl}}
	if init {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{st}
	} else {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
	}
	return p
}

// observeSlices is what the slice source's fold makes of these slices, one event each.
func observeSlices(slices []*discoveryv1.EndpointSlice, when podstate.ReadyWhen) Observation {
	var v podstate.ServiceSlices
	for _, sl := range slices {
		v.Apply(sl, false)
	}
	return Observation{Known: v.Known(), Ready: v.Ready(when)}
}
