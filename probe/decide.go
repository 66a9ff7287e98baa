package probe

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// Action is what a probe decided to do with the dependents.
type Action string

const (
	ActionNone      Action = "none"       // no scaling decision at all
	ActionScaleDown Action = "scale-down" // too many node leases expired
	ActionScaleUp   Action = "scale-up"   // the leases are healthy (a no-op where replicas > 0)
)

// LeaseInput is everything the lease decision depends on. Decide has no other input, so it is
// table-tested without a cluster.
type LeaseInput struct {
	Leases []coordinationv1.Lease // the Leases in kube-node-lease
	Nodes  map[string]NodeInfo    // the existing Nodes by name
	Filter CandidateFilter        // Machines and per-pool unhealthy conditions
	Now    time.Time

	NodeMonitorGrace          time.Duration // kube-controller-manager's --node-monitor-grace-period
	LeaseExpiryBufferFraction float64       // expired at renewTime + fraction x grace
	NodeLeaseFailureFraction  float64       // scale down at expired/candidates >= fraction
}

// Decision is the outcome of the lease probe.
type Decision struct {
	Action     Action
	Reason     string
	Candidates int // leases that count (see CandidateFilter.Exclusion)
	Expired    int // of those, the expired ones
	// Excluded counts the leases left out, by reason (Excluded*).
	Excluded map[string]int
}

// Decide turns the node leases into a decision:
//   - only the leases of candidate nodes count, as dependency-watchdog counts them: the Node
//     exists and, on a Gardener seed (the Machine kind exists), is managed by MCM, none of its
//     pool's unhealthy conditions is True, a Machine that is not Failed or Terminating names
//     it, and it is not in an in-place update (CandidateFilter.Exclusion); the others are
//     counted by reason;
//   - one candidate: no decision (a single-node cluster cannot tell its kubelet from the API
//     server's load balancer failing);
//   - none: scale up (nothing indicates that kubelets cannot reach the API server);
//   - expired/candidates >= NodeLeaseFailureFraction: scale down, else scale up.
func Decide(in LeaseInput) Decision {
	d := Decision{Excluded: map[string]int{}}
	machines := machineIndex(in.Filter.Machines)
	for i := range in.Leases {
		l := &in.Leases[i]
		node, ok := in.Nodes[l.Name]
		if why := in.Filter.Exclusion(l.Name, node, ok, machines); why != "" {
			d.Excluded[why]++
			continue
		}
		d.Candidates++
		if LeaseExpired(l, in.Now, in.NodeMonitorGrace, in.LeaseExpiryBufferFraction) {
			d.Expired++
		}
	}
	left := ""
	if len(d.Excluded) > 0 {
		left = "; left out: " + FormatExclusions(d.Excluded)
	}
	switch {
	case d.Candidates == 0:
		d.Action, d.Reason = ActionScaleUp, "no node lease counts: nothing indicates a failure"+left
	case d.Candidates == 1:
		d.Action, d.Reason = ActionNone, fmt.Sprintf("only one node lease counts (%d expired): a single node cannot tell its own failure from the API server's%s", d.Expired, left)
	default:
		frac := float64(d.Expired) / float64(d.Candidates)
		d.Action = ActionScaleDown
		cmp := ">="
		if frac < in.NodeLeaseFailureFraction {
			d.Action, cmp = ActionScaleUp, "<"
		}
		d.Reason = fmt.Sprintf("%d of %d node leases expired (%.2f %s NODE_LEASE_FAILURE_FRACTION %g)%s", d.Expired, d.Candidates, frac, cmp, in.NodeLeaseFailureFraction, left)
	}
	return d
}

// LeaseExpired reports whether now > renewTime + bufferFraction x grace. A lease that was never
// renewed (no renewTime) counts as expired.
func LeaseExpired(l *coordinationv1.Lease, now time.Time, grace time.Duration, bufferFraction float64) bool {
	if l.Spec.RenewTime == nil {
		return true
	}
	buffer := time.Duration(float64(grace) * bufferFraction)
	return now.After(l.Spec.RenewTime.Add(buffer))
}
