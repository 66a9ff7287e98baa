//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The Helm chart (manifests/charts/depwatch) as a user runs it: helm install of a release in
// a namespace of its own, a weeder flow through that release, helm upgrade with a changed
// config, and helm uninstall, which must leave none of the release's objects behind,
// cluster-wide RBAC included. The release is a coordinator of its own beside the lab's: its
// own ports and Lease (in its namespace), and it weeds only namespaces labelled for it, which
// the lab's config leaves alone.
func TestHelmChartInstallWeedUpgradeUninstall(t *testing.T) {
	parallelLong(t, 90*time.Second)
	helm, releaseNS, release, c, work := newHelmRelease(t, "helm", "dwh")

	services := map[string]any{"upstream": weederDependents()}
	values := helmValues(c, releaseNS, "1m", services)
	start := time.Now()
	helmRun(t, helm, "install", release, filepath.Join(repoRoot, "manifests/charts/depwatch"), "-n", releaseNS,
		"-f", writeValues(t, values), "--wait", "--timeout=2m")
	t.Cleanup(func() { _, _ = helmOut(helm, "uninstall", release, "-n", releaseNS, "--wait", "--timeout=1m") })
	c.waitLeading(t)
	t.Logf("helm install → coordinator leading: %s", time.Since(start).Round(100*time.Millisecond))
	requireChartVersion(t, c, releaseNS)

	// A service goes down and comes back; its crash-looping dependent is restarted by the
	// release's weeder Job, which runs in the release's namespace.
	p := newPair(t, work)
	p.jobsNS = releaseNS
	outageStart := p.beginOutage()
	p.waitServiceReady(false, time.Minute)
	armed := p.waitArmedJob(outageStart, time.Minute)
	cl := p.waitCrashLoop(30*time.Second, 3*time.Minute)
	p.returnBeforeTheKubelet(cl)
	waitJobLogLine(t, releaseNS, armed.Name, map[string]string{"namespace": work, "pod": cl.pod.Name, "action": "deleted"}, 30*time.Second)
	if got := jobEnvValue(armed, "RUN_DURATION"); got != "1m0s" && got != "1m" {
		t.Errorf("weeder Job %s has RUN_DURATION=%q; the release's watchDuration is 1m", armed.Name, got)
	}

	// helm upgrade with another config: no service at all, so the release follows the
	// depwatch.io/depends-on annotations of workloads alone (a cluster without Gardener), and a
	// shorter watchDuration. An annotated dependent's upstream outage gets an armed weeder that
	// runs for the new watchDuration.
	helmRun(t, helm, "upgrade", release, filepath.Join(repoRoot, "manifests/charts/depwatch"), "-n", releaseNS,
		"-f", writeValues(t, helmValues(c, releaseNS, "50s", map[string]any{})), "--wait", "--timeout=2m")
	c.waitLeading(t)
	other := startPair(t, newNamespaceLabelled(t, "helm-other", map[string]string{privateCoordinatorLabel: releaseNS}), "other")
	other.jobsNS = releaseNS
	other.waitServiceReady(true, time.Minute)
	other.startAnnotatedDependent("other")
	waitCoordinatorLineIn(t, releaseNS, map[string]string{"service": other.ns + "/other",
		"msg": "Watching the EndpointSlices of a service an annotation names."}, time.Minute)
	other.waitDependentReady(time.Minute, "")
	outageStart = other.beginOutage()
	job := other.waitArmedJob(outageStart, time.Minute)
	if got := jobEnvValue(job, "RUN_DURATION"); got != "50s" {
		t.Errorf("after helm upgrade, weeder Job %s has RUN_DURATION=%q; want the new watchDuration 50s", job.Name, got)
	}
	if got := jobEnvValue(job, "LABEL_SELECTORS"); !strings.Contains(got, "app="+dependentName) {
		t.Errorf("weeder Job %s has LABEL_SELECTORS=%q; want the annotated Deployment's own selector (app=%s)", job.Name, got, dependentName)
	}

	// helm uninstall removes every object of the release, the cluster-wide ones included.
	manifest := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(manifest, []byte(helmRun(t, helm, "get", "manifest", release, "-n", releaseNS)), 0o600); err != nil {
		t.Fatal(err)
	}
	helmRun(t, helm, "uninstall", release, "-n", releaseNS, "--wait", "--timeout=2m")
	if left := mustKubectl(t, "get", "-f", manifest, "--ignore-not-found", "-o", "name"); strings.TrimSpace(left) != "" {
		t.Errorf("helm uninstall left objects of the release behind:\n%s", left)
	}
	sel := "app.kubernetes.io/instance=" + release
	if left := mustKubectl(t, "get", "clusterroles,clusterrolebindings", "-l", sel, "-o", "name"); strings.TrimSpace(left) != "" {
		t.Errorf("helm uninstall left cluster-wide RBAC behind:\n%s", left)
	}
	waitFor(t, time.Minute, "the release's coordinator pods to be gone", func() (bool, error) {
		pods, err := kube.CoreV1().Pods(releaseNS).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
		return err == nil && len(pods.Items) == 0, err
	})
}

// requireChartVersion checks that the release runs the image the chart names by default,
// tagged with the VERSION file, and that the binary in it says that version: the three come
// from one source.
func requireChartVersion(t *testing.T, c *deployedCoordinator, ns string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(b))
	pods, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=coordinator"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("listing the release's coordinator pods: %v (%d found)", err, len(pods.Items))
	}
	if got, want := pods.Items[0].Spec.Containers[0].Image, "ghcr.io/depwatch/depwatch:"+version; got != want {
		t.Errorf("the release runs image %s; the chart's default with VERSION %s is %s", got, version, want)
	}
	var info []string
	for k := range c.scrape(t) {
		if strings.HasPrefix(k, "depwatch_build_info{") {
			info = append(info, k)
		}
	}
	if len(info) != 1 || !strings.Contains(info[0], `version="`+version+`"`) {
		t.Errorf("the coordinator's depwatch_build_info is %v; want version=%q (VERSION)", info, version)
	}
}

// weederDependents is a service's entry in the weeder config: the pair's dependent pods.
func weederDependents() map[string]any {
	return map[string]any{"podSelectors": []any{map[string]any{"matchLabels": map[string]any{dependentLabel: "dependent"}}}}
}

// helmValues are the chart's values for a release on the local cluster, as
// manifests/overlays/local sets the lab up: the local image, never pulled; the host network
// (no kube-proxy here) with the API server on loopback; c's own loopback ports; and a config
// that weeds services only in namespaces labelled for this release.
func helmValues(c *deployedCoordinator, releaseNS, watchDuration string, services map[string]any) map[string]any {
	values := helmLabValues(c)
	values["config"] = helmLabConfig(releaseNS, watchDuration, services)
	return values
}

// apiEnv is what a pod on the local cluster's host network needs to reach the API server (no
// kube-proxy here).
func apiEnv() []any {
	return []any{
		map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": apiServerHost},
		map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": apiServerPort},
	}
}

// helmLabValues are the values any release needs on the local cluster, whatever its config:
// the chart's own image (ghcr.io/depwatch/depwatch:<appVersion>, which hack/image.sh packs and
// imports as make image builds it), never pulled; one replica on the host network with the
// API server on loopback; c's own loopback ports.
func helmLabValues(c *deployedCoordinator) map[string]any {
	return map[string]any{
		"image":       map[string]any{"pullPolicy": "Never"},
		"replicas":    1,
		"strategy":    map[string]any{"type": "Recreate"},
		"hostNetwork": true,
		"listen":      map[string]any{"host": "127.0.0.1", "metricsPort": c.metrics, "healthPort": c.health},
		"env":         apiEnv(),
	}
}

// helmLabConfig is a config that weeds services only in namespaces labelled for the release.
func helmLabConfig(releaseNS, watchDuration string, services map[string]any) map[string]any {
	return map[string]any{
		"watchDuration":                 watchDuration,
		"servicesAndDependantSelectors": services,
		"namespaces":                    map[string]any{"selector": map[string]any{"matchLabels": map[string]any{privateCoordinatorLabel: releaseNS}}},
		"armWeeder":                     true,
		"jobTemplate": map[string]any{
			"hostNetwork":             true,
			"ttlSecondsAfterFinished": 600,
			"env":                     append(apiEnv(), map[string]any{"name": "LOG_FORMAT", "value": "Logrus"}),
		},
	}
}

func writeValues(t *testing.T, values map[string]any) string {
	t.Helper()
	b, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// helmBinary is the helm `make helm` builds (make e2e passes it as DEPWATCH_HELM).
func helmBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("DEPWATCH_HELM")
	if p == "" {
		p = "_output/bin/helm"
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(repoRoot, p)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no helm at %s: `make helm` builds it (make e2e does so first)", p)
	}
	return p
}

func helmOut(helm string, args ...string) (string, error) {
	cmd := exec.Command(helm, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func helmRun(t *testing.T, helm string, args ...string) string {
	t.Helper()
	out, err := helmOut(helm, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newHelmRelease names a Helm release of its own for a test: the helm binary, the release's
// namespace (e2e-<prefix>-…) and name (<short>-…), the coordinator it will run (its own ports
// and Lease), and a work namespace labelled for that coordinator alone.
func newHelmRelease(t *testing.T, prefix, short string) (helm, releaseNS, release string, c *deployedCoordinator, work string) {
	t.Helper()
	helm = helmBinary(t)
	releaseNS = newNamespace(t, prefix)
	release = short + "-" + strings.TrimPrefix(releaseNS, "e2e-"+prefix+"-")
	c = &deployedCoordinator{name: release + "-depwatch-coordinator", component: "coordinator", leaseNS: releaseNS,
		metrics: freePort(t), health: freePort(t)}
	work = newNamespaceLabelled(t, prefix+"-app", map[string]string{privateCoordinatorLabel: releaseNS})
	return helm, releaseNS, release, c, work
}
