package manifests

import (
	"bytes"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// monitoringDashboard is the one source of depwatch's Grafana dashboard; the chart ships a
// copy, since a chart cannot read files outside its folder.
const (
	monitoringDashboard = "components/monitoring/depwatch-dashboard.json"
	chartDashboard      = chart + "/files/depwatch-dashboard.json"
)

func TestChartShipsTheMonitoringComponentsDashboard(t *testing.T) {
	if !bytes.Equal(readFile(t, chartDashboard), readFile(t, monitoringDashboard)) {
		t.Errorf("manifests/%s differs from manifests/%s, its source: cp manifests/%[2]s manifests/%[1]s", chartDashboard, monitoringDashboard)
	}
}

// dashboard.enabled renders one ConfigMap holding the dashboard file byte for byte, with the
// label Grafana's sidecar looks for; off (the default) renders none.
func TestDashboardConfigMapHoldsTheDashboardFileOnlyWhenEnabled(t *testing.T) {
	helm := helmBinary(t)
	render := func(args ...string) map[string]object {
		t.Helper()
		return parseObjects(t, run(t, helm, append([]string{"template", "dw", chart, "--namespace", "ops"}, args...)...))
	}
	for k := range render() {
		if strings.Contains(k, "dashboard") {
			t.Errorf("dashboard off (the default): %s is rendered", k)
		}
	}

	objs := render("--set", "dashboard.enabled=true", "--set", "dashboard.namespace=grafana",
		"--set", "dashboard.annotations.grafana_folder=Kubernetes")
	cm := objs["ConfigMap grafana/dw-depwatch-dashboard"]
	if cm == nil {
		t.Fatalf("dashboard.enabled=true: no ConfigMap grafana/dw-depwatch-dashboard among %v", keys(objs))
	}
	data, _ := cm["data"].(map[string]any)
	got, _ := data["depwatch-dashboard.json"].(string)
	if want := string(readFile(t, monitoringDashboard)); got != want {
		t.Errorf("the ConfigMap's depwatch-dashboard.json is not manifests/%s (%d bytes; want %d)", monitoringDashboard, len(got), len(want))
	}
	md, _ := cm["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	if labels["grafana_dashboard"] != "1" {
		t.Errorf("the ConfigMap's labels %v have no grafana_dashboard: \"1\" (the sidecar's default)", labels)
	}
	if ann, _ := md["annotations"].(map[string]any); ann["grafana_folder"] != "Kubernetes" {
		t.Errorf("dashboard.annotations not on the ConfigMap: %v", md["annotations"])
	}
}

// chartMetadata is what Chart.yaml says beyond its version.
type chartMetadata struct {
	AppVersion  string            `json:"appVersion"`
	KubeVersion string            `json:"kubeVersion"`
	Annotations map[string]string `json:"annotations"`
}

// The chart claims only the Kubernetes releases the e2e suite has passed on: its kubeVersion's
// lower bound is the oldest minor of the releases docs/development.md records as green
// (make test-k8s; its table under "Other Kubernetes releases"), or hack/k8s/go.mod's, the one
// make test runs on, when that is older.
func TestChartKubeVersionIsTheOldestTheSuitePassedOn(t *testing.T) {
	var meta chartMetadata
	readYAML(t, chart+"/Chart.yaml", &meta)
	m := regexp.MustCompile(`(?m)^require k8s.io/kubernetes v1\.(\d+)\.\d+$`).FindSubmatch(readFile(t, "../hack/k8s/go.mod"))
	if m == nil {
		t.Fatal(`hack/k8s/go.mod has no "require k8s.io/kubernetes v1.Y.Z"`)
	}
	oldest, _ := strconv.Atoi(string(m[1]))
	_, table, _ := strings.Cut(string(readFile(t, "../docs/development.md")), "## Other Kubernetes releases")
	table, _, _ = strings.Cut(table, "\n## ")
	for _, row := range regexp.MustCompile(`(?m)^\| v1\.(\d+)\.\d+ \|.*\| green \|`).FindAllStringSubmatch(table, -1) {
		if minor, _ := strconv.Atoi(row[1]); minor < oldest {
			oldest = minor
		}
	}
	if want := ">=1." + strconv.Itoa(oldest) + ".0-0"; meta.KubeVersion != want {
		t.Errorf("Chart.yaml kubeVersion=%q; the e2e suite has passed on Kubernetes 1.%d and later (hack/k8s/go.mod, docs/development.md): want %q",
			meta.KubeVersion, oldest, want)
	}
}

// Artifact Hub's annotations name what the chart installs: the default image at the
// appVersion for the platforms make image packs, and the repository's licence.
func TestChartArtifactHubAnnotationsNameTheReleasedImage(t *testing.T) {
	var meta chartMetadata
	readYAML(t, chart+"/Chart.yaml", &meta)
	var values struct{ Image struct{ Repository string } }
	readYAML(t, chart+"/values.yaml", &values)
	var images []struct {
		Name      string   `json:"name"`
		Image     string   `json:"image"`
		Platforms []string `json:"platforms"`
	}
	if err := yaml.UnmarshalStrict([]byte(meta.Annotations["artifacthub.io/images"]), &images); err != nil || len(images) != 1 {
		t.Fatalf("Chart.yaml artifacthub.io/images: want one image, got %d (%v)", len(images), err)
	}
	if want := values.Image.Repository + ":" + meta.AppVersion; images[0].Image != want {
		t.Errorf("artifacthub.io/images names %s; the chart runs %s", images[0].Image, want)
	}
	conf := readFile(t, "../hack/image.conf")
	pm := regexp.MustCompile(`(?m)^IMAGE_PLATFORMS="([^"]*)"`).FindSubmatch(conf)
	if pm == nil || strings.Join(images[0].Platforms, " ") != string(pm[1]) {
		t.Errorf("artifacthub.io/images platforms %v; make image packs %q (hack/image.conf)", images[0].Platforms, pm)
	}
	lm := regexp.MustCompile(`(?m)^IMAGE_LICENSES=(\S+)`).FindSubmatch(conf)
	if lm == nil || meta.Annotations["artifacthub.io/license"] != string(lm[1]) {
		t.Errorf("artifacthub.io/license=%q; the image's licences label (hack/image.conf) %q", meta.Annotations["artifacthub.io/license"], lm)
	}
	for _, link := range regexp.MustCompile(`/(?:tree|blob)/([^/\s]+)`).FindAllStringSubmatch(meta.Annotations["artifacthub.io/links"], -1) {
		if link[1] != meta.AppVersion {
			t.Errorf("artifacthub.io/links points at %s; the release is %s", link[1], meta.AppVersion)
		}
	}
	// Artifact Hub reads these two as YAML lists of objects: each must parse, strictly, with
	// the fields it knows and no empty entry.
	var changes []struct {
		Kind        string `json:"kind"`
		Description string `json:"description"`
	}
	if err := yaml.UnmarshalStrict([]byte(meta.Annotations["artifacthub.io/changes"]), &changes); err != nil || len(changes) == 0 {
		t.Errorf("Chart.yaml artifacthub.io/changes: want a YAML list of {kind, description}, got %d entries (%v)", len(changes), err)
	}
	for i, c := range changes {
		if !slices.Contains([]string{"added", "changed", "deprecated", "removed", "fixed", "security"}, c.Kind) || c.Description == "" {
			t.Errorf("Chart.yaml artifacthub.io/changes[%d] = %+v: want a kind Artifact Hub knows and a description", i, c)
		}
	}
	var links []struct {
		Name string `json:"name"`
		URL  string `json:"url"`
	}
	if err := yaml.UnmarshalStrict([]byte(meta.Annotations["artifacthub.io/links"]), &links); err != nil || len(links) == 0 {
		t.Errorf("Chart.yaml artifacthub.io/links: want a YAML list of {name, url}, got %d entries (%v)", len(links), err)
	}
	if _, err := os.Stat("../LICENSE"); err != nil {
		t.Error(err)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// executor in-process (or auto) gives the coordinator the flag and the runs' rights: its
// service account is bound to the weeder's and the probe's roles beside theirs; the default
// (job) binds nothing more.
func TestChartExecutorInProcessBindsTheRunsRolesToTheCoordinator(t *testing.T) {
	helm := helmBinary(t)
	for _, executor := range []string{"job", "in-process", "auto"} {
		objs := parseObjects(t, run(t, helm, "template", "dw", chart, "--namespace", "ops", "--set", "executor="+executor))
		dep, _ := yaml.Marshal(objs["Deployment ops/dw-depwatch-coordinator"])
		if got, want := strings.Contains(string(dep), "--executor="+executor), executor != "job"; got != want {
			t.Errorf("executor=%s: the --executor flag rendered %v, want %v", executor, got, want)
		}
		for _, binding := range []string{"ClusterRoleBinding <nil>/dw-depwatch-weeder", "ClusterRoleBinding <nil>/dw-depwatch-probe"} {
			if objs[binding] == nil {
				t.Fatalf("no %s among %v", binding, slices.Sorted(maps.Keys(objs)))
			}
			subjects, _ := yaml.Marshal(objs[binding]["subjects"])
			if got, want := strings.Contains(string(subjects), "depwatch-coordinator"), executor != "job"; got != want {
				t.Errorf("executor=%s: %s binds the coordinator %v, want %v:\n%s", executor, binding, got, want, subjects)
			}
		}
	}
}
