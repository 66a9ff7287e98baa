package coordinator

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/depwatch/depwatch/reaper"
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
	// ActionStopWeeder: the service went down; a weeder still running from its last return
	// must stop, or it would restart dependents that can only crash again, every time they do.
	ActionStopWeeder
)

func (a Action) String() string {
	switch a {
	case ActionLaunchWeeder:
		return "launch-weeder"
	case ActionStopWeeder:
		return "stop-weeder"
	default:
		return "none"
	}
}

// Decide is the whole transition rule: only a known notReady service becoming Ready
// launches a weeder, and only a known Ready service becoming notReady stops one. A first
// sighting (even Ready) is not a transition — catch-up covers a recovery missed while the
// coordinator was away; a deletion never acts; Ready → Ready never acts.
func Decide(prev, now Observation) Action {
	if !prev.Known || !now.Known {
		return ActionNone
	}
	switch {
	case !prev.Ready && now.Ready:
		return ActionLaunchWeeder
	case prev.Ready && !now.Ready:
		return ActionStopWeeder
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

// CrashLooping is true when any container or init container of the pod is in crash-loop
// back-off, by the reaper's own test (so catch-up and the weeder Job agree on which pods count).
func CrashLooping(p *corev1.Pod) bool {
	_, ok := reaper.CrashLoopBackOff(p)
	return ok
}
