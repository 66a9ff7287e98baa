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
	Nodes  map[string]bool        // names of the existing Nodes
	Now    time.Time

	NodeMonitorGrace          time.Duration // kube-controller-manager's --node-monitor-grace-period
	LeaseExpiryBufferFraction float64       // expired at renewTime + fraction x grace
	NodeLeaseFailureFraction  float64       // scale down at expired/candidates >= fraction
}

// Decision is the outcome of the lease probe.
type Decision struct {
	Action     Action
	Reason     string
	Candidates int // leases of existing Nodes
	Expired    int // of those, the expired ones
}

// Decide turns the node leases into a decision:
//   - only leases whose Node exists count (a deleted Node's lease can linger);
//   - one candidate: no decision (a single-node cluster cannot tell its kubelet from the API
//     server's load balancer failing);
//   - none: scale up (nothing indicates that kubelets cannot reach the API server);
//   - expired/candidates >= NodeLeaseFailureFraction: scale down, else scale up.
func Decide(in LeaseInput) Decision {
	var d Decision
	for i := range in.Leases {
		l := &in.Leases[i]
		if !in.Nodes[l.Name] {
			continue
		}
		d.Candidates++
		if LeaseExpired(l, in.Now, in.NodeMonitorGrace, in.LeaseExpiryBufferFraction) {
			d.Expired++
		}
	}
	switch {
	case d.Candidates == 0:
		d.Action, d.Reason = ActionScaleUp, "no node lease of an existing Node: nothing indicates a failure"
	case d.Candidates == 1:
		d.Action, d.Reason = ActionNone, fmt.Sprintf("only one node lease (%d expired): a single node cannot tell its own failure from the API server's", d.Expired)
	default:
		frac := float64(d.Expired) / float64(d.Candidates)
		if frac >= in.NodeLeaseFailureFraction {
			d.Action = ActionScaleDown
			d.Reason = fmt.Sprintf("%d of %d node leases expired (%.2f >= NODE_LEASE_FAILURE_FRACTION %g)", d.Expired, d.Candidates, frac, in.NodeLeaseFailureFraction)
		} else {
			d.Action = ActionScaleUp
			d.Reason = fmt.Sprintf("%d of %d node leases expired (%.2f < NODE_LEASE_FAILURE_FRACTION %g)", d.Expired, d.Candidates, frac, in.NodeLeaseFailureFraction)
		}
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
