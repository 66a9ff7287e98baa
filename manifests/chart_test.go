// Package manifests holds no code: its tests keep the Helm chart (charts/depwatch), the
// kustomize base and the VERSION file telling the same story.
package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const chart = "charts/depwatch"

// helmBinary is the helm that `make helm` builds (make unit passes it as DEPWATCH_HELM).
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DEPWATCH_HELM"); p != "" {
		abs, err := filepath.Abs(filepath.Join("..", p))
		if filepath.IsAbs(p) {
			abs = p
		}
		if _, serr := os.Stat(abs); err != nil || serr != nil {
			t.Fatalf("DEPWATCH_HELM=%s: no helm there (make helm builds it)", p)
		}
		return abs
	}
	p, _ := filepath.Abs("../_output/bin/helm")
	if _, err := os.Stat(p); err != nil {
		t.Skip("helm is not built: `make helm` (make unit builds it first)")
	}
	return p
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := runErr(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runErr(name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// object is one rendered Kubernetes object.
type object map[string]any

func (o object) key() string {
	md, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%s %v/%v", o["kind"], md["namespace"], normalize(md["name"]))
}

func parseObjects(t *testing.T, b []byte) map[string]object {
	t.Helper()
	out := map[string]object{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("parsing rendered objects: %v", err)
		}
		if o == nil {
			continue
		}
		out[o.key()] = o
	}
}

// helmOnly are what Helm's conventions add and a kustomize base has no use for: the chart's
// bookkeeping labels and the config checksum that rolls the pods (kustomize rolls them by the
// ConfigMap's hashed name instead).
var helmOnly = map[string]bool{
	"helm.sh/chart":                true,
	"app.kubernetes.io/managed-by": true,
	"app.kubernetes.io/instance":   true,
	"app.kubernetes.io/version":    true,
	"checksum/config":              true,
}

// kustomizeHash is the suffix configMapGenerator adds to a ConfigMap's name.
var kustomizeHash = regexp.MustCompile(`^(depwatch-coordinator-config)-[a-z0-9]{10}$`)

// normalize removes what only one of the two renderings has by design, everywhere in v: the
// helmOnly keys, empty maps left behind, the generated ConfigMap's hash; and it reads the
// config file as YAML (the chart may hold it as text or as a map).
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if helmOnly[k] {
				continue
			}
			if k == "config.yaml" {
				if s, ok := e.(string); ok {
					var parsed any
					if err := yaml.Unmarshal([]byte(s), &parsed); err == nil {
						e = parsed
					}
				}
			}
			e = normalize(e)
			if m, ok := e.(map[string]any); ok && len(m) == 0 && (k == "annotations" || k == "labels") {
				continue
			}
			out[k] = e
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case string:
		if m := kustomizeHash.FindStringSubmatch(x); m != nil {
			return m[1]
		}
		return x
	}
	return v
}

// The chart with its defaults installs what `kubectl apply -k manifests/` installs: the same
// objects, field by field, so the two ways in cannot drift apart. Only the Namespace differs:
// Helm installs into one (helm install --create-namespace), it does not own it.
func TestChartDefaultsRenderTheKustomizeBase(t *testing.T) {
	helm := helmBinary(t)
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("no kubectl on PATH to render manifests/ with (the Makefile adds the one hack/build-k8s.sh builds)")
	}
	kustomized := parseObjects(t, run(t, "kubectl", "kustomize", "."))
	delete(kustomized, "Namespace <nil>/depwatch")
	rendered := parseObjects(t, run(t, helm, "template", "depwatch", chart, "--namespace", "depwatch"))

	all := maps.Clone(kustomized)
	maps.Copy(all, rendered)
	for _, k := range slices.Sorted(maps.Keys(all)) {
		want, inBase := kustomized[k]
		got, inChart := rendered[k]
		switch {
		case !inChart:
			t.Errorf("%s: in manifests/ (kubectl kustomize), not rendered by the chart's defaults", k)
		case !inBase:
			t.Errorf("%s: rendered by the chart's defaults, not in manifests/ (add it to the base, or make it default-off)", k)
		default:
			w, g := normalize(map[string]any(want)), normalize(map[string]any(got))
			if !reflect.DeepEqual(w, g) {
				wy, _ := yaml.Marshal(w)
				gy, _ := yaml.Marshal(g)
				t.Errorf("%s differs.\nmanifests/ (kubectl kustomize):\n%s\nchart (helm template):\n%s", k, wy, gy)
			}
		}
	}
}

// A typo in the values fails the install, naming the key, instead of being ignored.
func TestChartRefusesUnknownValues(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct{ set, want string }{
		{"replica=3", "replica"},
		{"image.tags=v1", "tags"},
		{"podDisruptionBudget.maxUnavaliable=1", "maxUnavaliable"},
		{"image.pullPolicy=Sometimes", "pullPolicy"},
		{"extraArgs[0]=max-weeder-jobs=20", "extraArgs"},
	} {
		_, err := runErr(helm, "template", "depwatch", chart, "--set", tc.set)
		if err == nil {
			t.Errorf("--set %s: rendered; want it refused", tc.set)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %s: the error does not name %q:\n%v", tc.set, tc.want, err)
		}
	}
}

// The chart's switches render what they say: the probe Jobs may read the Secret the config
// names, a ServiceMonitor and a PrometheusRule need their CRDs, a map config is accepted as
// text is.
func TestChartValues(t *testing.T) {
	helm := helmBinary(t)
	render := func(args ...string) map[string]object {
		t.Helper()
		return parseObjects(t, run(t, helm, append([]string{"template", "dw", chart, "--namespace", "ops"}, args...)...))
	}

	objs := render("--set-json", `config={"servicesAndDependantSelectors":{"db":{"podSelectors":[{"matchLabels":{"app":"web"}}]}},"prober":{"kubeConfigSecretName":"my-kubeconfig"}}`)
	role := objs["ClusterRole <nil>/dw-depwatch-probe"]
	if role == nil {
		t.Fatalf("no ClusterRole dw-depwatch-probe among %v", slices.Sorted(maps.Keys(objs)))
	}
	if rules, _ := yaml.Marshal(role["rules"]); !strings.Contains(string(rules), "my-kubeconfig") {
		t.Errorf("the probe role does not grant the config's Secret my-kubeconfig:\n%s", rules)
	}
	cm := objs["ConfigMap ops/dw-depwatch-coordinator-config"]
	data, _ := cm["data"].(map[string]any)
	if s, _ := data["config.yaml"].(string); !strings.Contains(s, "db:") {
		t.Errorf("a map config is not the config file:\n%s", s)
	}
	for _, sa := range []string{"depwatch-coordinator", "depwatch-weeder", "depwatch-probe"} {
		if objs["ServiceAccount ops/"+sa] == nil {
			t.Errorf("no ServiceAccount ops/%s (the coordinator's Jobs run under these names)", sa)
		}
	}

	// dependency-watchdog's two ConfigMaps as they are: the prober's beside the config.
	weeder := `{"watchDuration":"2m","servicesAndDependantSelectors":{"etcd-main-client":{"podSelectors":[{"matchLabels":{"role":"apiserver"}}]}}}`
	objs = render("--set-json", "config="+weeder, "--set", "proberConfig=kubeConfigSecretName: dwd-probe\nprobeInterval: 20s\n")
	dep, _ := yaml.Marshal(objs["Deployment ops/dw-depwatch-coordinator"])
	if !strings.Contains(string(dep), "--prober-config-file=/etc/depwatch/prober-config.yaml") {
		t.Errorf("proberConfig set: the coordinator is not given --prober-config-file:\n%s", dep)
	}
	if rules, _ := yaml.Marshal(objs["ClusterRole <nil>/dw-depwatch-probe"]["rules"]); !strings.Contains(string(rules), "dwd-probe") {
		t.Errorf("the probe role does not grant proberConfig's Secret dwd-probe:\n%s", rules)
	}
	if _, err := runErr(helm, "template", "dw", chart, "--set", "leaderElection.enabled=false"); err == nil || !strings.Contains(err.Error(), "leaderElection.enabled=false") {
		t.Errorf("two replicas without leader election: want it refused, got %v", err)
	}
	if _, err := runErr(helm, "template", "dw", chart, "--set", "leaderElection.enabled=false", "--set", "replicas=1"); err != nil {
		t.Errorf("one replica without leader election: %v", err)
	}
	if _, err := runErr(helm, "template", "dw", chart, "--set", "gardener.enabled=true", "--set", "proberConfig.probeInterval=20s"); err == nil || !strings.Contains(err.Error(), "gardener.enabled=true gives the config a prober section") {
		t.Errorf("proberConfig beside the Gardener config's prober section: want it refused, got %v", err)
	}
	if _, err := runErr(helm, "template", "dw", chart, "--set", "proberConfig.probeInterval=20s", "--set-json", `config={"prober":{"probeInterval":"10s"}}`); err == nil || !strings.Contains(err.Error(), "no prober section") {
		t.Errorf("proberConfig beside a config with a prober section: want it refused, got %v", err)
	}

	if _, err := runErr(helm, "template", "dw", chart, "--set", "service.enabled=true", "--set", "serviceMonitor.enabled=true"); err == nil || !strings.Contains(err.Error(), "monitoring.coreos.com/v1") {
		t.Errorf("a ServiceMonitor without its CRD: want an error naming monitoring.coreos.com/v1, got %v", err)
	}
	objs = render("--set", "service.enabled=true", "--set", "serviceMonitor.enabled=true", "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor")
	if objs["ServiceMonitor ops/dw-depwatch-coordinator"] == nil || objs["Service ops/dw-depwatch-coordinator"] == nil {
		t.Errorf("serviceMonitor.enabled: want a Service and a ServiceMonitor, got %v", slices.Sorted(maps.Keys(objs)))
	}

	if _, err := runErr(helm, "template", "dw", chart, "--set", "prometheusRule.enabled=true"); err == nil || !strings.Contains(err.Error(), "monitoring.coreos.com/v1") {
		t.Errorf("a PrometheusRule without its CRD: want an error naming monitoring.coreos.com/v1, got %v", err)
	}
	objs = render("--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels.release=kps", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule")
	rule := objs["PrometheusRule ops/dw-depwatch"]
	var want map[string]any
	readYAML(t, monitoringRules, &want)
	if rule == nil || !reflect.DeepEqual(rule["spec"], want) {
		t.Errorf("prometheusRule.enabled: want a PrometheusRule ops/dw-depwatch whose spec is %s, got %v", monitoringRules, rule)
	}
	if labels, _ := yaml.Marshal(rule["metadata"]); !strings.Contains(string(labels), "release: kps") {
		t.Errorf("prometheusRule.labels not on the PrometheusRule:\n%s", labels)
	}

	objs = render("--set", "podDisruptionBudget.minAvailable=1", "--set", "priorityClassName=system-cluster-critical")
	pdb, _ := yaml.Marshal(objs["PodDisruptionBudget ops/dw-depwatch-coordinator"]["spec"])
	if !strings.Contains(string(pdb), "minAvailable: 1") || strings.Contains(string(pdb), "maxUnavailable") {
		t.Errorf("minAvailable set: want it instead of maxUnavailable, got\n%s", pdb)
	}
	dep, _ = yaml.Marshal(objs["Deployment ops/dw-depwatch-coordinator"])
	if !strings.Contains(string(dep), "priorityClassName: system-cluster-critical") {
		t.Errorf("priorityClassName not on the pods:\n%s", dep)
	}
}

// monitoringRules is the one source of depwatch's alert rules; the chart ships a copy, since a
// chart cannot read files outside its folder.
const (
	monitoringRules = "components/monitoring/depwatch.rules.yaml"
	chartRules      = chart + "/files/depwatch.rules.yaml"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The chart's PrometheusRule holds the same rules as the monitoring component: its copy of the
// rules file is the file.
func TestChartShipsTheMonitoringComponentsRules(t *testing.T) {
	if !bytes.Equal(readFile(t, chartRules), readFile(t, monitoringRules)) {
		t.Errorf("manifests/%s differs from manifests/%s, its source: cp manifests/%[2]s manifests/%[1]s", chartRules, monitoringRules)
	}
}

// `depwatch version`, the image's tag and the chart's appVersion come from the VERSION file:
// the Makefile builds with it (and hack/image.sh checks the binary says it); the manifests and
// the chart must name the same version and image.
func TestVersionIsOneSource(t *testing.T) {
	version := strings.TrimSpace(string(readFile(t, "../VERSION")))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(version) {
		t.Fatalf("VERSION=%q: want vMAJOR.MINOR.PATCH", version)
	}

	var chartMeta struct{ Version, AppVersion string }
	readYAML(t, chart+"/Chart.yaml", &chartMeta)
	if chartMeta.AppVersion != version {
		t.Errorf("%s/Chart.yaml appVersion=%q; VERSION says %q", chart, chartMeta.AppVersion, version)
	}
	if chartMeta.Version != strings.TrimPrefix(version, "v") {
		t.Errorf("%s/Chart.yaml version=%q; VERSION says %q", chart, chartMeta.Version, version)
	}

	var values struct {
		Image struct{ Repository, Tag string }
	}
	readYAML(t, chart+"/values.yaml", &values)
	var kust struct {
		Images []struct{ Name, NewName, NewTag string } `json:"images"`
	}
	readYAML(t, "base/kustomization.yaml", &kust)
	if len(kust.Images) != 1 {
		t.Fatalf("base/kustomization.yaml: want one image, got %+v", kust.Images)
	}
	img := kust.Images[0]
	if img.NewTag != version || img.NewName != values.Image.Repository {
		t.Errorf("base/kustomization.yaml names %s:%s; the chart %s:<appVersion %s>, VERSION %s", img.NewName, img.NewTag, values.Image.Repository, chartMeta.AppVersion, version)
	}
	if values.Image.Tag != "" {
		t.Errorf("%s/values.yaml image.tag=%q: leave it empty so the appVersion is the tag", chart, values.Image.Tag)
	}

	mk := readFile(t, "../Makefile")
	if want := "IMAGE_REPO ?= " + values.Image.Repository + "\n"; !bytes.Contains(mk, []byte(want)) {
		t.Errorf("the Makefile has no %q: make image would tag another image than the manifests name", strings.TrimSpace(want))
	}
	if !bytes.Contains(mk, []byte("VERSION ?= $(shell cat VERSION)\n")) {
		t.Errorf("the Makefile does not take VERSION from the VERSION file")
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	if err := yaml.Unmarshal(readFile(t, path), into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
