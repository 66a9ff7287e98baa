package monitoring

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "write prometheusrule.yaml from depwatch.rules.yaml")

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rulesFile(t *testing.T) (RulesFile, []byte) {
	t.Helper()
	raw := read(t, filepath.Join(Dir, "depwatch.rules.yaml"))
	var f RulesFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatalf("depwatch.rules.yaml: %v", err)
	}
	return f, raw
}

// The PrometheusRule holds exactly the rules file's groups: written from it, and read back
// equal.
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	f, raw := rulesFile(t)
	want, err := PrometheusRule(raw)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(Dir, "prometheusrule.yaml")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := read(t, path)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not written from depwatch.rules.yaml: run go test ./test/monitoring -run TestPrometheusRule -update", path)
	}
	var pr struct {
		Kind string    `json:"kind"`
		Spec RulesFile `json:"spec"`
	}
	if err := yaml.Unmarshal(got, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.Kind != "PrometheusRule" || !reflect.DeepEqual(pr.Spec, f) {
		t.Errorf("the PrometheusRule's groups differ from depwatch.rules.yaml's")
	}
}

// Every alert follows the mixins' conventions: a severity (critical, warning or info), a
// summary, a description, and a runbook_url whose anchor is a section of docs/operating.md.
func TestEveryAlertHasSeverityAnnotationsAndARunbookSection(t *testing.T) {
	f, _ := rulesFile(t)
	doc := string(read(t, "../../docs/operating.md"))
	const base = "https://github.com/depwatch/depwatch/blob/main/docs/operating.md#"
	n := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			if want := base + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !strings.Contains(doc, "\n### "+r.Alert+"\n") {
				t.Errorf("%s: docs/operating.md has no section \"### %s\" (its runbook)", r.Alert, r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts in depwatch.rules.yaml")
	}
}

// Every alert has a promtool unit test that expects it to fire and one that expects it quiet.
func TestEveryAlertIsUnitTestedFiringAndQuiet(t *testing.T) {
	f, _ := rulesFile(t)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(read(t, "rules_test.yaml"), &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && (!fires[r.Alert] || !quiet[r.Alert]) {
				t.Errorf("%s: rules_test.yaml tests it firing %v, quiet %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
}

// The dashboard is valid Grafana JSON whose every query is one the operators read about: an
// alert's expression (or part of one) or a row of docs/operating.md's dashboard table. The e2e
// test (test/e2e/monitoring_test.go) evaluates each one against a real Prometheus.
func TestDashboardQueriesAreTheDocumentedOnes(t *testing.T) {
	_, rules := rulesFile(t)
	doc := string(read(t, "../../docs/operating.md"))
	d, err := LoadDashboard(filepath.Join(Dir, "depwatch-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("the dashboard needs a uid and a title (uid %q, title %q)", d.UID, d.Title)
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("panel %q: an empty query", p.Title)
				continue
			}
			if !strings.Contains(doc, "| "+p.Title+" | `"+q.Expr+"` |") {
				t.Errorf("panel %q: docs/operating.md's dashboard table lacks the row | %s | `%s` |", p.Title, p.Title, q.Expr)
			}
			if strings.Contains(q.Expr, "$") {
				t.Errorf("panel %q: %s uses a Grafana variable; Prometheus could not evaluate it as it stands", p.Title, q.Expr)
			}
		}
	}
	if queries == 0 {
		t.Fatal("the dashboard has no queries")
	}
	// Each alert's metrics are on the dashboard: what fired can be seen there.
	all := strings.Join(d.Queries(), "\n")
	for _, m := range regexp.MustCompile(`depwatch_[a-z_]+`).FindAllString(string(rules), -1) {
		if !strings.Contains(all, m) {
			t.Errorf("the alerts' metric %s is on no dashboard panel", m)
		}
	}
	var anyJSON map[string]any
	if err := json.Unmarshal(read(t, filepath.Join(Dir, "depwatch-dashboard.json")), &anyJSON); err != nil {
		t.Fatal(err)
	}
	if _, ok := anyJSON["schemaVersion"]; !ok {
		t.Error("the dashboard has no schemaVersion")
	}
}

// The component builds on top of the base (kubectl's kustomize), with every kind it adds.
func TestComponentBuildsOnTheBase(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl on PATH")
	}
	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// kustomize takes only relative paths to other folders; the overlay sits in the tree.
	ov, err := os.MkdirTemp(filepath.Join(root, "test", "monitoring"), "overlay-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ov) })
	doc := "resources: [../../../manifests/base]\ncomponents: [../../../manifests/components/monitoring]\n"
	if err := os.WriteFile(filepath.Join(ov, "kustomization.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", ov, "-o", filepath.Join(dir, "out.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	built := string(read(t, filepath.Join(dir, "out.yaml")))
	for _, want := range []string{"kind: ServiceMonitor", "kind: PrometheusRule", "kind: Service\n", "grafana_dashboard: \"1\"", "kind: Deployment"} {
		if !strings.Contains(built, want) {
			t.Errorf("the base with the component lacks %q", want)
		}
	}
}
