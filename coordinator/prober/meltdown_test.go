package prober

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

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
	pod := func(name, last string, dryRun bool) *corev1.Pod {
		return finishedProbePod(name, probe.Report{End: finished, DryRun: dryRun, Results: map[string]int{last: 1},
			Namespaces: map[string]probe.NamespaceResult{ns: {Last: probe.Result(last)}}})
	}
	active := func() int {
		r := prometheus.NewRegistry()
		r.MustRegister(p.metrics.ProbeMeltdown)
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
		p.onPod(pod(step.pod, step.last, step.dryRun))
		if got := active(); got != step.want {
			t.Errorf("after %s (dry run %v): %d meltdown series, want %d", step.last, step.dryRun, got, step.want)
		}
	}
}
