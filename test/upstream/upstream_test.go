package upstream

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Each fixture names the version (and commit) it was written from, and it is the version
// this package says: the two cannot disagree.
func TestEveryFixtureNamesTheVersionItWasWrittenFrom(t *testing.T) {
	for file, want := range map[string][]string{
		"cluster.yaml":           {"gardener " + GardenerVersion, GardenerCommit, "dependency-watchdog " + DependencyWatchdogVersion},
		"machine.yaml":           {"machine-controller-manager " + MCMVersion, MCMCommit},
		"node.yaml":              {"gardener " + GardenerVersion, "machine-controller-manager " + MCMVersion},
		"dwd-prober-config.yaml": {"dependency-watchdog " + DependencyWatchdogVersion, DependencyWatchdogCommit},
		"dwd-weeder-config.yaml": {"dependency-watchdog " + DependencyWatchdogVersion, DependencyWatchdogCommit},
	} {
		text := strings.Join(strings.Fields(string(read(file))), " ")
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not name %q", file, w)
			}
		}
	}
}

func TestFixturesDecode(t *testing.T) {
	if c := Cluster(); c.GetKind() != "Cluster" || c.GetAPIVersion() != "extensions.gardener.cloud/v1alpha1" {
		t.Errorf("cluster.yaml is a %s %s", c.GetAPIVersion(), c.GetKind())
	}
	if m := Machine(); m.GetKind() != "Machine" || m.GetAPIVersion() != "machine.sapcloud.io/v1alpha1" {
		t.Errorf("machine.yaml is a %s %s", m.GetAPIVersion(), m.GetKind())
	}
	if _, err := Node(); err != nil {
		t.Error(err)
	}
	for name, data := range map[string][]byte{"prober": ProberConfig(), "weeder": WeederConfig()} {
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil || len(m) == 0 {
			t.Errorf("the %s config is not a YAML map: %v", name, err)
		}
	}
}

// Shoot writes each state into the fixture's own fields, and the zero value is the fixture's
// active shoot without settings of its own.
func TestShootWritesItsStateIntoTheFixturesFields(t *testing.T) {
	get := func(u *unstructured.Unstructured, path ...string) any {
		v, found, err := unstructured.NestedFieldNoCopy(u.Object, append([]string{"spec", "shoot"}, path...)...)
		if !found || err != nil {
			return "<absent>"
		}
		return v
	}
	active := Shoot{}.Cluster("shoot--a")
	if active.GetName() != "shoot--a" || get(active, "status", "technicalID") != "shoot--a" {
		t.Errorf("the Cluster is named %q, its shoot's technicalID %v", active.GetName(), get(active, "status", "technicalID"))
	}
	for _, tc := range []struct {
		name  string
		shoot Shoot
		path  []string
		want  any
	}{
		{"active: hibernation off", Shoot{}, []string{"spec", "hibernation", "enabled"}, false},
		{"active: not hibernated", Shoot{}, []string{"status", "hibernated"}, false},
		{"active: Reconcile", Shoot{}, []string{"status", "lastOperation", "type"}, "Reconcile"},
		{"active: no grace of its own", Shoot{}, []string{"spec", "kubernetes", "kubeControllerManager", "nodeMonitorGracePeriod"}, "<absent>"},
		{"active: no deletion", Shoot{}, []string{"metadata", "deletionTimestamp"}, "<absent>"},
		{"waking up", Shoot{Hibernated: true}, []string{"status", "hibernated"}, true},
		{"hibernating", Shoot{HibernationEnabled: true}, []string{"spec", "hibernation", "enabled"}, true},
		{"being created", Shoot{NoLastOperation: true}, []string{"status", "lastOperation"}, "<absent>"},
		{"Create Processing", Shoot{OpType: "Create", OpState: "Processing"}, []string{"status", "lastOperation", "state"}, "Processing"},
		{"no workers", Shoot{NoWorkers: true}, []string{"spec", "provider", "workers"}, "<absent>"},
		{"grace", Shoot{NodeMonitorGracePeriod: "2m0s"}, []string{"spec", "kubernetes", "kubeControllerManager", "nodeMonitorGracePeriod"}, "2m0s"},
		{"deleting", Shoot{Deleting: true}, []string{"metadata", "deletionTimestamp"}, "2026-05-01T10:00:00Z"},
	} {
		if got := get(tc.shoot.Cluster("shoot--a"), tc.path...); got != tc.want {
			t.Errorf("%s: %s = %v, want %v", tc.name, strings.Join(tc.path, "."), got, tc.want)
		}
	}
	pools := Shoot{Pools: []Pool{{Name: "a", NodeConditions: []any{"X"}}, {Name: "b"}}}.Cluster("shoot--a")
	list, _, _ := unstructured.NestedSlice(pools.Object, "spec", "shoot", "spec", "provider", "workers")
	if len(list) != 2 {
		t.Fatalf("%d pools, want 2", len(list))
	}
	a, b := list[0].(map[string]any), list[1].(map[string]any)
	condsA, _, _ := unstructured.NestedStringSlice(a, "machineControllerManager", "nodeConditions")
	_, condsB, _ := unstructured.NestedFieldNoCopy(b, "machineControllerManager", "nodeConditions")
	if a["name"] != "a" || b["name"] != "b" || len(condsA) != 1 || condsB {
		t.Errorf("pools %v", list)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(b, "machine", "type"); !found {
		t.Errorf("a pool is a copy of the fixture's: %v", b)
	}
}

func TestMachineForIsTheFixtureNamedForItsNode(t *testing.T) {
	m := MachineFor("shoot--a", "node-1", "Failed")
	phase, _, _ := unstructured.NestedString(m.Object, "status", "currentStatus", "phase")
	if m.GetName() != "machine-node-1" || m.GetNamespace() != "shoot--a" || m.GetLabels()["node"] != "node-1" || phase != "Failed" {
		t.Errorf("machine %s/%s labels %v phase %s", m.GetNamespace(), m.GetName(), m.GetLabels(), phase)
	}
	if _, found, _ := unstructured.NestedString(m.Object, "spec", "providerID"); !found {
		t.Error("MachineFor must keep the fixture's other fields")
	}
}

// A builder that writes a field the fixture does not have fails at once: the builders may
// change Gardener's values, never invent its field names.
func TestBuildersRefuseFieldsTheFixtureDoesNotHave(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("set on a field the fixture lacks did not panic")
		}
	}()
	set(Cluster().Object, true, "spec", "shoot", "status", "isHibernated")
}

// The fixture values are fresh copies: a test that changes one does not change the next.
func TestFixturesAreFreshCopies(t *testing.T) {
	c := Cluster()
	c.SetName("changed")
	if Cluster().GetName() == "changed" {
		t.Error("Cluster() returned a shared object")
	}
}
