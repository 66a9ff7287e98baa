package probe

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaseSet builds leases named n0, n1, ... renewed ago before testNow, all with a Node, plus
// orphans (leases without a Node) named o0, o1, ...
func leaseSet(ago []time.Duration, orphans []time.Duration) ([]coordinationv1.Lease, map[string]bool) {
	var leases []coordinationv1.Lease
	nodes := map[string]bool{}
	for i, a := range ago {
		name := fmt.Sprintf("n%d", i)
		leases = append(leases, *lease(name, a))
		nodes[name] = true
	}
	for i, a := range orphans {
		leases = append(leases, *lease(fmt.Sprintf("o%d", i), a))
	}
	return leases, nodes
}

func rep(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func TestDecide(t *testing.T) {
	const grace = 40 * time.Second // x 0.75 = expired after 30s
	tests := []struct {
		name       string
		ago        []time.Duration
		orphans    []time.Duration
		buffer     float64
		fraction   float64
		want       Action
		candidates int
		expired    int
	}{
		{name: "no leases at all: scale up", want: ActionScaleUp},
		{name: "one candidate, expired: no decision", ago: rep(expired, 1), want: ActionNone, candidates: 1, expired: 1},
		{name: "one candidate, fresh: no decision", ago: rep(fresh, 1), want: ActionNone, candidates: 1},
		{name: "all fresh: scale up", ago: rep(fresh, 5), want: ActionScaleUp, candidates: 5},
		{name: "all expired: scale down", ago: rep(expired, 5), want: ActionScaleDown, candidates: 5, expired: 5},
		{name: "6 of 10 expired = 0.6 at threshold 0.6: scale down", ago: append(rep(expired, 6), rep(fresh, 4)...), want: ActionScaleDown, candidates: 10, expired: 6},
		{name: "5 of 10 expired = 0.5 below 0.6: scale up", ago: append(rep(expired, 5), rep(fresh, 5)...), want: ActionScaleUp, candidates: 10, expired: 5},
		{name: "3 of 5 expired = 0.6 at threshold 0.6: scale down", ago: append(rep(expired, 3), rep(fresh, 2)...), want: ActionScaleDown, candidates: 5, expired: 3},
		{name: "2 of 3 expired = 0.67 below threshold 0.7: scale up", ago: append(rep(expired, 2), fresh), fraction: 0.7, want: ActionScaleUp, candidates: 3, expired: 2},
		{name: "1 of 2 expired = 0.5 at threshold 0.5: scale down", ago: []time.Duration{expired, fresh}, fraction: 0.5, want: ActionScaleDown, candidates: 2, expired: 1},
		{name: "threshold 1: all but one expired is not enough", ago: append(rep(expired, 9), fresh), fraction: 1, want: ActionScaleUp, candidates: 10, expired: 9},
		{name: "threshold 1: all expired scale down", ago: rep(expired, 4), fraction: 1, want: ActionScaleDown, candidates: 4, expired: 4},
		{name: "leases of deleted nodes are ignored (expired orphans do not scale down)", ago: rep(fresh, 3), orphans: rep(expired, 10), want: ActionScaleUp, candidates: 3},
		{name: "only orphan leases: none is a candidate, scale up", orphans: rep(expired, 4), want: ActionScaleUp},
		{name: "orphans do not make a single node decidable", ago: rep(expired, 1), orphans: rep(expired, 3), want: ActionNone, candidates: 1, expired: 1},
		{name: "renewed 35s ago: expired with buffer 0.75 (30s)", ago: rep(35*time.Second, 3), want: ActionScaleDown, candidates: 3, expired: 3},
		{name: "renewed 35s ago: not expired with buffer 1 (40s)", ago: rep(35*time.Second, 3), buffer: 1, want: ActionScaleUp, candidates: 3},
		{name: "renewed 15s ago: expired with buffer 0.25 (10s)", ago: rep(15*time.Second, 3), buffer: 0.25, want: ActionScaleDown, candidates: 3, expired: 3},
		{name: "renewed exactly at the expiry instant: not expired yet (now > expiry is required)", ago: rep(30*time.Second, 3), want: ActionScaleUp, candidates: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.buffer == 0 {
				tt.buffer = 0.75
			}
			if tt.fraction == 0 {
				tt.fraction = 0.6
			}
			leases, nodes := leaseSet(tt.ago, tt.orphans)
			d := Decide(LeaseInput{Leases: leases, Nodes: nodes, Now: testNow, NodeMonitorGrace: grace,
				LeaseExpiryBufferFraction: tt.buffer, NodeLeaseFailureFraction: tt.fraction})
			if d.Action != tt.want || d.Candidates != tt.candidates || d.Expired != tt.expired {
				t.Errorf("Decide = %s (%d of %d expired), want %s (%d of %d); reason %q",
					d.Action, d.Expired, d.Candidates, tt.want, tt.expired, tt.candidates, d.Reason)
			}
			if d.Reason == "" {
				t.Error("a decision must carry a reason")
			}
		})
	}
}

func TestLeaseWithoutRenewTimeCountsAsExpired(t *testing.T) {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	if !LeaseExpired(&l, testNow, 40*time.Second, 0.75) {
		t.Error("a lease that was never renewed must count as expired")
	}
}
