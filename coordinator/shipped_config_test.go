package coordinator

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// minimalConfig has only what has no default: a service to watch, and the prober's Secret
// name and dependents.
const minimalConfig = `
servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors: [{matchLabels: {app: kubernetes}}]
jobTemplate:
  image: depwatch:test
prober:
  kubeConfigSecretName: shoot-access
  dependentResourceInfos:
    - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
      scaleUp: {level: 1, timeout: 30s}
      scaleDown: {level: 0, timeout: 40s}
`

// effective is every setting that has a default, as the coordinator applies it, by the
// config path an operator writes.
func effective(t *testing.T, c *config.Config) map[string]string {
	t.Helper()
	p := c.Prober
	tpl := c.JobTemplate
	tpl.Namespace, tpl.Image = "depwatch", "depwatch:test"
	spec, err := jobs.Probe(jobs.ProbeSpec{
		JobSettings: probe.JobSettings{
			Namespace: "ns", KubeconfigSecretName: "s", ProbeTimeout: time.Second,
			NodeMonitorGrace: probe.MinNodeMonitorGrace, NodeLeaseFailureFraction: 1,
			LeaseExpiryBufferFraction: 1, DependentResources: p.ResourcesJSON(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	job, err := jobs.Build(tpl, spec)
	if err != nil {
		t.Fatal(err)
	}
	res := job.Spec.Template.Spec.Containers[0].Resources
	return map[string]string{
		"watchDuration":                       c.Watch().String(),
		"armWeeder":                           fmt.Sprint(c.ArmWeeder == nil || *c.ArmWeeder),
		"armedMaxWait":                        c.MaxWait().String(),
		"reapCooldown":                        c.Cooldown().String(),
		"useEndpoints":                        fmt.Sprint(c.UseEndpoints),
		"jobTemplate.ttlSecondsAfterFinished": fmt.Sprint(*job.Spec.TTLSecondsAfterFinished),
		"jobTemplate.backoffLimit":            fmt.Sprint(*job.Spec.BackoffLimit),
		"jobTemplate.resources":               fmt.Sprintf("requests %v limits %v", res.Requests, res.Limits),
		"prober.probeInterval":                p.Interval().String(),
		"prober.initialDelay":                 p.Delay().String(),
		"prober.probeTimeout":                 p.Timeout().String(),
		"prober.backoffJitterFactor":          fmt.Sprint(p.Jitter()),
		"prober.kcmNodeMonitorGraceDuration":  p.KCMGrace().String(),
		"prober.nodeLeaseFailureFraction":     fmt.Sprint(p.LeaseFailure()),
		"prober.leaseExpiryBufferFraction":    fmt.Sprint(p.ExpiryBuffer()),
		"prober.namespaceSelector":            p.Selector().String(),
		"prober.successfulJobsHistoryLimit":   fmt.Sprint(p.SuccessfulHistory()),
		"prober.failedJobsHistoryLimit":       fmt.Sprint(p.FailedHistory()),
		"prober.probeJobRunDuration":          p.RunDuration().String(),
		"prober.namespacesPerProbeJob":        fmt.Sprint(p.PerJob()),
		"prober.clusterDiscoveryInterval":     p.DiscoveryInterval().String(),
		"prober.dryRun":                       fmt.Sprint(p.DryRun),
	}
}

func loadShipped(t *testing.T, path string) *config.Config {
	t.Helper()
	c, err := Options{ConfigFile: filepath.Join("..", path)}.LoadConfig()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// differing lists the settings of got that are not the defaults, with both values.
func differing(got, defaults map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range defaults {
		if got[k] != v {
			out[k] = fmt.Sprintf("%s (default %s)", got[k], v)
		}
	}
	return out
}

// What is shipped is what is measured: the Gardener seed config
// (manifests/components/gardener/config.yaml, the chart's gardener.enabled=true) presents its
// settings as the defaults (a seed install must behave as the code's defaults, which the
// benchmarks measure), so each of them equals the code's default.
func TestTheGardenerConfigShipsTheCodesDefaults(t *testing.T) {
	defaults, err := config.Parse([]byte(minimalConfig))
	if err != nil {
		t.Fatal(err)
	}
	want := effective(t, defaults)
	if want["prober.probeJobRunDuration"] != prober.DefaultProbeJobRunDuration.String() {
		t.Fatalf("the defaults themselves: probeJobRunDuration %s", want["prober.probeJobRunDuration"])
	}
	if diff := differing(effective(t, loadShipped(t, "manifests/components/gardener/config.yaml")), want); len(diff) > 0 {
		t.Errorf("manifests/components/gardener/config.yaml sets values other than the code's defaults: %v", diff)
	}
}

// The default install serves any cluster: manifests/base/config.yaml (the chart's default
// too) follows workloads' depends-on annotations in every namespace, names no service of
// Gardener's, runs no prober, and its weeder settings are the code's defaults.
func TestTheBaseConfigFollowsAnnotationsEverywhereAndRunsNoProber(t *testing.T) {
	c := loadShipped(t, "manifests/base/config.yaml")
	switch {
	case c.Prober != nil:
		t.Error("the default config has a prober section; the prober is the Gardener component's")
	case len(c.Services()) > 0:
		t.Errorf("the default config names services %v; on a cluster without Gardener they mean nothing", c.Services())
	case c.Excludes():
		t.Errorf("the default config leaves namespaces out: it watches %s", c.NamespacesText())
	case !c.Weeds(false) || !c.DependsOn():
		t.Error("the default config does not follow the depends-on annotation")
	}
	gardener := loadShipped(t, "manifests/components/gardener/config.yaml")
	weederSettings := func(c *config.Config) string {
		return fmt.Sprint(c.Watch(), c.Arm(""), c.MaxWait(), c.Cooldown(), c.UseEndpoints, c.JobTemplate.Resources, c.JobTemplate.Env)
	}
	if got, want := weederSettings(c), weederSettings(gardener); got != want {
		t.Errorf("the default config's weeder and Job settings %s differ from the Gardener config's %s", got, want)
	}
}

// localOverrides are the local test cluster's deliberate departures from the defaults, and
// why; manifests/overlays/local/config.yaml says the same next to each.
var localOverrides = map[string]string{
	"prober.probeInterval":               "probe every 5 s, so the probe scenarios end in seconds",
	"prober.initialDelay":                "2 s: a test namespace is probed right after it is labelled",
	"prober.probeTimeout":                "5 s: one local API server, never slow on purpose",
	"prober.kcmNodeMonitorGraceDuration": "20 s: the real kubelet renews every 10 s and must never count as expired",
	"prober.namespaceSelector":           "only the namespaces the probe tests label depwatch.io/e2e-probe=true",
	"prober.probeJobRunDuration":         "20 s: a test reads a finished Job's log soon",
	"prober.clusterDiscoveryInterval":    "5 s: the Gardener tests install the Cluster kind and expect it found at once",
}

// The local overlay departs from the defaults only where it says why (localOverrides).
func TestTheLocalConfigDepartsFromTheDefaultsOnlyOnPurpose(t *testing.T) {
	defaults, err := config.Parse([]byte(minimalConfig))
	if err != nil {
		t.Fatal(err)
	}
	diff := differing(effective(t, loadShipped(t, "manifests/overlays/local/config.yaml")), effective(t, defaults))
	var unexplained, stale []string
	for k, v := range diff {
		if _, ok := localOverrides[k]; !ok {
			unexplained = append(unexplained, k+"="+v)
		}
	}
	for k := range localOverrides {
		if _, ok := diff[k]; !ok {
			stale = append(stale, k)
		}
	}
	slices.Sort(unexplained)
	slices.Sort(stale)
	if len(unexplained) > 0 {
		t.Errorf("the local config departs from the defaults without a reason in localOverrides: %s", strings.Join(unexplained, "; "))
	}
	if len(stale) > 0 {
		t.Errorf("localOverrides explains departures the local config no longer makes: %v (keys %v)", stale, slices.Sorted(maps.Keys(diff)))
	}
}
