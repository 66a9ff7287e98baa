//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/test/upstream"
)

// The chart installed as a user without Gardener installs it: the chart's default config (no
// config value), its Jobs given the lab's host network by the jobTemplate value alone. A
// Deployment annotated `depwatch.io/depends-on: db`, in a namespace with no Gardener label, has
// its Service's outage armed and its crash-looping pod restarted by the release's weeder at
// the return. Then the same chart with gardener.enabled=true: its prober probes the namespace
// labelled as a shoot and never the plain one, and its weeder reports the plain namespace's
// annotated Service as left out (a warning naming it, the services_excluded gauge) rather
// than drop it without a word.
//
// A release with the default config weeds every namespace, other tests' too, so this test
// runs in a quiet group of its own: beside it, its weeder would restart their dependents
// beside the lab's. Its namespaces carry the private-coordinator label, which the lab's config
// leaves alone; each release has its own namespace, Lease, ports and cluster-wide names.
func TestHelmChartDefaultInstallWeedsAnyNamespaceAndGardenerIsOneSwitch(t *testing.T) {
	quiet(t, "helm-default-install")
	helm, releaseNS, release, c, work := newHelmRelease(t, "dflt", "dwd")
	chartDir := filepath.Join(repoRoot, "manifests/charts/depwatch")
	requireNoGardenerLabel(t, work)

	values := helmLabValues(c)
	values["jobTemplate"] = map[string]any{"hostNetwork": true, "env": apiEnv()}
	helmRun(t, helm, "install", release, chartDir, "-n", releaseNS, "-f", writeValues(t, values), "--wait", "--timeout=2m")
	uninstalled := false
	uninstall := func() {
		if !uninstalled {
			uninstalled = true
			_, _ = helmOut(helm, "uninstall", release, "-n", releaseNS, "--wait", "--timeout=1m")
		}
	}
	t.Cleanup(uninstall)
	c.waitLeading(t)
	waitCoordinatorLineIn(t, releaseNS, map[string]string{"msg": "Caches synced; ready."}, time.Minute)

	p := startPair(t, work, dependsOnService)
	p.jobsNS = releaseNS
	p.waitServiceReady(true, time.Minute)
	p.startAnnotatedDependent(dependsOnService)
	waitCoordinatorLineIn(t, releaseNS, map[string]string{"service": p.serviceKey(),
		"msg": "Watching the EndpointSlices of a service an annotation names."}, time.Minute)
	p.waitDependentReady(time.Minute, "")
	outageStart := p.beginOutage()
	p.waitServiceReady(false, time.Minute)
	armed := p.waitArmedJob(outageStart, time.Minute)
	t.Logf("the default install armed weeder Job %s/%s for %s", releaseNS, armed.Name, p.serviceKey())
	cl := p.waitCrashLoop(30*time.Second, 3*time.Minute)
	p.returnBeforeTheKubelet(cl)
	waitJobLogLine(t, releaseNS, armed.Name, map[string]string{"namespace": work, "pod": cl.pod.Name, "action": "deleted"}, 30*time.Second)
	for k, v := range c.scrape(t) {
		if strings.HasPrefix(k, "depwatch_coordinator_probe_namespaces") && v != 0 {
			t.Errorf("the default install has %s %v; it runs no prober", k, v)
		}
	}
	uninstall()

	// The Gardener switch, in a release of its own: a shoot namespace (labelled
	// gardener.cloud/role=shoot, its Cluster settled) is probed; the plain namespace is not,
	// and its annotated Service is reported as left out.
	ensureClusterCRD(t)
	gNS := newNamespace(t, "dflt-g")
	gRelease := "dwg-" + strings.TrimPrefix(gNS, "e2e-dflt-g-")
	g := &deployedCoordinator{name: gRelease + "-depwatch-coordinator", component: "coordinator", leaseNS: gNS,
		metrics: freePort(t), health: freePort(t)}
	shoot := newNamespaceLabelled(t, "dflt-shoot", map[string]string{privateCoordinatorLabel: gNS, "gardener.cloud/role": "shoot"})
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "clusters.extensions.gardener.cloud", shoot, "--ignore-not-found") })
	applyCluster(t, shoot, upstream.Shoot{OpType: "Reconcile", OpState: "Succeeded"})
	gValues := helmLabValues(g)
	gValues["gardener"] = map[string]any{"enabled": true}
	gValues["jobTemplate"] = map[string]any{"hostNetwork": true, "env": apiEnv()}
	helmRun(t, helm, "install", gRelease, chartDir, "-n", gNS, "-f", writeValues(t, gValues), "--wait", "--timeout=2m")
	t.Cleanup(func() { _, _ = helmOut(helm, "uninstall", gRelease, "-n", gNS, "--wait", "--timeout=1m") })
	g.waitLeading(t)
	waitCoordinatorLineIn(t, gNS, map[string]string{"namespace": shoot, "msg": "Probing this namespace."}, 2*time.Minute)
	waitCoordinatorLineIn(t, gNS, map[string]string{"namespace": work, "service": dependsOnService, "action": "excluded"}, time.Minute)
	if n := g.metric(t, "depwatch_coordinator_weeder_services_excluded"); n < 1 {
		t.Errorf("depwatch_coordinator_weeder_services_excluded is %v; want the plain namespace's annotated Service counted", n)
	}
	out := mustKubectl(t, "-n", gNS, "logs", "-l", "app.kubernetes.io/component=coordinator", "--tail=-1")
	for _, l := range parseLogLines(out) {
		if l.str("namespace") == work && strings.Contains(strings.ToLower(l.str("msg")), "probing") {
			t.Errorf("the Gardener install's prober took up the plain namespace %s: %q", work, l.str("msg"))
		}
	}
}

// requireNoGardenerLabel: the namespace has no gardener.cloud label, so nothing of Gardener's
// selects it.
func requireNoGardenerLabel(t *testing.T, ns string) {
	t.Helper()
	n, err := kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range n.Labels {
		if strings.Contains(k, "gardener.cloud") {
			t.Fatalf("namespace %s has the Gardener label %s", ns, k)
		}
	}
}
