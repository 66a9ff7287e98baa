package coordinator

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Observation is what the coordinator knows of one service's readiness.
type Observation struct {
	// Known: the service has endpoints objects (EndpointSlices / Endpoints) at all. A service
	// whose objects are all gone is forgotten, so its next appearance is a first sighting.
	Known bool
	// Ready: at least one endpoint is ready.
	Ready bool
}

// Action is what a change of Observation calls for.
type Action int

const (
	// ActionNone: nothing to do.
	ActionNone Action = iota
	// ActionLaunchWeeder: the service came back; restart its crash-looping dependents now.
	ActionLaunchWeeder
	// Issue #6 adds ActionArmWeeder on Ready → notReady (launch an armed weeder at the
	// outage's start); the table in decide_test.go then gains that row.
)

func (a Action) String() string {
	switch a {
	case ActionLaunchWeeder:
		return "launch-weeder"
	default:
		return "none"
	}
}

// Decide is the whole transition rule: only a known notReady service becoming Ready
// triggers. A first sighting (even Ready) is not a transition — catch-up covers a recovery
// missed while the coordinator was away; a deletion never triggers; Ready → Ready never
// triggers.
func Decide(prev, now Observation) Action {
	if !prev.Known || !now.Known {
		return ActionNone
	}
	if !prev.Ready && now.Ready {
		return ActionLaunchWeeder
	}
	return ActionNone
}

// EndpointReady follows the discovery/v1 API: a nil ready condition means ready.
func EndpointReady(e discoveryv1.Endpoint) bool {
	return e.Conditions.Ready == nil || *e.Conditions.Ready
}

// SlicesObservation aggregates one service's EndpointSlices: Known if there is any slice,
// Ready if any endpoint of any slice is ready.
func SlicesObservation(slices []*discoveryv1.EndpointSlice) Observation {
	obs := Observation{Known: len(slices) > 0}
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if EndpointReady(e) {
				obs.Ready = true
				return obs
			}
		}
	}
	return obs
}

// EndpointsObservation reads a legacy v1 Endpoints object (nil: not known): Ready if any
// subset has a ready address (notReadyAddresses do not count).
func EndpointsObservation(ep *corev1.Endpoints) Observation {
	if ep == nil {
		return Observation{}
	}
	obs := Observation{Known: true}
	for _, s := range ep.Subsets {
		if len(s.Addresses) > 0 {
			obs.Ready = true
		}
	}
	return obs
}

// CrashLooping is true when any container or init container of the pod waits in
// CrashLoopBackOff (dependency-watchdog ignores init containers; depwatch does not).
func CrashLooping(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" {
				return true
			}
		}
	}
	return false
}
