package coordinator

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics of the coordinator, on their own registry (plus Go and process collectors).
//
//	depwatch_coordinator_triggers_total{kind,reason}           triggers seen (reason: ready, catch-up)
//	depwatch_coordinator_jobs_launched_total{kind,result}      launches (result: created, replaced, kept, error)
//	depwatch_coordinator_trigger_to_job_created_seconds{kind}  trigger seen → Job created
//	depwatch_coordinator_leader                                1 while this replica leads
//	depwatch_coordinator_services_ready{}                      known configured services that are Ready
//	depwatch_build_info{version,revision,goversion}            always 1
type Metrics struct {
	Registry      *prometheus.Registry
	Triggers      *prometheus.CounterVec
	JobsLaunched  *prometheus.CounterVec
	TriggerToJob  *prometheus.HistogramVec
	Leader        prometheus.Gauge
	ServicesReady prometheus.Gauge
}

// NewMetrics registers the coordinator's metrics on a fresh registry.
func NewMetrics(version string) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Triggers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "triggers_total",
			Help: "Triggers seen: a configured service became Ready (reason=ready) or was found Ready with crash-looping dependents (reason=catch-up).",
		}, []string{"kind", "reason"}),
		JobsLaunched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "jobs_launched_total",
			Help: "Job launches by kind and result (created, replaced, kept, error).",
		}, []string{"kind", "result"}),
		TriggerToJob: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "trigger_to_job_created_seconds",
			Help:    "Time from the coordinator seeing a trigger to the Job's creation being acknowledged by the API server.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"kind"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "leader",
			Help: "1 while this replica is the active (leading) coordinator.",
		}),
		ServicesReady: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "services_ready",
			Help: "Configured services (across watched namespaces) currently Ready, as last reconciled.",
		}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "depwatch", Name: "build_info",
		Help: "Build information of the running depwatch; always 1.",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(version, revision(), runtime.Version()).Set(1)
	m.Registry.MustRegister(m.Triggers, m.JobsLaunched, m.TriggerToJob, m.Leader, m.ServicesReady, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Show the launch series from the start, so rate() works from the first launch.
	for _, r := range []string{"created", "replaced", "kept", "error"} {
		m.JobsLaunched.WithLabelValues("weeder", r)
	}
	for _, r := range []string{"ready", "catch-up"} {
		m.Triggers.WithLabelValues("weeder", r)
	}
	return m
}

func revision() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
