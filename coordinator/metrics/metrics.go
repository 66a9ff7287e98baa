// Package metrics is the coordinator's Prometheus registry: its own series, the weeder's and
// the prober's, client-go's requests, the build, Go and process collectors.
package metrics

import (
	"context"
	"runtime"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/coordinator/weeder"
	"github.com/depwatch/depwatch/internal/buildinfo"
	"github.com/depwatch/depwatch/jobs"
)

// Metrics of the coordinator, on their own registry (plus Go and process collectors).
// docs/coordinator.md's metric table names every series; metrics_doc_test.go keeps the two equal.
type Metrics struct {
	Registry *prometheus.Registry
	// JobMetrics are the series both controllers report under their Job kind.
	*ctrl.JobMetrics
	Weeder *weeder.Metrics
	Prober *prober.Metrics
	// APIRequests counts the client's requests: what the coordinator costs the API server.
	APIRequests *prometheus.CounterVec
	Leader      prometheus.Gauge
	// Executor is 1 for the kind of executor the runs go to (SetExecutor), 0 for the other.
	Executor *prometheus.GaugeVec

	ConfigValid prometheus.Gauge
}

// New registers the coordinator's metrics on a fresh registry.
func New(version string) *Metrics {
	jm := ctrl.NewJobMetrics()
	m := &Metrics{
		Registry:   prometheus.NewRegistry(),
		JobMetrics: jm,
		Weeder:     weeder.NewMetrics(jm),
		Prober:     prober.NewMetrics(jm),
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "kube_api_requests_total",
			Help: "Requests this coordinator made to the API server (lists, watches, Job creates, Event writes, leader election), by HTTP method and response code (<error> when no response came).",
		}, []string{"method", "code"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "leader",
			Help: "1 while this replica is the active (leading) coordinator.",
		}),
		Executor: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "executor",
			Help: "1 for what carries the weeder and probe runs out, decided at start: job (a Job each) or in-process (the same engines in this process, where the cluster grants no Jobs); 0 for the other.",
		}, []string{"kind"}),
		ConfigValid: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "depwatch", Subsystem: "coordinator", Name: "config_valid",
			Help: "1 while the config file is valid; 0 while it is invalid or unreadable: the coordinator keeps running with the config it started with and /readyz fails until the file is fixed.",
		}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "depwatch", Name: "build_info",
		Help: "Build information of the running depwatch; always 1.",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(version, buildinfo.Revision(), runtime.Version()).Set(1)
	m.Registry.MustRegister(slices.Concat(jm.Collectors(), m.Weeder.Collectors(), m.Prober.Collectors())...)
	m.Registry.MustRegister(m.APIRequests, m.Leader, m.Executor, build, m.ConfigValid,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Weeder.Init()
	m.APIRequests.WithLabelValues("GET", "200") // the first series, so the family is listed before any request
	return m
}

// SetExecutor says which executor carries the runs out.
func (m *Metrics) SetExecutor(kind jobs.ExecutorKind) {
	for _, k := range []jobs.ExecutorKind{jobs.ExecutorJob, jobs.ExecutorInProcess} {
		m.Executor.WithLabelValues(string(k)).Set(0)
	}
	m.Executor.WithLabelValues(string(kind)).Set(1)
}

// RegisterClient makes client-go count every request of this process in
// m.APIRequests. client-go takes one registration per process: the first wins.
func RegisterClient(m *Metrics) {
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: requestCounter{m.APIRequests}})
}

type requestCounter struct{ c *prometheus.CounterVec }

func (r requestCounter) Increment(_ context.Context, code, method, _ string) {
	r.c.WithLabelValues(method, code).Inc()
}
