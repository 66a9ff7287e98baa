//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// TestBenchProbe is a measurement, not a timed test. It runs only when DEPWATCH_BENCH_PROBE is
// the number of probe Jobs to time:
//
//	DEPWATCH_BENCH_PROBE=20 KUBECONFIG=$PWD/_output/cluster/kubeconfig \
//	  go test -tags e2e -count=1 -run '^TestBenchProbe$' -v ./test/e2e
//
// It creates probe Jobs exactly as the coordinator builds them (jobs.Probe + jobs.Build with
// the local overlay's prober config and jobTemplate), one after the other, for a namespace
// whose leases are healthy and whose dependents are up (a probe that scales nothing), and
// times each from create to Complete. Then one long-lived Job (probeJobRunDuration) is timed.
// From the figures it computes the Job and pod churn per hour for 100 and 1,000 namespaces
// under both Job-lifetime settings, and writes a Markdown table to stdout and
// _output/bench-probe.md.
func TestBenchProbe(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DEPWATCH_BENCH_PROBE"))
	if n <= 0 {
		t.Skip("set DEPWATCH_BENCH_PROBE=<probe Jobs to time>")
	}
	cfg, err := coordinator.Options{ConfigFile: filepath.Join(repoRoot, "manifests", "overlays", "local", "config.yaml")}.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Prober
	tpl := cfg.JobTemplate
	tpl.Namespace = depwatchNS
	s := newProbeScenario(t, "bench-probe", probeSetup{}) // not started: the coordinator leaves it alone

	spec := func(run time.Duration) jobs.Spec {
		ps := p.ProbeSpec(s.ns, time.Now())
		ps.RunDuration, ps.DryRun, ps.Jitter = run, false, 0
		sp, err := jobs.Probe(ps)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	run := func(sp jobs.Spec) (time.Duration, string) {
		job, err := jobs.Build(tpl, sp)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := kube.BatchV1().Jobs(depwatchNS).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var took time.Duration
		waitFor(t, sp.RunDuration+3*time.Minute, "probe Job "+job.Name+" to complete", func() (bool, error) {
			j, err := kube.BatchV1().Jobs(depwatchNS).Get(context.Background(), job.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if jobDone(j) {
				took = time.Since(start)
				if !conditionTrue(j, batchv1.JobComplete) {
					return false, fmt.Errorf("job %s failed", job.Name)
				}
				return true, nil
			}
			return false, nil
		})
		msg := terminationMessage(t, depwatchNS, job.Name)
		_ = kube.BatchV1().Jobs(depwatchNS).Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		return took, msg
	}

	var single []time.Duration
	for i := range n {
		d, msg := run(spec(0))
		if rep, err := probe.DecodeReport(msg); err != nil || len(rep.Namespaces) != 1 || firstEntry(rep).Last != probe.ResultHealthy {
			t.Fatalf("probe %d did not find a healthy control plane: %s", i, msg)
		}
		single = append(single, d)
	}
	const longRun = time.Minute
	longTook, longMsg := run(spec(longRun))
	longRep, _ := probe.DecodeReport(longMsg)
	probes := 0
	for _, n := range longRep.Results {
		probes += n
	}

	med, worst := median(single), slices.Max(single)
	var b strings.Builder
	fmt.Fprintf(&b, "Probe Jobs on the local cluster (create → Complete, no scaling), %d Jobs one after the other:\n\n", n)
	fmt.Fprintf(&b, "| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| one-probe Job, create → Complete, median | %s |\n| one-probe Job, create → Complete, max | %s |\n", fmtSeconds(med), fmtSeconds(worst))
	fmt.Fprintf(&b, "| long-lived Job (RUN_DURATION %s, SCHEDULE @every %s): create → Complete | %s, %d probes |\n\n", longRun, p.Interval(), fmtSeconds(longTook), probes)

	// Churn, computed: one-probe Jobs start every max(interval, create→Complete) per namespace
	// (never two at once); a long-lived Job lasts runDuration + its start-up and end.
	overhead := max(longTook-longRun, 0)
	fmt.Fprintf(&b, "Churn per hour (probeInterval 10 s, the default; each Job has one pod when nothing fails):\n\n")
	fmt.Fprintf(&b, "| namespaces | probeJobRunDuration | Jobs (= pods) per hour | probe pods running at any time |\n|---|---|---|---|\n")
	interval := 10 * time.Second
	for _, ns := range []int{100, 1000} {
		period := max(interval, med)
		perHour := float64(ns) * float64(time.Hour) / float64(period)
		fmt.Fprintf(&b, "| %d | 0 (one probe per Job) | %.0f | %.0f |\n", ns, perHour, float64(ns)*med.Seconds()/period.Seconds())
		for _, r := range []time.Duration{10 * time.Minute, time.Hour} {
			life := r + overhead
			fmt.Fprintf(&b, "| %d | %s | %.0f | %d |\n", ns, r, float64(ns)*float64(time.Hour)/float64(life), ns)
		}
	}
	fmt.Fprintf(&b, "\n(long-lived Job overhead measured: %s above RUN_DURATION)\n", fmtSeconds(overhead))
	fmt.Println(b.String())
	out := filepath.Join(repoRoot, "_output", "bench-probe.md")
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err == nil {
		t.Logf("table written to %s", out)
	}
}

func conditionTrue(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == "True" {
			return true
		}
	}
	return false
}

// firstEntry is a one-namespace report's entry.
func firstEntry(r probe.Report) probe.NamespaceResult {
	for _, e := range r.Namespaces {
		return e
	}
	return probe.NamespaceResult{}
}
