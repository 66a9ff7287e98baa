// Package upstream holds objects of the projects depwatch reads or stands in for, written by
// hand from those projects' Go types at the versions named below: Gardener's Cluster with
// its embedded Shoot, machine-controller-manager's Machine, a Node as both mark it, and
// dependency-watchdog's weeder and prober ConfigMap data (testdata/, each file naming the
// types it was written from). depwatch reads the Gardener and MCM objects unstructured,
// without those projects' Go modules, so a misspelt field name would read as "absent" for
// ever; the tests of the code that reads them check every field it reads against these
// objects, and the unit tests and the e2e tests build their Clusters and Machines from here,
// so that they cannot drift apart from each other or from Gardener.
//
// Only tests import this package.
package upstream

import (
	"embed"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The versions the fixtures were written from: dependency-watchdog's latest release, and
// the Gardener and machine-controller-manager versions its go.mod names.
const (
	GardenerVersion           = "v1.136.2"
	GardenerCommit            = "3dad2647c9e3ec196b59c1993c43cf2a3f2172e3"
	MCMVersion                = "v0.61.2"
	MCMCommit                 = "4c2288575ca321e9d67c90f26d8231c73ded383a"
	DependencyWatchdogVersion = "v1.7.0"
	DependencyWatchdogCommit  = "6e22d4e53334a05bfaa608bd9e38f78ed86ace38"
)

// Values of the upstream types that depwatch compares with, copied as facts.
var (
	// LastOperationTypes are Gardener's LastOperationType values
	// (pkg/apis/core/v1beta1/types_common.go).
	LastOperationTypes = []string{"Create", "Reconcile", "Delete", "Migrate", "Restore"}
	// LastOperationStates are Gardener's LastOperationState values (same file).
	LastOperationStates = []string{"Processing", "Succeeded", "Error", "Failed", "Pending", "Aborted"}
	// MachinePhases are MCM's MachinePhase values (pkg/apis/machine/v1alpha1/machine_types.go).
	MachinePhases = []string{"Pending", "Available", "Running", "Terminating", "Unknown", "Failed",
		"CrashLoopBackOff", "InPlaceUpdating", "InPlaceUpdateSuccessful", "InPlaceUpdateFailed"}
	// InPlaceUpdateReasons are MCM's reasons of a Node's InPlaceUpdate condition (same file).
	InPlaceUpdateReasons = []string{"CandidateForUpdate", "SelectedForUpdate", "ReadyForUpdate",
		"DrainSuccessful", "UpdateSuccessful", "UpdateFailed"}
	// MCMDefaultNodeConditions are the default of MCM's --node-conditions
	// (pkg/util/provider/app/options/options.go): the node conditions that, held True,
	// make MCM replace a machine.
	MCMDefaultNodeConditions = []string{"KernelDeadlock", "ReadonlyFilesystem", "DiskPressure", "NetworkUnavailable"}
)

//go:embed testdata/*.yaml
var files embed.FS

func read(name string) []byte {
	b, err := files.ReadFile("testdata/" + name)
	if err != nil {
		panic(fmt.Sprintf("upstream: %s: %v", name, err)) // embedded: cannot happen
	}
	return b
}

func object(name string) *unstructured.Unstructured {
	j, err := yaml.YAMLToJSON(read(name))
	if err != nil {
		panic(fmt.Sprintf("upstream: %s: %v", name, err))
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil { // integers become int64, as from an API server
		panic(fmt.Sprintf("upstream: %s: %v", name, err))
	}
	return u
}

// Cluster is the Cluster fixture as written (an active shoot; testdata/cluster.yaml), a
// fresh copy.
func Cluster() *unstructured.Unstructured { return object("cluster.yaml") }

// Machine is the Machine fixture as written (a Running machine; testdata/machine.yaml), a
// fresh copy.
func Machine() *unstructured.Unstructured { return object("machine.yaml") }

// Node is the Node fixture (testdata/node.yaml), decoded strictly into core/v1 Node.
func Node() (*corev1.Node, error) {
	var n corev1.Node
	if err := yaml.UnmarshalStrict(read("node.yaml"), &n); err != nil {
		return nil, fmt.Errorf("node.yaml is not a core/v1 Node: %w", err)
	}
	return &n, nil
}

// ProberConfig is dependency-watchdog's prober ConfigMap data with every field of its types
// set (testdata/dwd-prober-config.yaml).
func ProberConfig() []byte { return read("dwd-prober-config.yaml") }

// WeederConfig is dependency-watchdog's weeder ConfigMap data with every field of its types
// set (testdata/dwd-weeder-config.yaml).
func WeederConfig() []byte { return read("dwd-weeder-config.yaml") }

// GardenletWeederConfig and GardenletProberConfig are the dep-config.yaml keys of the
// ConfigMaps gardenlet writes for dependency-watchdog's weeder and prober (gardener v1.149.3:
// the weeder's services and dependents of etcd's and kube-apiserver's
// NewDependencyWatchdogWeederConfiguration with watchDuration 5m, the prober's Secret, interval
// and dependents of kube-apiserver's NewDependencyWatchdogProberConfiguration, in
// components.go newDependencyWatchdogs; serialised with sigs.k8s.io/yaml as bootstrap.go's
// encodeConfig does): only what gardenlet sets, where WeederConfig and ProberConfig set every
// field.
func GardenletWeederConfig() string { return string(read("gardenlet-weeder-config.yaml")) }

// GardenletProberConfig: see GardenletWeederConfig.
func GardenletProberConfig() string { return string(read("gardenlet-prober-config.yaml")) }

// Shoot is the state of a shoot that depwatch's decisions read, written into a copy of the
// Cluster fixture by Cluster. The zero value is an active shoot: hibernation off, not
// hibernated, last operation Reconcile Succeeded, one worker pool "pool-a", and neither a
// nodeMonitorGracePeriod nor nodeConditions of its own. The states of hibernation:
//
//	hibernating   Shoot{HibernationEnabled: true}
//	hibernated    Shoot{HibernationEnabled: true, Hibernated: true}
//	waking up     Shoot{Hibernated: true}
//	woken         Shoot{}
type Shoot struct {
	// HibernationEnabled is spec.hibernation.enabled: the shoot is to be hibernated.
	HibernationEnabled bool
	// Hibernated is status.hibernated: Gardener sets it when a hibernation has finished and
	// clears it when a wake-up has.
	Hibernated bool
	// Deleting sets the shoot's metadata.deletionTimestamp.
	Deleting bool
	// OpType and OpState are status.lastOperation's type and state; "" keeps the
	// fixture's (Reconcile, Succeeded).
	OpType, OpState string
	// NoLastOperation removes status.lastOperation, as while the shoot is being created.
	NoLastOperation bool
	// NoWorkers removes spec.provider.workers, as Gardener serialises a shoot without
	// workers (omitempty).
	NoWorkers bool
	// Pools are the worker pools, each a copy of the fixture's pool; none: one, "pool-a".
	Pools []Pool
	// NodeMonitorGracePeriod is spec.kubernetes.kubeControllerManager.nodeMonitorGracePeriod
	// as written: nil removes it; a duration string such as "2m0s" is what Gardener writes
	// (a test may write anything else, e.g. int64(40), to see it refused).
	NodeMonitorGracePeriod any
}

// Pool is a worker pool of a Shoot.
type Pool struct {
	Name string
	// NodeConditions is machineControllerManager.nodeConditions as written: nil removes it
	// (MCM's defaults apply); otherwise strings as Gardener writes them (or anything else, to
	// see it refused).
	NodeConditions []any
}

// Paths into the Cluster fixture: each exists in testdata/cluster.yaml (set and remove
// refuse a path that does not).
var (
	shootPath     = []string{"spec", "shoot"}
	hibEnabled    = shootField("spec", "hibernation", "enabled")
	hibernated    = shootField("status", "hibernated")
	lastOperation = shootField("status", "lastOperation")
	opType        = shootField("status", "lastOperation", "type")
	opState       = shootField("status", "lastOperation", "state")
	workers       = shootField("spec", "provider", "workers")
	kcmGrace      = shootField("spec", "kubernetes", "kubeControllerManager", "nodeMonitorGracePeriod")
	technicalID   = shootField("status", "technicalID")
)

func shootField(path ...string) []string { return slices.Clip(slices.Concat(shootPath, path)) }

// Cluster is the Cluster resource of the shoot for the control-plane namespace name: the
// fixture with the shoot's state written into it.
func (s Shoot) Cluster(name string) *unstructured.Unstructured {
	c := Cluster()
	obj := c.Object
	c.SetName(name)
	set(obj, name, technicalID...)
	set(obj, s.HibernationEnabled, hibEnabled...)
	set(obj, s.Hibernated, hibernated...)
	if s.OpType != "" {
		set(obj, s.OpType, opType...)
	}
	if s.OpState != "" {
		set(obj, s.OpState, opState...)
	}
	if s.NoLastOperation {
		remove(obj, lastOperation...)
	}
	if s.NodeMonitorGracePeriod == nil {
		remove(obj, kcmGrace...)
	} else {
		set(obj, s.NodeMonitorGracePeriod, kcmGrace...)
	}
	s.writePools(obj)
	if s.Deleting {
		// The one field added: the shoot's metadata is Kubernetes' ObjectMeta, and its
		// deletionTimestamp is Kubernetes' field, not Gardener's.
		_ = unstructured.SetNestedField(obj, "2026-05-01T10:00:00Z", shootField("metadata", "deletionTimestamp")...)
	}
	return c
}

// writePools replaces the fixture's one pool by copies of it named for s.Pools.
func (s Shoot) writePools(obj map[string]any) {
	list, _, _ := unstructured.NestedSlice(obj, workers...)
	template, _ := list[0].(map[string]any)
	if s.NoWorkers {
		remove(obj, workers...)
		return
	}
	pools := s.Pools
	if len(pools) == 0 {
		pools = []Pool{{Name: "pool-a"}}
	}
	out := make([]any, 0, len(pools))
	for _, p := range pools {
		w := unstructured.Unstructured{Object: template}
		w = *w.DeepCopy()
		set(w.Object, p.Name, "name")
		if p.NodeConditions == nil {
			remove(w.Object, "machineControllerManager", "nodeConditions")
		} else {
			set(w.Object, p.NodeConditions, "machineControllerManager", "nodeConditions")
		}
		out = append(out, w.Object)
	}
	set(obj, out, workers...)
}

// MachineFor is an MCM Machine in namespace for the Node node, in phase: the fixture, named
// machine-<node> and labelled node=<node>.
func MachineFor(namespace, node, phase string) *unstructured.Unstructured {
	m := Machine()
	m.SetName("machine-" + node)
	m.SetNamespace(namespace)
	set(m.Object, node, "metadata", "labels", "node")
	set(m.Object, phase, "status", "currentStatus", "phase")
	return m
}

// set writes value at path, which the fixture must have: the builders change the fixtures'
// values, never their field names.
func set(obj map[string]any, value any, path ...string) {
	if _, found, err := unstructured.NestedFieldNoCopy(obj, path...); !found || err != nil {
		panic(fmt.Sprintf("upstream: the fixture has no field %v: a builder must not invent fields", path))
	}
	if err := unstructured.SetNestedField(obj, value, path...); err != nil {
		panic(fmt.Sprintf("upstream: setting %v: %v", path, err))
	}
}

// remove drops the field at path, which the fixture must have.
func remove(obj map[string]any, path ...string) {
	if _, found, err := unstructured.NestedFieldNoCopy(obj, path...); !found || err != nil {
		panic(fmt.Sprintf("upstream: the fixture has no field %v to remove", path))
	}
	unstructured.RemoveNestedField(obj, path...)
}
