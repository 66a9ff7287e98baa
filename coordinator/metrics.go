package coordinator

import (
	"context"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// Metrics of the coordinator, on their own registry (plus Go and process collectors).
//
//	depwatch_coordinator_triggers_total{kind,reason}           triggers seen (reason: ready, outage, catch-up)
//	depwatch_coordinator_jobs_launched_total{kind,result}      launches (result: created, replaced, kept, stopped, error)
//	depwatch_coordinator_trigger_to_job_created_seconds{kind}  trigger seen → Job created
//	depwatch_coordinator_weeder_edge_to_action_seconds{trigger}  a service's edge seen → its weeder action done (created, kept or stopped)
//	depwatch_coordinator_weeder_edges_overtaken_total{edge}  edges (outage, ready, gone) over before the queue reached them: acted on by the next one
//	depwatch_coordinator_weeder_batched_services_total         services covered by a batch weeder Job (a storm)
//	depwatch_coordinator_weeder_services_waiting               services waiting for a batch weeder Job (forming, or --max-weeder-jobs reached)
//	depwatch_coordinator_kube_api_requests_total{method,code}  requests this process made to the API server (RegisterClientMetrics)
//	depwatch_coordinator_leader                                1 while this replica leads
//	depwatch_coordinator_services_ready{}                      known configured services that are Ready
//	depwatch_coordinator_probe_decisions_total{result}         probes by result, from finished probe pods
//	depwatch_coordinator_probe_scale_operations_total{result}  dependents' scale outcomes, from finished probe pods
//	depwatch_coordinator_probe_namespaces{state}               namespaces probed / paused (Gardener Cluster says no)
//	depwatch_coordinator_probe_jobs_cleaned_up_total           finished probe Jobs removed beyond the history limits
//	depwatch_coordinator_config_valid                          1 while the config file is valid, 0 while it is invalid (the last good config runs)
//	depwatch_coordinator_config_reloads_total{result}          new config file contents read (result: success, failure, restart-required)
//	depwatch_coordinator_config_last_reload_success_timestamp_seconds  when a valid config was last loaded or reloaded
//	depwatch_coordinator_config_restart_required               1 while the file holds a valid change that applies only on restart
//	depwatch_build_info{version,revision,goversion}            always 1
type Metrics struct {
	Registry     *prometheus.Registry
	Triggers     *prometheus.CounterVec
	JobsLaunched *prometheus.CounterVec
	TriggerToJob *prometheus.HistogramVec
	// EdgeToAction and EdgesOvertaken show a slow coordinator before it costs a recovery.
	EdgeToAction   *prometheus.HistogramVec
	EdgesOvertaken *prometheus.CounterVec
	// WeederBatched and WeederWaiting show a storm and whether the cap holds services back.
	WeederBatched prometheus.Counter
	WeederWaiting prometheus.Gauge
	// APIRequests counts the client's requests: what the coordinator costs the API server.
	APIRequests   *prometheus.CounterVec
	Leader        prometheus.Gauge
	ServicesReady prometheus.Gauge

	ProbeDecisions   *prometheus.CounterVec
	ProbeScaleOps    *prometheus.CounterVec
	ProbeNamespaces  *prometheus.GaugeVec
	ProbeJobsCleaned prometheus.Counter
	ProbeLastProbe   *prometheus.GaugeVec
	ProbeShards      *prometheus.GaugeVec

	ConfigValid           prometheus.Gauge
	ConfigReloads         *prometheus.CounterVec
	ConfigLastSuccess     prometheus.Gauge
	ConfigRestartRequired prometheus.Gauge
}

// Results of depwatch_coordinator_config_reloads_total.
const (
	ReloadSuccess         = "success"
	ReloadFailure         = "failure"
	ReloadRestartRequired = "restart-required"
)

// NewMetrics registers the coordinator's metrics on a fresh registry.
func NewMetrics(version string) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Triggers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "triggers_total",
			Help: "Triggers seen: a configured service became Ready (reason=ready), went down (reason=outage) or was found Ready with crash-looping dependents (reason=catch-up).",
		}, []string{"kind", "reason"}),
		JobsLaunched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "jobs_launched_total",
			Help: "Job launches by kind and result (created, replaced, kept: an active Job handles it, stopped, error).",
		}, []string{"kind", "result"}),
		TriggerToJob: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "trigger_to_job_created_seconds",
			Help:    "Time from the coordinator seeing a trigger to the Job's creation being acknowledged by the API server.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}, []string{"kind"}),
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
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "kube_api_requests_total",
			Help: "Requests this coordinator made to the API server (lists, watches, Job creates, Event writes, leader election), by HTTP method and response code (<error> when no response came).",
		}, []string{"method", "code"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "leader",
			Help: "1 while this replica is the active (leading) coordinator.",
		}),
		ServicesReady: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "services_ready",
			Help: "Configured services (across watched namespaces) currently Ready, as last reconciled.",
		}),
		ProbeDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "probe_decisions_total",
			Help: "Probes by result (healthy, scale-down, scale-up, skipped, api-unreachable, error), read from the termination message of each finished probe pod; error also counts a pod that left no summary.",
		}, []string{"result"}),
		ProbeScaleOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "probe_scale_operations_total",
			Help: "Dependents' scale outcomes (scaled-down, scaled-up, annotations-removed, unchanged, ignored, optional-missing, missing, failed, not-started, interrupted; would-scale-* in a dry run), read from finished probe pods.",
		}, []string{"result"}),
		ProbeNamespaces: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "probe_namespaces",
			Help: "Namespaces selected for probing: state=probed (on a schedule) or paused (the Gardener Cluster says the shoot is hibernated, deleted, migrating or has no workers).",
		}, []string{"state"}),
		ProbeLastProbe: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "probe_last_probe_timestamp_seconds",
			Help: "Per probed namespace, when its last probe finished (Unix seconds), as the report of its shard's last finished probe Job says; time() minus this is the age of its last probe, at most one probeJobRunDuration behind while a Job runs.",
		}, []string{"namespace"}),
		ProbeShards: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "probe_shards",
			Help: "Shards of the probed namespaces (one probe Job each at a time): state=total, and state=stuck for those whose probe Job has had no running pod for a minute or more (unschedulable, quota): their namespaces are not probed; the other shards are not affected.",
		}, []string{"state"}),
		ProbeJobsCleaned: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "probe_jobs_cleaned_up_total",
			Help: "Finished probe Jobs deleted because they exceeded the history limits.",
		}),
		ConfigValid: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "config_valid",
			Help: "1 while the config file is valid; 0 while it is invalid or unreadable: the coordinator keeps running with its last good config and /readyz fails until the file is fixed.",
		}),
		ConfigReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "config_reloads_total",
			Help: "New contents of the config file read while running, by result: success (applied, or the same as the running config), failure (invalid: refused), restart-required (valid, but it changes something only a restart applies: not applied).",
		}, []string{"result"}),
		ConfigLastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "config_last_reload_success_timestamp_seconds",
			Help: "Unix time the config file was last loaded (start) or reloaded successfully.",
		}),
		ConfigRestartRequired: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "config_restart_required",
			Help: "1 while the config file holds a valid change that takes effect only when the coordinator restarts (new services, useEndpoints, prober added or removed, ...); the previous config runs meanwhile.",
		}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "depwatch", Name: "build_info",
		Help: "Build information of the running depwatch; always 1.",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(version, revision(), runtime.Version()).Set(1)
	m.Registry.MustRegister(m.Triggers, m.JobsLaunched, m.TriggerToJob, m.EdgeToAction, m.EdgesOvertaken, m.WeederBatched, m.WeederWaiting, m.APIRequests, m.Leader, m.ServicesReady, build,
		m.ProbeDecisions, m.ProbeScaleOps, m.ProbeNamespaces, m.ProbeJobsCleaned, m.ProbeLastProbe, m.ProbeShards,
		m.ConfigValid, m.ConfigReloads, m.ConfigLastSuccess, m.ConfigRestartRequired,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Show the launch series from the start, so rate() works from the first launch.
	for _, r := range []string{"created", "replaced", "kept", "error"} {
		m.JobsLaunched.WithLabelValues("weeder", r)
	}
	m.APIRequests.WithLabelValues("GET", "200") // the first series, so the family is listed before any request
	for _, r := range []string{"ready", "catch-up"} {
		m.Triggers.WithLabelValues("weeder", r)
	}
	for _, r := range []string{ReloadSuccess, ReloadFailure, ReloadRestartRequired} {
		m.ConfigReloads.WithLabelValues(r)
	}
	return m
}

// configLoaded records the config read at start.
// RegisterClientMetrics makes client-go count every request of this process in
// m.APIRequests. client-go takes one registration per process: the first wins.
func RegisterClientMetrics(m *Metrics) {
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: requestCounter{m.APIRequests}})
}

type requestCounter struct{ c *prometheus.CounterVec }

func (r requestCounter) Increment(_ context.Context, code, method, _ string) {
	r.c.WithLabelValues(method, code).Inc()
}

func (m *Metrics) configLoaded(at time.Time) {
	m.ConfigValid.Set(1)
	m.ConfigLastSuccess.Set(float64(at.Unix()))
}

// initProbe shows the probe series from the start (only when a prober is configured).
func (m *Metrics) initProbe() {
	for _, r := range []string{"created", "kept", "error"} {
		m.JobsLaunched.WithLabelValues("probe", r)
	}
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
