package weeder

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/jobs"
)

// Metrics are the weeder's series, plus the Job series it shares with the prober.
type Metrics struct {
	*ctrl.JobMetrics
	// EdgeToAction and EdgesOvertaken show a slow coordinator before it costs a recovery.
	EdgeToAction   *prometheus.HistogramVec
	EdgesOvertaken *prometheus.CounterVec
	// WeederBatched and WeederWaiting show a storm and whether the cap holds services back.
	WeederBatched prometheus.Counter
	WeederWaiting prometheus.Gauge
	ServicesReady prometheus.Gauge
	// ServicesExcluded: followed services the config's namespaces section leaves out, which
	// would otherwise be dropped without a word.
	ServicesExcluded prometheus.Gauge
	// BackOffSaved and BackOffSkipped: what the weeder's restarts are worth, from the
	// finished runs' reports.
	BackOffSaved   *savedBackOff
	BackOffSkipped prometheus.Counter
	// AdmissionRefused: a weeder's delete refused by an admission policy, a bug to see at once.
	AdmissionRefused prometheus.Counter
	// ServiceRestarts and ServiceBackOffSaved: the same per service, for the services whose
	// dependents were restarted (a series appears with a service's first restart).
	ServiceRestarts     *prometheus.CounterVec
	ServiceBackOffSaved *prometheus.CounterVec
}

// NewMetrics makes the weeder's series (not registered: see Collectors).
func NewMetrics(jm *ctrl.JobMetrics) *Metrics {
	return &Metrics{
		JobMetrics: jm,
		EdgeToAction: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "weeder_edge_to_action_seconds",
			Help:    "Time from the coordinator seeing a service's edge (outage, ready, catch-up) to its weeder action being done: a Job created, an active one kept, or stopped. A slow queue shows here first.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300},
		}, []string{"trigger"}),
		EdgesOvertaken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "weeder_edges_overtaken_total",
			Help: "Edges of a service (outage, ready, gone) that were over before the coordinator's queue reached them; the later edge was acted on instead (an outage that ended while queued gets a weeder for its return).",
		}, []string{"edge"}),
		WeederBatched: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "weeder_batched_services_total",
			Help: "Services covered by a batch weeder Job: many needed a weeder at once (beyond --weeder-batch-after within --weeder-batch-window), so one Job covers several.",
		}),
		WeederWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "weeder_services_waiting",
			Help: "Services waiting for a batch weeder Job: a batch being formed (--weeder-batch-linger), or --max-weeder-jobs reached. Staying above 0 means the cap holds recoveries back.",
		}),
		ServicesReady: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "services_ready",
			Help: "Configured services (across watched namespaces) currently Ready, as last reconciled.",
		}),
		ServicesExcluded: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "weeder_services_excluded",
			Help: "Services with dependents (the config names them, or a workload's depwatch.io/depends-on annotation does) in namespaces the config's namespaces section leaves out: their outages are not weeded. The coordinator's log names each one.",
		}),
		BackOffSaved: newSavedBackOff(),
		BackOffSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "weeder_backoff_skipped_total",
			Help: "Crash-looping dependents the weeder left to the kubelet, whose own restart was due sooner than the backOffFloor (a fresh pod would not be Ready sooner), read from each finished weeder run's report.",
		}),
		AdmissionRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "weeder_admission_refused_total",
			Help: "Deletes of crash-looping dependents that an admission policy refused (depwatch's own weeder-deletes policy, or a cluster's), read from each finished weeder run's report; each also left a ReapRefused Warning Event on its pod. Above 0 is a bug to look at: the policy and the weeder disagree on what may be restarted.",
		}),
		ServiceRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "weeder_service_restarts_total",
			Help: "Dependents the weeder restarted (deleted or evicted) at their service's return, per service (namespace and name of the Service), read from each finished weeder run's report.",
		}, []string{"namespace", "service"}),
		ServiceBackOffSaved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "weeder_service_backoff_saved_seconds_total",
			Help: "Crash-loop back-off that the weeder's restarts saved, per service (namespace and name of the Service): the time saved for that service's dependents, read from each finished weeder run's report.",
		}, []string{"namespace", "service"}),
	}
}

// Collectors are the weeder's own series (the shared Job series are registered once, by the
// coordinator).
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.EdgeToAction, m.EdgesOvertaken, m.WeederBatched, m.WeederWaiting, m.ServicesReady, m.ServicesExcluded, m.BackOffSaved, m.BackOffSkipped, m.AdmissionRefused, m.ServiceRestarts, m.ServiceBackOffSaved}
}

// Init shows the weeder's launch and trigger series from the start, so rate() works from the
// first launch.
func (m *Metrics) Init() {
	for _, r := range []string{"created", "replaced", "kept", "error"} {
		m.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), r)
	}
	m.JobsFailed.WithLabelValues(string(jobs.KindWeeder))
	for _, r := range []string{"ready", "catch-up"} {
		m.Triggers.WithLabelValues(string(jobs.KindWeeder), r)
	}
}
