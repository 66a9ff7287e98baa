package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/depwatch/depwatch/jobs"

	"github.com/prometheus/client_golang/prometheus"
)

// TestEveryMetricIsDocumented keeps docs/coordinator.md's metric table and the registry in
// step: a metric added without a row, or a row left behind, fails here.
func TestEveryMetricIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/coordinator.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(depwatch_[a-z_]+)` \\|").FindAllSubmatch(doc, -1) {
		documented[string(m[1])] = true
	}
	registered := registeredMetrics(t)
	var missing, stale []string
	for name := range registered {
		if !documented[name] {
			missing = append(missing, name)
		}
	}
	for name := range documented {
		if _, ok := registered[name]; !ok {
			stale = append(stale, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Errorf("docs/coordinator.md's metric table: missing %v, documented but not registered %v", missing, stale)
	}
}

// registeredMetrics are the depwatch_ metric families the coordinator registers, each with
// its label names.
func registeredMetrics(t *testing.T) map[string]map[string]bool {
	t.Helper()
	m := New("test")
	// Vectors appear in Gather only once a child exists: give each one.
	for _, v := range []*prometheus.CounterVec{m.Triggers, m.JobsLaunched, m.Prober.ProbeDecisions, m.Prober.ProbeScaleOps, m.Weeder.EdgesOvertaken, m.JobsFailed, m.Weeder.ServiceRestarts, m.Weeder.ServiceBackOffSaved} {
		v.WithLabelValues(make([]string, labelCount(t, v))...).Inc()
	}
	m.TriggerToJob.WithLabelValues("x").Observe(1)
	m.Weeder.EdgeToAction.WithLabelValues("x").Observe(1)
	m.Prober.ProbeNamespaces.WithLabelValues("x").Set(1)
	m.Prober.ProbeLastProbe.WithLabelValues("x").Set(1)
	m.Prober.ProbeShards.WithLabelValues("x").Set(1)
	m.Prober.ProbeMeltdown.WithLabelValues("x").Set(1)
	m.SetExecutor(jobs.ExecutorJob)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]map[string]bool{}
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "depwatch_") {
			continue
		}
		labels := map[string]bool{}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		registered[name] = labels
	}
	return registered
}

// labelCount finds how many labels a vector takes by trying.
func labelCount(t *testing.T, v *prometheus.CounterVec) int {
	for n := 0; n < 5; n++ {
		if _, err := v.GetMetricWithLabelValues(make([]string, n)...); err == nil {
			return n
		}
	}
	t.Fatal("a counter vector with more than 4 labels")
	return 0
}

// Every metric the documents, the examples and the shipped alert rules and dashboard name is
// one the coordinator registers (a histogram's _bucket, _sum and _count series included), and
// every label a PromQL selector or a label list gives it (`{namespace="shop", service}`) is one
// of its labels: a metric or label renamed in the code or in a document fails here.
func TestDocsNameOnlyRegisteredMetricsAndLabels(t *testing.T) {
	registered := registeredMetrics(t)
	family := func(name string) (string, bool) {
		if _, ok := registered[name]; ok {
			return name, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base := strings.TrimSuffix(name, suffix); base != name {
				if _, ok := registered[base]; ok {
					return base, true
				}
			}
		}
		return "", false
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	examples, _ := filepath.Glob("../../examples/*.yaml")
	docs = append(docs, examples...)
	docs = append(docs, "../../README.md", "../../CONTRIBUTING.md", "../../SECURITY.md", "../../manifests/charts/depwatch/README.md",
		"../../manifests/components/monitoring/depwatch.rules.yaml", "../../manifests/components/monitoring/prometheusrule.yaml",
		"../../manifests/components/monitoring/depwatch-dashboard.json",
		"../../manifests/charts/depwatch/files/depwatch.rules.yaml", "../../manifests/charts/depwatch/files/depwatch-dashboard.json")
	// A name, a regular expression's alternatives after it (depwatch_(a|b)), then the label
	// selector or list in braces, if any.
	name := regexp.MustCompile(`depwatch_(?:\(([a-z0-9_|]+)\)|([a-z0-9_]*[a-z0-9]))(\{[^}]*\})?`)
	checked, labels := 0, 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllStringSubmatch(string(data), -1) {
			var names []string
			if m[1] != "" {
				for _, alt := range strings.Split(m[1], "|") {
					names = append(names, "depwatch_"+alt)
				}
			} else {
				names = []string{"depwatch_" + m[2]}
			}
			for _, n := range names {
				checked++
				base, ok := family(n)
				if !ok {
					t.Errorf("%s names the metric %s, which the coordinator does not register", doc, n)
					continue
				}
				if m[3] == "" {
					continue
				}
				sel := strings.Trim(m[3], "{}")
				// Label values are quoted: drop them, keep the names.
				// (In JSON, the dashboard's, they are escaped: \"value\".)
				sel = strings.ReplaceAll(sel, `\"`, `"`)
				sel = regexp.MustCompile(`"[^"]*"`).ReplaceAllString(sel, "")
				for _, part := range strings.Split(sel, ",") {
					l := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(part), "=~!"))
					if l == "" || l == "..." || l == "…" {
						continue
					}
					if !regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`).MatchString(l) {
						continue // not a label: a template or an expression
					}
					labels++
					if l == "le" && strings.HasSuffix(n, "_bucket") {
						continue
					}
					if l == "job" || l == "instance" || l == "__name__" {
						continue // Prometheus's own target labels
					}
					if !registered[base][l] {
						t.Errorf("%s selects %s by the label %q, which it does not have (its labels: %v)", doc, n, l, sortedKeys(registered[base]))
					}
				}
			}
		}
	}
	t.Logf("%d metric names, %d labels checked", checked, labels)
	if checked < 30 || labels < 5 {
		t.Fatalf("only %d metric names and %d labels found in the documents: is the test still reading them?", checked, labels)
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
