package probe

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaseSet builds leases named n0, n1, ... renewed ago before testNow, all with a Node, plus
// orphans (leases without a Node) named o0, o1, ...
func leaseSet(ago []time.Duration, orphans []time.Duration) ([]coordinationv1.Lease, map[string]NodeInfo) {
	var leases []coordinationv1.Lease
	nodes := map[string]NodeInfo{}
	for i, a := range ago {
		name := fmt.Sprintf("n%d", i)
		leases = append(leases, *lease(name, a))
		nodes[name] = NodeInfo{}
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

// Each of dependency-watchdog's candidate rules on its own: a lease counts only when its Node
// exists, is managed by MCM, has none of its pool's unhealthy conditions True, has a Machine
// that is not Failed or Terminating (where the Machine kind exists), and is not in an
// in-place update.
func TestLeaseCandidatesAsDependencyWatchdogCountsThem(t *testing.T) {
	cond := func(typ string, status corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status, Reason: reason}
	}
	running := []MachineInfo{{Name: "m", Node: "n", Phase: "Running"}}
	// gardener is a Gardener seed's filter: n has a Running Machine.
	gardener := func(conds map[string][]string) CandidateFilter {
		return CandidateFilter{Machines: running, NodeConditions: conds}
	}
	tests := []struct {
		name     string
		node     *NodeInfo // nil: no Node
		filter   CandidateFilter
		excluded string // "" = counts
	}{
		{"a plain node counts (no Machine kind)", &NodeInfo{}, CandidateFilter{}, ""},
		{"a lease without a Node (no Machine kind)", nil, CandidateFilter{}, ExcludedNoNode},
		{"a lease without a Node", nil, gardener(nil), ExcludedNoNode},
		{"no Machine kind: not-managed-by-mcm still counts", &NodeInfo{NotManagedByMCM: true}, CandidateFilter{}, ""},
		{"no Machine kind: an unhealthy condition still counts", &NodeInfo{Conditions: []corev1.NodeCondition{cond("DiskPressure", corev1.ConditionTrue, "")}}, CandidateFilter{}, ""},
		{"no Machine kind: an in-place update still counts", &NodeInfo{Conditions: []corev1.NodeCondition{cond("InPlaceUpdate", corev1.ConditionTrue, "ReadyForUpdate")}}, CandidateFilter{}, ""},
		{"annotated not-managed-by-mcm", &NodeInfo{NotManagedByMCM: true}, CandidateFilter{Machines: running}, ExcludedNotManagedByMCM},
		{"default unhealthy condition True", &NodeInfo{Conditions: []corev1.NodeCondition{cond("DiskPressure", corev1.ConditionTrue, "")}}, gardener(nil), ExcludedUnhealthy},
		{"each default condition: KernelDeadlock", &NodeInfo{Conditions: []corev1.NodeCondition{cond("KernelDeadlock", corev1.ConditionTrue, "")}}, gardener(nil), ExcludedUnhealthy},
		{"each default condition: ReadonlyFilesystem", &NodeInfo{Conditions: []corev1.NodeCondition{cond("ReadonlyFilesystem", corev1.ConditionTrue, "")}}, gardener(nil), ExcludedUnhealthy},
		{"each default condition: NetworkUnavailable", &NodeInfo{Conditions: []corev1.NodeCondition{cond("NetworkUnavailable", corev1.ConditionTrue, "")}}, gardener(nil), ExcludedUnhealthy},
		{"unhealthy condition False counts", &NodeInfo{Conditions: []corev1.NodeCondition{cond("DiskPressure", corev1.ConditionFalse, "")}}, gardener(nil), ""},
		{"unhealthy condition Unknown counts", &NodeInfo{Conditions: []corev1.NodeCondition{cond("DiskPressure", corev1.ConditionUnknown, "")}}, gardener(nil), ""},
		{"Ready=False is not an unhealthy condition", &NodeInfo{Conditions: []corev1.NodeCondition{cond("Ready", corev1.ConditionFalse, "")}}, gardener(nil), ""},
		{"the pool's own conditions replace the defaults (default no longer counts)", &NodeInfo{Pool: "p", Conditions: []corev1.NodeCondition{cond("DiskPressure", corev1.ConditionTrue, "")}},
			gardener(map[string][]string{"p": {"FrequentKubeletRestart"}}), ""},
		{"the pool's own condition True", &NodeInfo{Pool: "p", Conditions: []corev1.NodeCondition{cond("FrequentKubeletRestart", corev1.ConditionTrue, "")}},
			gardener(map[string][]string{"p": {"FrequentKubeletRestart"}}), ExcludedUnhealthy},
		{"another pool's conditions do not apply", &NodeInfo{Pool: "q", Conditions: []corev1.NodeCondition{cond("DiskPressure", corev1.ConditionTrue, "")}},
			gardener(map[string][]string{"p": {"FrequentKubeletRestart"}}), ExcludedUnhealthy},
		{"a pool listed with no conditions uses the defaults", &NodeInfo{Pool: "p", Conditions: []corev1.NodeCondition{cond("DiskPressure", corev1.ConditionTrue, "")}},
			gardener(map[string][]string{"p": {}}), ExcludedUnhealthy},
		{"Machine kind exists, no Machine names the node", &NodeInfo{}, CandidateFilter{Machines: []MachineInfo{{Name: "m", Node: "other", Phase: "Running"}}}, ExcludedNoMachine},
		{"Machine kind exists, none in the namespace", &NodeInfo{}, CandidateFilter{Machines: []MachineInfo{}}, ExcludedNoMachine},
		{"Machine Running", &NodeInfo{}, CandidateFilter{Machines: running}, ""},
		{"Machine Pending counts", &NodeInfo{}, CandidateFilter{Machines: []MachineInfo{{Name: "m", Node: "n", Phase: "Pending"}}}, ""},
		{"Machine without a phase counts", &NodeInfo{}, CandidateFilter{Machines: []MachineInfo{{Name: "m", Node: "n"}}}, ""},
		{"Machine Failed", &NodeInfo{}, CandidateFilter{Machines: []MachineInfo{{Name: "m", Node: "n", Phase: "Failed"}}}, ExcludedMachineGoing},
		{"Machine Terminating", &NodeInfo{}, CandidateFilter{Machines: []MachineInfo{{Name: "m", Node: "n", Phase: "Terminating"}}}, ExcludedMachineGoing},
		{"one Failed and one Running Machine: counts", &NodeInfo{}, CandidateFilter{Machines: []MachineInfo{{Name: "a", Node: "n", Phase: "Failed"}, {Name: "b", Node: "n", Phase: "Running"}}}, ""},
		{"InPlaceUpdate ReadyForUpdate", &NodeInfo{Conditions: []corev1.NodeCondition{cond("InPlaceUpdate", corev1.ConditionTrue, "ReadyForUpdate")}}, gardener(nil), ExcludedInPlaceUpdate},
		{"InPlaceUpdate UpdateFailed", &NodeInfo{Conditions: []corev1.NodeCondition{cond("InPlaceUpdate", corev1.ConditionFalse, "UpdateFailed")}}, gardener(nil), ExcludedInPlaceUpdate},
		{"InPlaceUpdate with another reason counts", &NodeInfo{Conditions: []corev1.NodeCondition{cond("InPlaceUpdate", corev1.ConditionTrue, "UpdateSuccessful")}}, gardener(nil), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := LeaseInput{Leases: []coordinationv1.Lease{*lease("n", expired), *lease("x", expired)},
				Nodes:  map[string]NodeInfo{"x": {}},
				Filter: tt.filter, Now: testNow, NodeMonitorGrace: 40 * time.Second, LeaseExpiryBufferFraction: 0.75, NodeLeaseFailureFraction: 0.6}
			if tt.node != nil {
				in.Nodes["n"] = *tt.node
			}
			if in.Filter.Machines != nil {
				in.Filter.Machines = append(in.Filter.Machines, MachineInfo{Name: "mx", Node: "x", Phase: "Running"})
			}
			d := Decide(in)
			wantCandidates := 2
			if tt.excluded != "" {
				wantCandidates = 1
			}
			if d.Candidates != wantCandidates || (tt.excluded != "" && d.Excluded[tt.excluded] != 1) {
				t.Errorf("candidates %d, excluded %v; want %d candidates, excluded %q", d.Candidates, d.Excluded, wantCandidates, tt.excluded)
			}
			if tt.excluded != "" && !strings.Contains(d.Reason, "1 "+tt.excluded) {
				t.Errorf("reason %q does not count the left-out lease", d.Reason)
			}
		})
	}
}

func TestNodeInfoOfReadsTheFieldsTheRulesUse(t *testing.T) {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{LabelWorkerPool: "pool-a"},
		Annotations: map[string]string{AnnotationNotManagedByMCM: "true"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: "InPlaceUpdate", Status: corev1.ConditionTrue, Reason: "ReadyForUpdate", Message: "long text"}}}}
	got := NodeInfoOf(&n)
	if got.Pool != "pool-a" || !got.NotManagedByMCM || len(got.Conditions) != 1 || got.Conditions[0].Reason != "ReadyForUpdate" || got.Conditions[0].Message != "" {
		t.Errorf("NodeInfoOf = %+v", got)
	}
}

func TestThrottleBackoffDoublesUpToFiveMinutes(t *testing.T) {
	for n, want := range map[int]time.Duration{0: 0, 1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 6: 5 * time.Minute, 100: 5 * time.Minute} {
		if got := ThrottleBackoff(n); got != want {
			t.Errorf("ThrottleBackoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestParseNodeConditions(t *testing.T) {
	m, err := ParseNodeConditions(`{"pool-a":["KernelDeadlock","Custom"]}`)
	if err != nil || len(m["pool-a"]) != 2 {
		t.Errorf("ParseNodeConditions = %v, %v", m, err)
	}
	for _, bad := range []string{`[]`, `{"":["A"]}`, `{"p":[""]}`, `{"p":"A"}`} {
		if _, err := ParseNodeConditions(bad); err == nil {
			t.Errorf("ParseNodeConditions(%s) accepted", bad)
		}
	}
}
