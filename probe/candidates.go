package probe

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/depwatch/depwatch/internal/fieldpath"
)

// The facts dependency-watchdog's prober uses to choose which node leases count. They come
// from machine-controller-manager (MCM) and Gardener; depwatch reads them without their Go
// modules.
const (
	// AnnotationNotManagedByMCM on a Node: MCM does not manage it (e.g. a node joined by
	// hand), so its lease says nothing about the control plane's reachability from the
	// machines MCM would replace.
	AnnotationNotManagedByMCM = "node.machine.sapcloud.io/not-managed-by-mcm"
	// LabelWorkerPool on a Node names its Gardener worker pool.
	LabelWorkerPool = "worker.gardener.cloud/pool"
	// MachineNodeLabel on a Machine names the Node it became.
	MachineNodeLabel = "node"
	// ConditionInPlaceUpdate is the Node condition of MCM's in-place updates.
	ConditionInPlaceUpdate = "InPlaceUpdate"
)

// MachineGVR is MCM's Machine, in the control-plane namespace of the seed.
var MachineGVR = schema.GroupVersionResource{Group: "machine.sapcloud.io", Version: "v1alpha1", Resource: "machines"}

// MachineFields are the fields of an MCM Machine the probe reads, each declared once and read
// only through its Field; TestEveryMachineFieldIsInMCMsMachine checks each against a Machine
// written from MCM's types (test/upstream).
var MachineFields fieldpath.Set

var (
	// MachinePhase is the Machine's phase (MCM's MachinePhase: Running, Failed, Terminating, ...).
	MachinePhase = MachineFields.Field("status", "currentStatus", "phase")
	// MachineNode is the label that names the Node the Machine became.
	MachineNode = MachineFields.Field("metadata", "labels", MachineNodeLabel)
)

// DefaultUnhealthyNodeConditions are the node conditions that, when True, take a node out of
// the lease count unless its worker pool names its own (MCM's defaults).
var DefaultUnhealthyNodeConditions = []string{"KernelDeadlock", "ReadonlyFilesystem", "DiskPressure", "NetworkUnavailable"}

// goneMachinePhases are the Machine phases that mean the machine is going away: its node's
// lease is not evidence.
var goneMachinePhases = []string{"Failed", "Terminating"}

// inPlaceUpdateReasons are the reasons of a Node's InPlaceUpdate condition during which the
// kubelet may legitimately stop renewing its lease.
var inPlaceUpdateReasons = []string{"ReadyForUpdate", "UpdateFailed"}

// NodeInfo is what the lease decision needs of a Node.
type NodeInfo struct {
	Pool            string // worker pool label; "" when none
	NotManagedByMCM bool
	Conditions      []corev1.NodeCondition
}

// NodeInfoOf keeps the fields of n that the decision reads (a probe lists thousands of Nodes;
// it keeps only these).
func NodeInfoOf(n *corev1.Node) NodeInfo {
	_, unmanaged := n.Annotations[AnnotationNotManagedByMCM]
	conds := make([]corev1.NodeCondition, 0, len(n.Status.Conditions))
	for _, c := range n.Status.Conditions {
		conds = append(conds, corev1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
	}
	return NodeInfo{Pool: n.Labels[LabelWorkerPool], NotManagedByMCM: unmanaged, Conditions: conds}
}

// MachineInfo is what the lease decision needs of an MCM Machine.
type MachineInfo struct {
	Name  string
	Node  string // its "node" label
	Phase string // status.currentStatus.phase
}

// MachineInfoOf reads a Machine given as unstructured.
func MachineInfoOf(u *unstructured.Unstructured) MachineInfo {
	phase, _, _ := MachinePhase.Str(u.Object)
	node, _, _ := MachineNode.Str(u.Object)
	return MachineInfo{Name: u.GetName(), Node: node, Phase: phase}
}

// Why a node lease is left out of the count; the log counts each.
const (
	ExcludedNoNode          = "no-node"                       // the lease's Node does not exist
	ExcludedNotManagedByMCM = "not-managed-by-mcm"            // the Node is annotated not-managed-by-mcm
	ExcludedUnhealthy       = "unhealthy-condition"           // one of its pool's unhealthy conditions is True
	ExcludedNoMachine       = "no-machine"                    // no Machine in the namespace names the Node
	ExcludedMachineGoing    = "machine-failed-or-terminating" // its Machines are all Failed or Terminating
	ExcludedInPlaceUpdate   = "in-place-update"               // InPlaceUpdate ReadyForUpdate or UpdateFailed
)

// CandidateFilter holds the facts beyond the Node itself: the Machines (nil when the Machine
// kind does not exist: not a Gardener seed, every existing Node counts) and the per-pool
// unhealthy conditions.
type CandidateFilter struct {
	// Machines: nil = the kind does not exist, no Machine rule; non-nil (even empty) = the
	// rule applies.
	Machines []MachineInfo
	// NodeConditions: worker pool → the conditions that make its nodes unhealthy; a pool not
	// listed (or a node without a pool) uses DefaultUnhealthyNodeConditions.
	NodeConditions map[string][]string
}

// Exclusion says whether a node's lease counts, and if not, why (one of the Excluded*
// reasons; "" when it counts). The checks run in dependency-watchdog's order and the first
// that fails names the reason. Without the Machine kind (not a Gardener seed) only the
// Node's existence counts: the other rules are about machine-controller-manager, which then
// neither manages the nodes nor replaces an unhealthy one.
func (f CandidateFilter) Exclusion(name string, node NodeInfo, ok bool, machines map[string]string) string {
	if !ok {
		return ExcludedNoNode
	}
	if f.Machines == nil {
		return ""
	}
	if node.NotManagedByMCM {
		return ExcludedNotManagedByMCM
	}
	unhealthy := DefaultUnhealthyNodeConditions
	if c, found := f.NodeConditions[node.Pool]; found && node.Pool != "" && len(c) > 0 {
		unhealthy = c
	}
	for _, c := range node.Conditions {
		if c.Status == corev1.ConditionTrue && slices.Contains(unhealthy, string(c.Type)) {
			return ExcludedUnhealthy
		}
	}
	switch phase, found := machines[name]; {
	case !found:
		return ExcludedNoMachine
	case slices.Contains(goneMachinePhases, phase):
		return ExcludedMachineGoing
	}
	for _, c := range node.Conditions {
		if string(c.Type) == ConditionInPlaceUpdate && slices.Contains(inPlaceUpdateReasons, c.Reason) {
			return ExcludedInPlaceUpdate
		}
	}
	return ""
}

// machineIndex maps a node name to the phase of a Machine that names it, preferring one that
// is not Failed or Terminating (one such Machine is enough for the node to count).
func machineIndex(machines []MachineInfo) map[string]string {
	idx := map[string]string{}
	for _, m := range machines {
		if m.Node == "" {
			continue
		}
		cur, seen := idx[m.Node]
		if !seen || slices.Contains(goneMachinePhases, cur) {
			idx[m.Node] = m.Phase
		}
	}
	return idx
}

// FormatExclusions is "2 not-managed-by-mcm, 1 no-machine" (sorted by reason), or "none".
func FormatExclusions(excluded map[string]int) string { return joinCounts(excluded, "%[2]d %[1]s") }

// ParseNodeConditions reads NODE_CONDITIONS: a JSON object of worker pool → condition types.
func ParseNodeConditions(s string) (map[string][]string, error) {
	var m map[string][]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("must be a JSON object of worker pool to a list of node condition types: %w", err)
	}
	for pool, conds := range m {
		if pool == "" {
			return nil, fmt.Errorf("a worker pool name must not be empty")
		}
		for _, c := range conds {
			if strings.TrimSpace(c) == "" {
				return nil, fmt.Errorf("pool %q: a condition type must not be empty", pool)
			}
		}
	}
	return m, nil
}
