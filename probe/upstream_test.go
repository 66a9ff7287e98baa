package probe

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/internal/decode"
	"github.com/depwatch/depwatch/test/upstream"
)

// Every field the probe reads from a Machine is in the Machine written from MCM's own types
// (test/upstream, machine-controller-manager v0.61.2), and reads as MCM means it.
func TestEveryMachineFieldIsInMCMsMachine(t *testing.T) {
	fixture := upstream.Machine()
	fields := MachineFields.Fields()
	if len(fields) == 0 {
		t.Fatal("no Machine fields declared")
	}
	for _, f := range fields {
		if !f.In(fixture.Object) {
			t.Errorf("the probe reads %s, which a Machine of machine-controller-manager %s does not have", f, upstream.MCMVersion)
		}
	}
	m := MachineInfoOf(fixture)
	if m.Phase != "Running" || m.Node != "shoot--dev--fixture-pool-a-z1-5d8f7-abcde" {
		t.Errorf("the fixture Machine reads as %+v; want phase Running and its node label", m)
	}
}

// The Node facts the lease rules compare with are MCM's and Gardener's: the annotation, the
// worker pool label, the in-place update condition and its reasons, the Machine phases and
// MCM's default unhealthy conditions. A Node marked as those projects mark it is left out
// for each of its marks.
func TestLeaseRulesUseMCMsAndGardenersNodeFacts(t *testing.T) {
	node, err := upstream.Node()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := node.Annotations[AnnotationNotManagedByMCM]; !ok {
		t.Errorf("annotation %s is not MCM's (node fixture: %v)", AnnotationNotManagedByMCM, node.Annotations)
	}
	if node.Labels[LabelWorkerPool] == "" {
		t.Errorf("label %s is not Gardener's (node fixture: %v)", LabelWorkerPool, node.Labels)
	}
	if !slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
		return string(c.Type) == ConditionInPlaceUpdate && slices.Contains(inPlaceUpdateReasons, c.Reason)
	}) {
		t.Errorf("no %s condition with one of the reasons %v in the node fixture", ConditionInPlaceUpdate, inPlaceUpdateReasons)
	}
	for _, r := range inPlaceUpdateReasons {
		if !slices.Contains(upstream.InPlaceUpdateReasons, r) {
			t.Errorf("in-place update reason %q is not one of MCM's %v", r, upstream.InPlaceUpdateReasons)
		}
	}
	for _, p := range goneMachinePhases {
		if !slices.Contains(upstream.MachinePhases, p) {
			t.Errorf("machine phase %q is not one of MCM's %v", p, upstream.MachinePhases)
		}
	}
	if !slices.Equal(DefaultUnhealthyNodeConditions, upstream.MCMDefaultNodeConditions) {
		t.Errorf("default unhealthy conditions %v, MCM's default --node-conditions %v", DefaultUnhealthyNodeConditions, upstream.MCMDefaultNodeConditions)
	}

	// Each mark on its own takes the node out, for the reason it names.
	machines := map[string]string{node.Name: "Running"}
	filter := CandidateFilter{Machines: []MachineInfo{}}
	info := NodeInfoOf(node)
	if got := filter.Exclusion(node.Name, info, true, machines); got != ExcludedNotManagedByMCM {
		t.Errorf("the marked node: %q, want %s", got, ExcludedNotManagedByMCM)
	}
	info.NotManagedByMCM = false
	if got := filter.Exclusion(node.Name, info, true, machines); got != ExcludedInPlaceUpdate {
		t.Errorf("the node in an in-place update: %q, want %s", got, ExcludedInPlaceUpdate)
	}
	filter.NodeConditions = map[string][]string{node.Labels[LabelWorkerPool]: {"Ready"}}
	if got := filter.Exclusion(node.Name, info, true, machines); got != ExcludedUnhealthy {
		t.Errorf("the node whose pool counts Ready as unhealthy: %q, want %s", got, ExcludedUnhealthy)
	}
}

// dependentResourceInfos has exactly the fields of dependency-watchdog's own types: a list
// that sets every one of them parses strictly, and the types know no other.
func TestDependentResourceFieldsAreDependencyWatchdogs(t *testing.T) {
	var doc struct {
		Infos []map[string]any `json:"dependentResourceInfos"`
	}
	if err := yaml.Unmarshal(upstream.ProberConfig(), &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]map[string]bool{"info": {}, "ref": {}, "scale": {}}
	for _, info := range doc.Infos {
		for k, v := range info {
			keys["info"][k] = true
			sub, _ := v.(map[string]any)
			for kk := range sub {
				if k == "ref" {
					keys["ref"][kk] = true
				} else {
					keys["scale"][kk] = true
				}
			}
		}
	}
	for _, c := range []struct {
		what  string
		known []string
		dwd   map[string]bool
	}{
		{"dependentResourceInfos[]", slices.Collect(maps.Keys(decode.JSONFields(reflect.TypeFor[DependentResourceInfo]()))), keys["info"]},
		{"dependentResourceInfos[].ref", slices.Collect(maps.Keys(decode.JSONFields(reflect.TypeFor[autoscalingv1.CrossVersionObjectReference]()))), keys["ref"]},
		{"dependentResourceInfos[].scaleUp / scaleDown", slices.Collect(maps.Keys(decode.JSONFields(reflect.TypeFor[ScaleInfoSpec]()))), keys["scale"]},
	} {
		dwd := slices.Sorted(maps.Keys(c.dwd))
		if known := slices.Sorted(slices.Values(c.known)); !slices.Equal(known, dwd) {
			t.Errorf("%s: depwatch knows %v, dependency-watchdog %s has %v", c.what, known, upstream.DependencyWatchdogVersion, dwd)
		}
	}
	list, err := json.Marshal(doc.Infos)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseDependentResources(list); err != nil {
		t.Errorf("dependency-watchdog's dependentResourceInfos, read strictly: %v", err)
	}
}
