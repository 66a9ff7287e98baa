package ctrl

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// A Job counts as failed once, when its Failed condition appears: not again on a resync
// (old and new both failed), not when it completes, not for something that is not a Job.
func TestFailedJobCountsOnceWhenItsConditionAppears(t *testing.T) {
	running := &batchv1.Job{}
	failed := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}}}
	complete := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	for _, tt := range []struct {
		name     string
		old, cur any
		want     float64
	}{
		{"running → failed", running, failed, 1},
		{"failed → failed (resync)", failed, failed, 0},
		{"running → complete", running, complete, 0},
		{"not a Job", "x", failed, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := NewJobMetrics()
			m.CountFailed("probe", tt.old, tt.cur)
			if got := counterValue(t, m.JobsFailed); got != tt.want {
				t.Errorf("jobs_failed_total = %v, want %v", got, tt.want)
			}
		})
	}
}

// counterValue is the sum of a counter vector's series.
func counterValue(t *testing.T, v *prometheus.CounterVec) float64 {
	t.Helper()
	r := prometheus.NewRegistry()
	r.MustRegister(v)
	fams, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
