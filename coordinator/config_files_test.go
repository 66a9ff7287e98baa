package coordinator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/probe"
)

// gardenletProberConfig is the prober ConfigMap data as gardenlet writes it: only
// kubeConfigSecretName, probeInterval and dependentResourceInfos; everything else defaulted.
const gardenletProberConfig = `kubeConfigSecretName: shoot-access-dependency-watchdog-probe
probeInterval: 30s
dependentResourceInfos:
- ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
  scaleUp: {level: 1}
  scaleDown: {level: 0}
- ref: {kind: Deployment, name: machine-controller-manager, apiVersion: apps/v1}
  scaleUp: {level: 1}
  scaleDown: {level: 1}
- ref: {kind: Deployment, name: cluster-autoscaler, apiVersion: apps/v1}
  optional: true
  scaleUp: {level: 2}
  scaleDown: {level: 0}
`

// What gardenlet writes starts the coordinator, with dependency-watchdog's defaults for
// every field it leaves out.
func TestGardenletProberConfigStartsTheCoordinatorWithDependencyWatchdogsDefaults(t *testing.T) {
	weeder := writeFile(t, "weeder.yaml", "watchDuration: 5m\nservicesAndDependantSelectors:\n  etcd-main-client:\n    podSelectors: [{matchLabels: {role: apiserver}}]\n")
	prober := writeFile(t, "dep-config.yaml", gardenletProberConfig)
	cfg, err := Options{ConfigFile: weeder, ProberConfigFile: prober}.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Prober
	if p == nil {
		t.Fatal("no prober section from --prober-config-file")
	}
	for _, c := range []struct {
		field     string
		got, want any
	}{
		{"probeInterval", p.Interval(), 30 * time.Second},
		{"initialDelay", p.Delay(), 30 * time.Second},
		{"probeTimeout", p.Timeout(), 30 * time.Second},
		{"backoffJitterFactor", p.Jitter(), 0.2},
		{"kcmNodeMonitorGraceDuration", p.KCMGrace(), 40 * time.Second},
		{"nodeLeaseFailureFraction", p.LeaseFailure(), 0.6},
		{"resources", len(p.Resources()), 3},
		{"weeder services", len(cfg.Services()), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
		}
	}
	for _, r := range p.Resources() {
		if r.ScaleUp.InitialDelay != 0 || r.ScaleUp.Timeout != probe.DefaultScaleTimeout || r.ScaleDown.Timeout != probe.DefaultScaleTimeout {
			t.Errorf("%s: scale infos %+v %+v, want initialDelay 0s and timeout 30s", r.Ref, r.ScaleUp, r.ScaleDown)
		}
	}
	if len(p.Warnings()) != 0 {
		t.Errorf("warnings %q for gardenlet's own config", p.Warnings())
	}
}

// --prober-config-file: the prober ConfigMap as it is, beside the weeder's.
func TestProberConfigFileIsTheProberSection(t *testing.T) {
	weeder := "watchDuration: 5m\nservicesAndDependantSelectors:\n  etcd-main-client:\n    podSelectors: [{matchLabels: {role: apiserver}}]\n"
	for _, tc := range []struct {
		name, config, prober string
		want                 string // error substring; "" = accepted
	}{
		{"gardenlet's ConfigMap", weeder, gardenletProberConfig, ""},
		{"JSON works too", weeder, `{"kubeConfigSecretName":"s","dependentResourceInfos":[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"}}]}`, ""},
		{"a prober section in both files", weeder + "prober: {kubeConfigSecretName: s}\n", gardenletProberConfig, "prober: given in --config-file and in --prober-config-file"},
		{"not YAML", weeder, "kubeConfigSecretName: [", `prober.yaml": not valid YAML`},
		{"empty", weeder, "", `prober.yaml": empty`},
		{"a list, not a map", weeder, "- a\n- b\n", `prober.yaml": not valid YAML`},
		{"its problems are named as prober fields", weeder, "kubeConfigSecretName: s\nnodeLeaseFailureFraction: 2\n", "prober.nodeLeaseFailureFraction: 2: must be in (0,1]"},
		{"NaN is named", weeder, "kubeConfigSecretName: s\nbackoffJitterFactor: .nan\n", "prober.backoffJitterFactor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Options{ConfigFile: writeFile(t, "config.yaml", tc.config), ProberConfigFile: writeFile(t, "prober.yaml", tc.prober)}.LoadConfig()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := (Options{ConfigFile: writeFile(t, "config.yaml", weeder), ProberConfigFile: filepath.Join(t.TempDir(), "missing.yaml")}).LoadConfig(); err == nil || !strings.Contains(err.Error(), "--prober-config-file=") {
		t.Errorf("a missing prober file: %v", err)
	}
}

func TestProberConfigFileFlagAndVariable(t *testing.T) {
	o, err := ParseFlags([]string{"--config-file=c"}, lookupOf(map[string]string{EnvName("prober-config-file"): "/etc/dwd/dep-config.yaml"}), nil)
	if err != nil || o.ProberConfigFile != "/etc/dwd/dep-config.yaml" || EnvName("prober-config-file") != "DEPWATCH_PROBER_CONFIG_FILE" {
		t.Errorf("from the environment: %q, %v", o.ProberConfigFile, err)
	}
	o, err = ParseFlags([]string{"--config-file=c", "--prober-config-file=/p"}, lookupOf(map[string]string{EnvName("prober-config-file"): "/env"}), nil)
	if err != nil || o.ProberConfigFile != "/p" {
		t.Errorf("the flag must win: %q, %v", o.ProberConfigFile, err)
	}
}

func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// --use-endpoints and the config's useEndpoints meet once, at load: either turns it on, and
// everything after reads the config's value.
func TestUseEndpointsFlagOrConfigTurnsItOn(t *testing.T) {
	svc := "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}\n"
	for _, tc := range []struct {
		flag   bool
		config string
		want   bool
	}{{false, svc, false}, {true, svc, true}, {false, svc + "useEndpoints: true\n", true}, {true, svc + "useEndpoints: false\n", true}} {
		cfg, err := Options{ConfigFile: writeFile(t, "c.yaml", tc.config), UseEndpoints: tc.flag}.LoadConfig()
		if err != nil || cfg.UseEndpoints != tc.want {
			t.Errorf("flag %v, config %q: useEndpoints %v (%v), want %v", tc.flag, tc.config, cfg != nil && cfg.UseEndpoints, err, tc.want)
		}
	}
}

// dwdWeederConfig is dependency-watchdog's weeder ConfigMap data as Gardener ships it, kept
// with package config's tests.
var dwdWeederConfig = func() string {
	b, err := os.ReadFile("config/testdata/gardener-weeder-config.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func TestLoadConfigNamesTheFile(t *testing.T) {
	if _, err := (Options{ConfigFile: ""}).LoadConfig(); err == nil || !strings.Contains(err.Error(), "--config-file: required") {
		t.Errorf("empty path: %v", err)
	}
	if _, err := (Options{ConfigFile: "/nonexistent/depwatch.yaml"}).LoadConfig(); err == nil || !strings.Contains(err.Error(), `--config-file="/nonexistent/depwatch.yaml"`) {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(dwdWeederConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (Options{ConfigFile: p}).LoadConfig(); err != nil {
		t.Errorf("valid file: %v", err)
	}
}

func TestShippedConfigMapsParse(t *testing.T) {
	for _, p := range []string{"../manifests/base/config.yaml", "../manifests/components/gardener/config.yaml", "../manifests/overlays/local/config.yaml"} {
		if _, err := os.Stat(p); err != nil {
			t.Logf("skip %s: %v", p, err)
			continue
		}
		if _, err := (Options{ConfigFile: p}).LoadConfig(); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
