package manifests

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The chart's two default configs are copies of the kustomize ones (a chart cannot read files
// outside its folder): the base's for the default install, the Gardener component's for
// gardener.enabled=true.
func TestChartShipsTheKustomizeConfigs(t *testing.T) {
	for chartFile, source := range map[string]string{
		chart + "/files/config.yaml":          "base/config.yaml",
		chart + "/files/config-gardener.yaml": "components/gardener/config.yaml",
	} {
		if !bytes.Equal(readFile(t, chartFile), readFile(t, source)) {
			t.Errorf("manifests/%s differs from manifests/%s, its source: cp manifests/%[2]s manifests/%[1]s", chartFile, source)
		}
	}
}

// Installed with no values the chart's weeder follows depends-on annotations in every
// namespace and no prober runs; gardener.enabled=true is the whole Gardener seed setup: the
// shoot namespaces, Gardener's control-plane services, the prober and its shards.
func TestChartDefaultServesAnyClusterAndGardenerIsOneSwitch(t *testing.T) {
	cfg, _ := renderedConfig(t)
	switch {
	case cfg.Prober != nil:
		t.Error("no values: the config has a prober section")
	case cfg.Excludes():
		t.Errorf("no values: the weeder watches %s; want every namespace", cfg.NamespacesText())
	case len(cfg.Services()) != 0:
		t.Errorf("no values: the config names services %v", cfg.Services())
	case !cfg.DependsOn():
		t.Error("no values: the depends-on annotation is not followed")
	}

	cfg, _ = renderedConfig(t, "--set", "gardener.enabled=true")
	if got, want := cfg.NamespacesText(), "the namespaces matching gardener.cloud/role=shoot"; got != want {
		t.Errorf("gardener.enabled: the weeder watches %s; want %s", got, want)
	}
	if got, want := cfg.Services(), []string{"etcd-main-client", "kube-apiserver"}; !slices.Equal(got, want) {
		t.Errorf("gardener.enabled: services %v; want %v", got, want)
	}
	switch p := cfg.Prober; {
	case p == nil:
		t.Fatal("gardener.enabled: no prober section")
	case p.Selector().String() != "gardener.cloud/role=shoot":
		t.Errorf("gardener.enabled: the prober probes namespaces matching %s", p.Selector())
	case p.PerJob() != 125 || p.KubeConfigSecretName != "shoot-access-dependency-watchdog-probe":
		t.Errorf("gardener.enabled: shards of %d namespaces, Secret %s", p.PerJob(), p.KubeConfigSecretName)
	}

	// The switch chooses the default; a config of one's own replaces it, so the two together
	// are refused rather than one silently ignored.
	if _, err := runErr(helmBinary(t), "template", "dw", chart, "--set", "gardener.enabled=true", "--set-json", `config={"watchDuration":"1m"}`); err == nil || !strings.Contains(err.Error(), "set one of the two") {
		t.Errorf("gardener.enabled with a config: want it refused, got %v", err)
	}
}

// The chart's jobTemplate value reaches the Jobs of the default config, and the admission
// policy's parameters admit what it says (the host network, the added env), while the config's
// own fields stay.
func TestChartJobTemplateValueIsAddedToTheDefaultConfig(t *testing.T) {
	objs := parseObjects(t, run(t, helmBinary(t), "template", "dw", chart, "--namespace", "ops",
		"--set", "jobTemplate.hostNetwork=true", "--set", "jobTemplate.env[0].name=KUBERNETES_SERVICE_HOST,jobTemplate.env[0].value=127.0.0.1"))
	cfg, _ := renderedConfig(t, "--set", "jobTemplate.hostNetwork=true", "--set", "jobTemplate.env[0].name=KUBERNETES_SERVICE_HOST,jobTemplate.env[0].value=127.0.0.1")
	if !cfg.JobTemplate.HostNetwork || len(cfg.JobTemplate.Env) != 2 || cfg.JobTemplate.Env[1].Name != "KUBERNETES_SERVICE_HOST" || cfg.JobTemplate.Env[0].Name != "LOG_FORMAT" {
		t.Errorf("jobTemplate value: the config's jobTemplate is %+v", cfg.JobTemplate)
	}
	if cfg.JobTemplate.TTLSecondsAfterFinished == nil || *cfg.JobTemplate.TTLSecondsAfterFinished != 3600 || !cfg.DependsOn() {
		t.Errorf("jobTemplate value: the default config lost its own fields: %+v", cfg)
	}
	params, _ := yaml.Marshal(objs["PodTemplate ops/dw-depwatch-jobs"])
	if !strings.Contains(string(params), "hostNetwork: true") || !strings.Contains(string(params), "KUBERNETES_SERVICE_HOST") {
		t.Errorf("the admission parameters do not admit the jobTemplate value's host network and env:\n%s", params)
	}
}

// The kustomize counterpart of gardener.enabled=true is manifests/overlays/gardener (the base,
// the admission policies and components/gardener): the chart with the switch renders the
// same objects, as the chart's defaults render manifests/
// (TestChartDefaultsRenderTheKustomizeBase).
func TestChartGardenerSwitchRendersTheGardenerOverlay(t *testing.T) {
	helm := helmBinary(t)
	if _, err := runErr("kubectl", "version", "--client"); err != nil {
		t.Skip("no kubectl on PATH to render manifests/overlays/gardener with")
	}
	kustomized := parseObjects(t, run(t, "kubectl", "kustomize", "overlays/gardener"))
	delete(kustomized, "Namespace <nil>/depwatch")
	rendered := parseObjects(t, run(t, helm, "template", "depwatch", chart, "--namespace", "depwatch", "--set", "gardener.enabled=true"))
	keys := slices.Sorted(maps.Keys(kustomized))
	if got := slices.Sorted(maps.Keys(rendered)); !slices.Equal(got, keys) {
		t.Fatalf("objects differ:\noverlays/gardener: %v\nchart: %v", keys, got)
	}
	for _, k := range keys {
		w, g := normalize(map[string]any(kustomized[k])), normalize(map[string]any(rendered[k]))
		if !reflect.DeepEqual(w, g) {
			wy, _ := yaml.Marshal(w)
			gy, _ := yaml.Marshal(g)
			t.Errorf("%s differs.\nmanifests/overlays/gardener:\n%s\nchart --set gardener.enabled=true:\n%s", k, wy, gy)
		}
	}
}
