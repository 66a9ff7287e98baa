package coordinator

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/tools/leaderelection"
)

// healthHandler serves /healthz (the leader election's watchdog, when electing) and /readyz.
func (c *Coordinator) healthHandler(watchdog *leaderelection.HealthzAdaptor) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if watchdog != nil {
			if err := watchdog.Check(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", c.readyz)
	return mux
}

// metricsHandler serves /metrics.
func (c *Coordinator) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(c.Metrics.Registry, promhttp.HandlerOpts{}))
	return mux
}

// readyz answers /readyz: ready once the caches have synced, unless the config file has
// become invalid (the coordinator still works, with the config it started with).
func (c *Coordinator) readyz(w http.ResponseWriter, _ *http.Request) {
	if !c.Ready() {
		http.Error(w, "informer caches not synced yet", http.StatusServiceUnavailable)
		return
	}
	if problem, since := c.ConfigProblem(); problem != "" {
		http.Error(w, fmt.Sprintf("config file %s is invalid (since %s); running with the config it started with until it is fixed:\n%s",
			c.Options.ConfigFile, since.UTC().Format(time.RFC3339), problem), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
	// Shards whose probe Job cannot start: the coordinator itself is fine (ready), but a
	// person looking here should see that some control planes are not probed.
	if c.prober != nil {
		for _, line := range c.prober.StuckShards() {
			fmt.Fprintln(w, line)
		}
	}
}
