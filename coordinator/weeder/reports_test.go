package weeder

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/reaper"
)

// weederRun is a finished weeder run that reported msg.
func weederRun(name string, finished time.Time, msg string) jobs.Report {
	return jobs.Report{Run: "depwatch/weeder-" + name, FinishedAt: finished, Message: msg}
}

func TestTheLeaderExportsEachFinishedWeederRunsSavedBackOffOnce(t *testing.T) {
	h := newHarness(t, testConfig)
	m := h.c.metrics
	run := reaper.TerminationMessage(reaper.Summary{Reaped: 2, BackOffSkipped: 1,
		BackOffSaved: []time.Duration{7 * time.Second, 35 * time.Second},
		ByService:    map[reaper.ServiceRef]reaper.ServiceSaving{{Namespace: "shop", Name: "postgres"}: {Restarts: 2, Saved: 42 * time.Second}}})
	dry := reaper.TerminationMessage(reaper.Summary{DryRun: true, Reaped: 3,
		BackOffSaved: []time.Duration{time.Minute}})

	// Not leading: another replica counts it, and it is not taken.
	if h.c.onReport(weederRun("standby", h.now, run)) {
		t.Error("a report was taken while not leading")
	}
	h.c.lead(h.now)
	for _, r := range []struct {
		jobs.Report
		taken bool
	}{
		{weederRun("before", h.now.Add(-time.Minute), run), false}, // the previous leader's to count
		{weederRun("a", h.now.Add(time.Second), run), true},
		{weederRun("dry", h.now.Add(time.Second), dry), true},
		{weederRun("refused", h.now.Add(time.Second), "depwatch reap: invalid configuration, nothing was done:"), true},
		{weederRun("b", h.now.Add(2*time.Second), run), true},
	} {
		if taken := h.c.onReport(r.Report); taken != r.taken {
			t.Errorf("%s: taken %v, want %v", r.Run, taken, r.taken)
		}
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.BackOffSaved)
	families, err := reg.Gather()
	if err != nil || len(families) != 1 {
		t.Fatalf("gathering the histogram: %v (%d families)", err, len(families))
	}
	hist := families[0].GetMetric()[0].GetHistogram()
	var got []uint64
	for _, b := range hist.GetBucket() {
		got = append(got, b.GetCumulativeCount())
	}
	// Runs a and b, 7 s and 35 s each: ≤1 ≤2 ≤5 ≤10 ≤20 ≤40 ≤80 ≤160 ≤300 (cumulative).
	if want := []uint64{0, 0, 0, 2, 2, 4, 4, 4, 4}; !slices.Equal(got, want) || hist.GetSampleCount() != 4 || hist.GetSampleSum() != 84 {
		t.Errorf("histogram buckets %v, count %d, sum %g; want %v, 4, 84", got, hist.GetSampleCount(), hist.GetSampleSum(), want)
	}
	if n := value(m.BackOffSkipped); n != 2 {
		t.Errorf("backoff_skipped_total = %g, want 2 (runs a and b, one skip each)", n)
	}
	if n, s := value(m.ServiceRestarts.WithLabelValues("shop", "postgres")), value(m.ServiceBackOffSaved.WithLabelValues("shop", "postgres")); n != 4 || s != 84 {
		t.Errorf("shop/postgres: restarts %g, saved %gs; want 4 and 84 (runs a and b)", n, s)
	}
}

// A weeder run whose deletes an admission policy refused says so in its report; the leader
// counts them once per run, so depwatch's own policy refusing depwatch's weeder is seen.
func TestTheLeaderCountsAWeederRunsAdmissionRefusals(t *testing.T) {
	h := newHarness(t, testConfig)
	h.c.lead(h.now)
	refused := reaper.TerminationMessage(reaper.Summary{Errors: 3, AdmissionRefused: 2})
	for _, r := range []jobs.Report{
		weederRun("refused", h.now.Add(time.Second), refused),
		weederRun("clean", h.now.Add(time.Second), reaper.TerminationMessage(reaper.Summary{Reaped: 1})),
	} {
		h.c.onReport(r)
	}
	if n := value(h.c.metrics.AdmissionRefused); n != 2 {
		t.Errorf("weeder_admission_refused_total = %g, want 2", n)
	}
}
