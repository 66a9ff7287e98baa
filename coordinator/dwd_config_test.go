package coordinator

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/coordinator/weeder"
	"github.com/depwatch/depwatch/internal/decode"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/test/upstream"
)

// yamlKeys are the keys of a YAML map.
func yamlKeys(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// dwdConfigs: dependency-watchdog's weeder ConfigMap data as the config file, and its prober
// ConfigMap data as the file's prober section, both with every field of dependency-watchdog's
// types set (test/upstream, dependency-watchdog v1.7.0).
func dwdConfigs(t *testing.T) []byte {
	t.Helper()
	var b strings.Builder
	b.Write(upstream.WeederConfig())
	b.WriteString("\nprober:\n")
	for line := range strings.Lines(string(upstream.ProberConfig())) {
		b.WriteString("  " + line)
	}
	return []byte(b.String())
}

// Every field of dependency-watchdog's weeder and prober configs is one depwatch knows: a
// ConfigMap that sets all of them loads without a single unknown-field warning, in the
// config file and as the prober ConfigMap mounted on its own, and each value reads as
// dependency-watchdog means it.
func TestEveryDependencyWatchdogConfigFieldIsKnownAndRead(t *testing.T) {
	dir := t.TempDir()
	weederFile, proberFile, combined := filepath.Join(dir, "weeder.yaml"), filepath.Join(dir, "dep-config.yaml"), filepath.Join(dir, "config.yaml")
	for f, data := range map[string][]byte{weederFile: upstream.WeederConfig(), proberFile: upstream.ProberConfig(), combined: dwdConfigs(t)} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, load := range map[string]func() (*config.Config, error){
		"prober section in the config file": func() (*config.Config, error) { return Options{ConfigFile: combined}.LoadConfig() },
		"prober ConfigMap mounted on its own": func() (*config.Config, error) {
			return Options{ConfigFile: weederFile, ProberConfigFile: proberFile}.LoadConfig()
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := load()
			if err != nil {
				t.Fatalf("dependency-watchdog %s's configs refused: %v", upstream.DependencyWatchdogVersion, err)
			}
			if w := cfg.Warnings(); len(w) > 0 {
				t.Errorf("fields of dependency-watchdog %s that depwatch does not know: %q", upstream.DependencyWatchdogVersion, w)
			}
			p := cfg.Prober
			if p == nil {
				t.Fatal("no prober section")
			}
			for _, c := range []struct {
				field     string
				got, want any
			}{
				{"watchDuration", cfg.Watch(), 3 * time.Minute},
				{"servicesAndDependantSelectors", cfg.Services(), []string{"etcd-main-client", "kube-apiserver"}},
				{"podSelectors[0].matchExpressions", len(cfg.Selectors("etcd-main-client")[0].MatchExpressions), 1},
				{"kubeConfigSecretName", p.KubeConfigSecretName, "shoot-access-dependency-watchdog-probe"},
				{"probeInterval", p.Interval(), 20 * time.Second},
				{"initialDelay", p.Delay(), 45 * time.Second},
				{"probeTimeout", p.Timeout(), 15 * time.Second},
				{"backoffJitterFactor", p.Jitter(), 0.3},
				{"kcmNodeMonitorGraceDuration", p.KCMGrace(), 50 * time.Second},
				{"nodeLeaseFailureFraction", p.LeaseFailure(), 0.5},
				{"dependentResourceInfos[0]", p.Resources()[0], probe.DependentResource{
					Ref:       probe.ResourceRef{Kind: "Deployment", Name: "kube-controller-manager", APIVersion: "apps/v1"},
					ScaleUp:   probe.ScaleInfo{Level: 1, InitialDelay: 10 * time.Second, Timeout: 40 * time.Second},
					ScaleDown: probe.ScaleInfo{Level: 0, InitialDelay: 5 * time.Second, Timeout: 35 * time.Second},
				}},
				{"dependentResourceInfos[2].optional", p.Resources()[2].Optional, true},
			} {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%s reads as %v, want %v", c.field, c.got, c.want)
				}
			}
		})
	}
}

// depwatch's config types have exactly dependency-watchdog's fields, plus depwatch's own
// additions, each documented in docs/coordinator.md: a field renamed on either side, or an
// addition nobody wrote down, fails here.
func TestDepwatchsConfigIsDependencyWatchdogsPlusDocumentedAdditions(t *testing.T) {
	doc, err := os.ReadFile("../docs/coordinator.md")
	if err != nil {
		t.Fatal(err)
	}
	weederDoc, proberDoc := yamlKeys(t, upstream.WeederConfig()), yamlKeys(t, upstream.ProberConfig())
	services, _ := weederDoc["servicesAndDependantSelectors"].(map[string]any)
	service, _ := services["etcd-main-client"].(map[string]any)
	for _, c := range []struct {
		what string
		typ  reflect.Type
		dwd  map[string]any
		// notAdditions: json fields of depwatch's type that belong to neither config (the
		// coordinator's own sections, documented with the file).
		notAdditions []string
	}{
		{"the weeder config (top level)", reflect.TypeFor[config.Config](), weederDoc, []string{"jobTemplate", "prober"}},
		{"servicesAndDependantSelectors.<service>", reflect.TypeFor[weeder.DependantSelectors](), service, nil},
		{"the prober config", reflect.TypeFor[prober.Config](), proberDoc, nil},
	} {
		ours := decode.JSONFields(c.typ)
		for name := range c.dwd {
			if _, ok := ours[name]; !ok {
				t.Errorf("%s: dependency-watchdog %s's field %s is not one of depwatch's", c.what, upstream.DependencyWatchdogVersion, name)
			}
		}
		for name := range ours {
			if _, isDWD := c.dwd[name]; isDWD || slices.Contains(c.notAdditions, name) {
				continue
			}
			if !strings.Contains(string(doc), "`"+name+"`") && !strings.Contains(string(doc), " "+name+":") {
				t.Errorf("%s: depwatch's addition %s is not documented in docs/coordinator.md", c.what, name)
			}
		}
	}
}
