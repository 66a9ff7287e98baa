package prober

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// The meltdown series of a namespace follows its last decision, as its shard's reports tell
// it: set by a scale-down, kept through probes without a decision, gone after a scale-up or a
// healthy probe; a dry run's scale-down sets nothing.
func TestMeltdownSeriesFollowsTheNamespacesLastDecision(t *testing.T) {
	h := newProbeHarness(t)
	p := h.c
	p.leading.Store(true)
	ns := "shoot--p--a"
	p.mu.Lock()
	p.next[ns] = h.now
	p.mu.Unlock()
	finished := time.Now().Add(time.Hour).Truncate(time.Second)
	pod := func(name, last string, dryRun bool) jobs.Report {
		return finishedProbeRun(name, probe.Report{End: finished, DryRun: dryRun, Results: map[string]int{last: 1},
			Namespaces: map[string]probe.NamespaceResult{ns: {Last: probe.Result(last)}}})
	}
	active := func() int { return seriesCount(t, p.metrics.ProbeMeltdown) }
	for _, step := range []struct {
		pod, last string
		dryRun    bool
		want      int
	}{
		{"a", "scale-down", true, 0},
		{"b", "scale-down", false, 1},
		{"c", "api-unreachable", false, 1},
		{"d", "scale-up", false, 0},
		{"e", "scale-down", false, 1},
		{"f", "healthy", false, 0},
	} {
		p.onReport(pod(step.pod, step.last, step.dryRun))
		if got := active(); got != step.want {
			t.Errorf("after %s (dry run %v): %d meltdown series, want %d", step.last, step.dryRun, got, step.want)
		}
	}
}

// A replica that starts (a changed config restarts the coordinator) reads the reports of
// probe pods that ended before it: they give each namespace its last-probe series, also when
// the namespace is only found probe-able afterwards, so DepwatchProbeLastProbeTooOld can fire
// if every probe fails from then on; their decisions and totals are not counted again.
func TestReportsOfPodsThatEndedBeforeTheStartGiveTheLastProbeOnly(t *testing.T) {
	h := newProbeHarness(t)
	p := h.c
	p.leading.Store(true)
	ns := "shoot--p--a"
	before := p.started.Add(-time.Minute).Truncate(time.Second)
	p.onReport(finishedProbeRun("old", probe.Report{End: before, Results: map[string]int{"scale-down": 1},
		Namespaces: map[string]probe.NamespaceResult{ns: {Last: probe.ResultScaleDown, Ago: 5 * time.Second}}}))
	if n := seriesCount(t, p.metrics.ProbeLastProbe); n != 0 {
		t.Fatalf("%d last-probe series before the namespace is probed, want none", n)
	}
	p.startProbing(ns, h.now, "test", p.log)
	m := &dto.Metric{}
	if err := p.metrics.ProbeLastProbe.WithLabelValues(ns).Write(m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetGauge().GetValue(); got != float64(before.Add(-5*time.Second).Unix()) {
		t.Errorf("last probe %v, want the old report's %v", got, before.Add(-5*time.Second).Unix())
	}
	if n := seriesCount(t, p.metrics.ProbeMeltdown); n != 0 {
		t.Errorf("%d meltdown series from a report another replica counted, want none", n)
	}
	d := &dto.Metric{}
	if err := p.metrics.ProbeDecisions.WithLabelValues("scale-down").Write(d); err != nil || d.GetCounter().GetValue() != 0 {
		t.Errorf("scale-down decisions %v (%v) from a report another replica counted, want 0", d.GetCounter().GetValue(), err)
	}
}

// seriesCount is how many series the collector has now.
func seriesCount(t *testing.T, c prometheus.Collector) int {
	t.Helper()
	r := prometheus.NewRegistry()
	r.MustRegister(c)
	fams, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fams {
		n += len(f.GetMetric())
	}
	return n
}
