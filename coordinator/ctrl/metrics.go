package ctrl

import (
	"github.com/prometheus/client_golang/prometheus"
)

// JobMetrics are the series both controllers report under their Job kind (weeder, probe).
type JobMetrics struct {
	Triggers     *prometheus.CounterVec
	JobsLaunched *prometheus.CounterVec
	// JobsFailed is what a launch count cannot show: Jobs that were created but then failed.
	JobsFailed   *prometheus.CounterVec
	TriggerToJob *prometheus.HistogramVec
}

// NewJobMetrics makes the shared series (not registered: see Collectors).
func NewJobMetrics() *JobMetrics {
	return &JobMetrics{
		Triggers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "triggers_total",
			Help: "Triggers seen: a configured service became Ready (reason=ready), went down (reason=outage) or was found Ready with crash-looping dependents (reason=catch-up).",
		}, []string{"kind", "reason"}),
		JobsLaunched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "jobs_launched_total",
			Help: "Job launches by kind and result (created, replaced, kept: an active Job handles it, stopped, error).",
		}, []string{"kind", "result"}),
		JobsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "jobs_failed_total",
			Help: "Jobs of this kind that failed (their Failed condition: every retry of the pod failed, or the deadline passed), counted by the leading coordinator when it sees the condition appear.",
		}, []string{"kind"}),
		TriggerToJob: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "trigger_to_job_created_seconds",
			Help:    "Time from the coordinator seeing a trigger to the Job's creation being acknowledged by the API server.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"kind"}),
	}
}

// Collectors are the series to register.
func (m *JobMetrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Triggers, m.JobsLaunched, m.JobsFailed, m.TriggerToJob}
}
