package coordinator

import (
	"github.com/depwatch/depwatch/jobs"
	"os"
	"regexp"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestEveryMetricIsDocumented keeps docs/coordinator.md's metric table and the registry in
// step: a metric added without a row, or a row left behind, fails here.
func TestEveryMetricIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/coordinator.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(depwatch_[a-z_]+)` \\|").FindAllSubmatch(doc, -1) {
		documented[string(m[1])] = true
	}
	m := NewMetrics("test")
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
	registered := map[string]bool{}
	for _, f := range families {
		if name := f.GetName(); regexp.MustCompile(`^depwatch_`).MatchString(name) {
			registered[name] = true
		}
	}
	var missing, stale []string
	for name := range registered {
		if !documented[name] {
			missing = append(missing, name)
		}
	}
	for name := range documented {
		if !registered[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Errorf("docs/coordinator.md's metric table: missing %v, documented but not registered %v", missing, stale)
	}
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
