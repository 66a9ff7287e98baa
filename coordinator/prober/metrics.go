package prober

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/depwatch/depwatch/coordinator/ctrl"
)

// Metrics are the prober's series, plus the Job series it shares with the weeder.
type Metrics struct {
	*ctrl.JobMetrics
	ProbeDecisions   *prometheus.CounterVec
	ProbeScaleOps    *prometheus.CounterVec
	ProbeNamespaces  *prometheus.GaugeVec
	ProbeJobsCleaned prometheus.Counter
	ProbeLastProbe   *prometheus.GaugeVec
	ProbeShards      *prometheus.GaugeVec
	// ProbeMeltdown names the shoots whose dependents meltdown protection holds scaled down.
	ProbeMeltdown *prometheus.GaugeVec
	// ProbeStandingAside is 1 while the prober stands aside for dependency-watchdog's.
	ProbeStandingAside prometheus.Gauge
}

// NewMetrics makes the prober's series (not registered: see Collectors).
func NewMetrics(jobs *ctrl.JobMetrics) *Metrics {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "depwatch", Subsystem: "coordinator", Name: name, Help: help}
	}
	return &Metrics{
		JobMetrics: jobs,
		ProbeDecisions: prometheus.NewCounterVec(prometheus.CounterOpts(opts("probe_decisions_total",
			"Probes by result (healthy, scale-down, scale-up, skipped, api-unreachable, error), read from the termination message of each finished probe pod; error also counts a pod that left no summary.")), []string{"result"}),
		ProbeScaleOps: prometheus.NewCounterVec(prometheus.CounterOpts(opts("probe_scale_operations_total",
			"Dependents' scale outcomes (scaled-down, scaled-up, annotations-removed, unchanged, ignored, optional-missing, missing, failed, admission-refused (an admission policy refused the probe's write: a bug to look at, with a ScaleRefused Event on the resource), not-started, interrupted; would-scale-* in a dry run), read from finished probe pods.")), []string{"result"}),
		ProbeNamespaces: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("probe_namespaces",
			"Namespaces selected for probing: state=probed (on a schedule) or paused (the Gardener Cluster says the shoot is hibernated or waking up, being created, deleted or migrated, or has no workers).")), []string{"state"}),
		ProbeLastProbe: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("probe_last_probe_timestamp_seconds",
			"Per probed namespace, when its last probe finished (Unix seconds), as the report of its shard's last finished probe Job says; time() minus this is the age of its last probe, at most one probeJobRunDuration behind while a Job runs.")), []string{"namespace"}),
		ProbeShards: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("probe_shards",
			"Shards of the probed namespaces (one probe Job each at a time): state=total, and state=stuck for those whose probe Job has had no running pod for a minute or more (unschedulable, quota): their namespaces are not probed; the other shards are not affected.")), []string{"state"}),
		ProbeMeltdown: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("probe_meltdown_protection_active",
			"1 per probed namespace whose last probe with a decision scaled its dependents down (too many node leases expired), until a probe scales them up again or the namespace is no longer probed; as its shard's last finished probe Job reports it. A dry run sets nothing.")), []string{"namespace"}),
		ProbeStandingAside: prometheus.NewGauge(prometheus.GaugeOpts(opts("probe_standing_aside",
			"1 while the leading coordinator's prober stands aside because dependency-watchdog's prober holds its Lease (prober.standAsideForDependencyWatchdog), or the Lease cannot be read: no namespace is probed or scaled; 0 otherwise."))),
		ProbeJobsCleaned: prometheus.NewCounter(prometheus.CounterOpts(opts("probe_jobs_cleaned_up_total",
			"Finished probe Jobs deleted because they exceeded the history limits."))),
	}
}

// Collectors are the prober's own series (the shared Job series are registered once, by the
// coordinator).
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ProbeDecisions, m.ProbeScaleOps, m.ProbeNamespaces, m.ProbeJobsCleaned, m.ProbeLastProbe, m.ProbeShards, m.ProbeMeltdown, m.ProbeStandingAside}
}

// initProbe shows the probe series from the start (only when a prober is configured), so
// rate() works from the first probe.
func (m *Metrics) initProbe() {
	for _, r := range []string{"created", "kept", "error"} {
		m.JobsLaunched.WithLabelValues("probe", r)
	}
	m.JobsFailed.WithLabelValues("probe")
	for _, r := range []string{"healthy", "scale-down", "scale-up", "skipped", "api-unreachable", "error"} {
		m.ProbeDecisions.WithLabelValues(r)
	}
	for _, r := range []string{"scaled-down", "scaled-up", "failed"} {
		m.ProbeScaleOps.WithLabelValues(r)
	}
	for _, s := range []string{"probed", "paused"} {
		m.ProbeNamespaces.WithLabelValues(s)
	}
	for _, s := range []string{"total", "stuck"} {
		m.ProbeShards.WithLabelValues(s)
	}
}
