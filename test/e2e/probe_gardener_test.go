//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/depwatch/depwatch/test/upstream"
)

// The probe on a Gardener seed: the Machine and Cluster kinds exist (stand-in CRDs, installed
// once and kept), each fake node has a Machine in the control-plane namespace, and a shoot's
// Cluster says whether it is probed and with which grace period.

// applyCluster writes the Cluster resource of namespace ns for a shoot in state sh. It is
// built, as the unit tests build theirs, from the Cluster written from Gardener's own types
// (test/upstream), so the fields depwatch reads are Gardener's names, not this test's.
func applyCluster(t *testing.T, ns string, sh upstream.Shoot) {
	t.Helper()
	doc, err := json.Marshal(sh.Cluster(ns).Object) // JSON is YAML
	if err != nil {
		t.Fatalf("writing the Cluster of %s: %v", ns, err)
	}
	applyYAML(t, string(doc))
}

// waitClusterKindFound waits until the in-cluster coordinator watches Cluster resources.
func waitClusterKindFound(t *testing.T) {
	t.Helper()
	waitFor(t, 60*time.Second, "the coordinator to find Gardener's Cluster kind", func() (bool, error) {
		out, _ := kubectl(t, "-n", depwatchNS, "logs", "deployment/depwatch-coordinator", "--tail=-1")
		return strings.Contains(out, "Gardener Cluster resources found"), nil
	})
}

func (s *probeScenario) assertUntouched(why string) {
	s.t.Helper()
	for _, name := range dependents {
		d := s.deployment(name)
		if *d.Spec.Replicas != dependentReplicas || d.Annotations[annReplicas] != "" {
			s.t.Errorf("%s was scaled although %s: replicas %d, annotations %v", name, why, *d.Spec.Replicas, d.Annotations)
		}
	}
}

// TestProbeLeavesOutTheNodesDependencyWatchdogLeavesOut: 3 of 4 worker leases have expired,
// but one of the expired nodes is annotated not-managed-by-mcm and another's Machine is
// Failed: only 1 of the 2 leases that count has expired, and nothing is scaled down. The log
// line of the decision counts who was left out and why. Once the annotation is gone and the
// Machine is Running again, 3 of 4 count as expired and the dependents are scaled down.
func TestProbeLeavesOutTheNodesDependencyWatchdogLeavesOut(t *testing.T) {
	parallelLong(t, 80*time.Second)
	s := newProbeScenario(t, "probe-mcm", probeSetup{expired: []string{"w1", "w2", "w3"}})
	unmanaged, failed := s.ns+"-w1", s.ns+"-w2"
	annotate := func(v *string) {
		val := "null"
		if v != nil {
			val = fmt.Sprintf("%q", *v)
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"node.machine.sapcloud.io/not-managed-by-mcm":%s}}}`, val)
		if _, err := kube.CoreV1().Nodes().Patch(context.Background(), unmanaged, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("annotating node %s: %v", unmanaged, err)
		}
	}
	on := "true"
	annotate(&on)
	s.setMachine(failed, "Failed")
	s.start()

	lines := s.waitLog(2*time.Minute, map[string]string{"action": "scale-up"})
	l, _ := findLine(lines, map[string]string{"action": "scale-up"})
	by := l.str("excluded_by_reason")
	if !strings.Contains(by, "1 not-managed-by-mcm") || !strings.Contains(by, "1 machine-failed-or-terminating") {
		t.Errorf("the decision line counts %q as left out; want 1 not-managed-by-mcm and 1 machine-failed-or-terminating (reason %q)", by, l.str("reason"))
	}
	t.Logf("decision: %s", l.str("reason"))
	time.Sleep(10 * time.Second) // two more intervals
	s.assertUntouched("only 1 of the 2 leases that count has expired")

	annotate(nil)
	s.setMachine(failed, "Running")
	s.waitReplicas(kcm, 0, 120*time.Second)
	down := s.waitLog(30*time.Second, map[string]string{"action": "scale-down"})
	if l, ok := findLine(down, map[string]string{"action": "scale-down"}); ok {
		t.Logf("once both count: %s", l.str("reason"))
	}
}

// TestProbeWaitsUntilTheShootIsCreated: a shoot whose Cluster says lastOperation Create
// Processing is not probed at all; once the Create has Succeeded, it is.
func TestProbeWaitsUntilTheShootIsCreated(t *testing.T) {
	parallelLong(t, 90*time.Second)
	s := newProbeScenario(t, "probe-create", probeSetup{})
	ensureClusterCRD(t)
	applyCluster(t, s.ns, upstream.Shoot{OpType: "Create", OpState: "Processing"})
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "cluster.extensions.gardener.cloud", s.ns, "--ignore-not-found") })
	waitClusterKindFound(t)

	s.start()
	time.Sleep(15 * time.Second) // initialDelay 2 s + two intervals of 5 s, and more
	if jobs := s.probeJobs(); len(jobs) > 0 {
		t.Fatalf("%d probe Jobs launched for a shoot being created, first %s", len(jobs), jobs[0].Name)
	}
	created := time.Now()
	applyCluster(t, s.ns, upstream.Shoot{OpType: "Create", OpState: "Succeeded"})
	s.waitLog(2*time.Minute, map[string]string{"result": "healthy"})
	t.Logf("first probe finished %.1fs after the Create succeeded", time.Since(created).Seconds())
}

// TestProbeUsesTheShootsNodeMonitorGracePeriod: three of four worker leases were last renewed
// 5 minutes ago. With the config's 20s grace they have long expired, but the shoot says its
// kube-controller-manager waits 10m (leases expire after 7.5m): nothing is scaled, and each
// probe Job logs the grace it used. When the shoot's grace becomes 20s, the next probe Job
// uses it and scales the dependents down.
func TestProbeUsesTheShootsNodeMonitorGracePeriod(t *testing.T) {
	parallelLong(t, 70*time.Second)
	s := newProbeScenario(t, "probe-grace", probeSetup{expired: []string{"w1", "w2", "w3"}})
	ensureClusterCRD(t)
	applyCluster(t, s.ns, upstream.Shoot{NodeMonitorGracePeriod: "10m"})
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "cluster.extensions.gardener.cloud", s.ns, "--ignore-not-found") })
	waitClusterKindFound(t)

	s.start()
	s.waitLog(2*time.Minute, map[string]string{"action": "scale-up", "node_monitor_grace": "10m0s"})
	time.Sleep(10 * time.Second)
	s.assertUntouched("the shoot's 10m grace has not passed")

	changed := time.Now()
	applyCluster(t, s.ns, upstream.Shoot{NodeMonitorGracePeriod: "20s"})
	s.waitReplicas(kcm, 0, 120*time.Second)
	s.waitLog(30*time.Second, map[string]string{"action": "scale-down", "node_monitor_grace": "20s"})
	t.Logf("scaled down %.1fs after the shoot's grace became 20s", time.Since(changed).Seconds())
}

// gardenletProberConfig is the prober ConfigMap data as gardenlet writes it: only
// kubeConfigSecretName, probeInterval and dependentResourceInfos (the Secret name is the
// local overlay's, which the probe's RBAC allows).
const gardenletProberConfig = `kubeConfigSecretName: shoot-kubeconfig
probeInterval: 5s
dependentResourceInfos:
- ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
  optional: false
  scaleUp: {level: 1}
  scaleDown: {level: 0}
- ref: {kind: Deployment, name: machine-controller-manager, apiVersion: apps/v1}
  optional: false
  scaleUp: {level: 1}
  scaleDown: {level: 1}
- ref: {kind: Deployment, name: cluster-autoscaler, apiVersion: apps/v1}
  optional: true
  scaleUp: {level: 0}
  scaleDown: {level: 2}
`

// gardenletWeederConfig is the rest of the coordinator's config for this test: no weeder
// services (a prober-only coordinator) and the local overlay's Job template.
const gardenletWeederConfig = `jobTemplate:
  namespace: depwatch
  image: localhost/depwatch:dev
  imagePullPolicy: Never
  hostNetwork: true
  env:
    - {name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}
    - {name: KUBERNETES_SERVICE_PORT, value: "6443"}
    - {name: LOG_FORMAT, value: Logrus}
`

// TestCoordinatorRunsOnGardenletsProberConfigFile: a coordinator started with
// --prober-config-file on the prober ConfigMap exactly as gardenlet writes it (everything
// else defaulted: initialDelay 30s, kcmNodeMonitorGraceDuration 40s, namespaces labelled
// gardener.cloud/role=shoot) scales the dependents down in the order it names when 3 of 4
// worker leases have expired. It runs outside the cluster (the local overlay's coordinator
// has its own config), on this worktree's code.
func TestCoordinatorRunsOnGardenletsProberConfigFile(t *testing.T) {
	parallelLong(t, 75*time.Second)
	selectsEveryShoot(t)
	s := newProbeScenario(t, "probe-gardenlet", probeSetup{expired: []string{"w1", "w2", "w3"}})
	dir := t.TempDir()
	cfgFile, proberFile := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "dep-config.yaml")
	for f, doc := range map[string]string{cfgFile: gardenletWeederConfig, proberFile: gardenletProberConfig} {
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	coord := startHostCoordinator(t, []string{"--config-file", cfgFile, "--metrics-bind-addr", "0", "--health-bind-addr", "0"},
		[]string{"DEPWATCH_PROBER_CONFIG_FILE=" + proberFile}) // the flag's variable
	t.Cleanup(func() { _, _ = kubectl(t, "label", "namespace", s.ns, "gardener.cloud/role-") })
	started := time.Now()
	mustKubectl(t, "label", "namespace", s.ns, "gardener.cloud/role=shoot")

	for _, name := range dependents {
		s.waitReplicas(name, 0, 150*time.Second)
	}
	t.Logf("all dependents at 0 replicas %.1fs after the namespace was labelled (initialDelay 30s)", time.Since(started).Seconds())
	down := s.phase(30*time.Second, "scale-down", started, map[string]string{"action": "scaled-down", "name": ca})
	assertOrder(t, "scale-down", down, levelOrderDown)
	if l, ok := findLine(down, map[string]string{"action": "scale-down"}); !ok || l.str("node_monitor_grace") != "40s" {
		t.Errorf("the probe's grace is %q, want dependency-watchdog's default 40s", l.str("node_monitor_grace"))
	}
	if log := coord.output(); strings.Contains(log, "does not know") {
		t.Errorf("gardenlet's own config produced unknown-field warnings:\n%s", log)
	}
}
