package weeder

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Observation is what the coordinator knows of one service's readiness.
type Observation struct {
	// Known: the service has endpoints objects (EndpointSlices / Endpoints) at all. A service
	// whose objects are all gone is forgotten, so its next appearance is a first sighting.
	Known bool
	// Ready: at least one endpoint is ready.
	Ready bool
}

// Edge is the transition a change of Observation makes.
type Edge int

const (
	// EdgeNone: no transition (Ready → Ready, notReady → notReady, first sighting, delete).
	EdgeNone Edge = iota
	// EdgeReady: the service came back (notReady → Ready).
	EdgeReady
	// EdgeOutage: the service went down (Ready → notReady).
	EdgeOutage
	// EdgeGone: the service's endpoints objects are gone (the Service was deleted, or its
	// namespace is being deleted). It never launches; it may clean up (PlanWeeder).
	EdgeGone
)

func (e Edge) String() string { return nameOf(e, "none", "ready", "outage", "gone") }

// nameOf is names[i], or names[0] for a value without a name.
func nameOf[T ~int](i T, names ...string) string {
	if i < 0 || int(i) >= len(names) {
		return names[0]
	}
	return names[i]
}

// Decide is the whole transition rule: only a known notReady service becoming Ready is a
// return, and only a known Ready service becoming notReady is an outage. A first sighting
// (even Ready) is not a transition — catch-up covers a recovery missed while the
// coordinator was away; a known service whose endpoints objects are all gone is EdgeGone;
// Ready → Ready is none.
func Decide(prev, now Observation) Edge {
	if prev.Known && !now.Known {
		return EdgeGone
	}
	if !prev.Known || !now.Known {
		return EdgeNone
	}
	switch {
	case !prev.Ready && now.Ready:
		return EdgeReady
	case prev.Ready && !now.Ready:
		return EdgeOutage
	}
	return EdgeNone
}

// ActiveWeeder is what the coordinator finds of a service's weeder Jobs that have not
// finished (running or pending) when it acts on an edge.
type ActiveWeeder int

const (
	NoWeeder      ActiveWeeder = iota
	UnarmedWeeder              // reaping now (launched on a return, by catch-up or by hand)
	ArmedWeeder                // waiting for the service, or reaping since it came back
)

// Action is what the coordinator does for one edge of one service.
type Action int

const (
	// ActionNone: nothing to do.
	ActionNone Action = iota
	// ActionLaunchWeeder: the service is Ready: launch a weeder that reaps at once, replacing
	// an unarmed one still running (its watchDuration starts afresh).
	ActionLaunchWeeder
	// ActionArmWeeder: the outage began: launch a weeder armed (START_WHEN_READY), replacing
	// an unarmed one still running, which would only restart dependents that crash again.
	ActionArmWeeder
	// ActionKeepWeeder: an armed weeder is active: it handles this edge itself (it starts
	// reaping when the service is Ready, pauses while it is down again); launch nothing.
	ActionKeepWeeder
	// ActionStopWeeder: arming is off: the service went down, so its
	// running weeder is stopped; a new one is launched when it is Ready again.
	ActionStopWeeder
)

func (a Action) String() string {
	return nameOf(a, "none", "launch-weeder", "arm-weeder", "keep-weeder", "stop-weeder")
}

// WeederInput is everything PlanWeeder decides on.
type WeederInput struct {
	// Edge is EdgeReady for a return and for catch-up (the service is Ready with crash-looping
	// dependents), EdgeOutage when it went down, EdgeGone when its endpoints objects are gone.
	Edge Edge
	// Arm is the service's arm switch (its own `arm`, else `armWeeder`).
	Arm bool
	// Active is what runs for the service now.
	Active ActiveWeeder
	// CatchUp: the edge is a catch-up (the service found Ready with a crash-looping
	// dependent): any active weeder, armed or not, already covers it.
	CatchUp bool
	// Going (looked up on EdgeOutage and EdgeGone only): the service's namespace is being
	// deleted or is gone, or, on an outage, the Service itself is: it is not coming back.
	Going bool
}

// PlanWeeder is the whole weeder rule, pure.
//
//   - An active armed weeder is kept on either edge: it opens when the service is Ready and
//     keeps reaping for watchDuration from then, pausing while the service is down again. A
//     flapping service therefore keeps one Job, and a second return costs no Job start-up.
//     This holds with arm off too (the switch was turned off while it waited).
//   - A catch-up keeps any active weeder: it is there for what catch-up found.
//   - Ready, no armed weeder (it expired after MAX_WAIT, the coordinator was down when the
//     outage began, or arming is off): launch an unarmed weeder.
//   - Outage with arm on: launch an armed weeder (replacing an unarmed one).
//   - Outage with arm off: stop the running weeder, if any: restarting dependents while
//     the service is down only makes them crash again.
//   - A service that is going away (its namespace or the Service being deleted) is never
//     armed, and its active weeder, armed or not, is stopped: an armed one would otherwise
//     wait MAX_WAIT (6h) for nothing. A Service deleted in a namespace that stays keeps its
//     armed weeder: if it is created again and becomes Ready, the weeder opens.
func PlanWeeder(in WeederInput) Action {
	switch {
	case in.Edge == EdgeNone:
		return ActionNone
	case in.Edge == EdgeGone || in.Going:
		if in.Going && in.Active != NoWeeder {
			return ActionStopWeeder
		}
		return ActionNone
	case in.Active == ArmedWeeder, in.CatchUp && in.Active != NoWeeder:
		return ActionKeepWeeder
	case in.Edge == EdgeReady:
		return ActionLaunchWeeder
	case in.Arm:
		return ActionArmWeeder
	case in.Active == NoWeeder:
		return ActionNone
	default:
		return ActionStopWeeder
	}
}

// EndpointsObservation reads a legacy v1 Endpoints object (nil: not known): Ready if any
// subset has a ready address (notReadyAddresses do not count).
func EndpointsObservation(ep *corev1.Endpoints) Observation {
	if ep == nil {
		return Observation{}
	}
	return Observation{Known: true, Ready: slices.ContainsFunc(ep.Subsets, func(s corev1.EndpointSubset) bool { return len(s.Addresses) > 0 })}
}
