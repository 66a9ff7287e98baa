package coordinator

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"

	"github.com/depwatch/depwatch/coordinator/rights"
)

// ErrLostLeadership ends Run when another replica took the Lease over: the process exits
// non-zero and is restarted as a standby (the usual controller pattern: no half-state).
var ErrLostLeadership = errors.New("lost leadership")

// Run runs the coordinator until ctx ends or its config file holds a valid change (nil), or
// until it fails: metrics and health endpoints, Events, informers, then leader election (or
// straight to work). Every goroutine it starts has ended when it returns.
func Run(ctx context.Context, d Deps) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d.Recorder == nil {
		// Through EventClient (else Client). Not tied to ctx: the Lease's release is recorded
		// after ctx ends; Shutdown (deferred, after everything else has stopped) ends it.
		b := record.NewBroadcaster()
		defer b.Shutdown()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cmp.Or(d.EventClient, d.Client).CoreV1().Events("")})
		d.Recorder = b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "depwatch-coordinator"})
		if !d.rights().Events {
			d.Recorder = rights.InNamespace(d.Recorder, d.Options.LeaseNamespace(os.LookupEnv))
		}
	}
	c, err := New(d)
	if err != nil {
		return err
	}
	var watchdog *leaderelection.HealthzAdaptor
	if d.Options.EnableLeaderElection {
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}

	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel (deferred later, runs first)
	defer cancel()
	if err := c.serveEndpoints(ctx, &wg, watchdog); err != nil {
		return err
	}
	if r, ok := d.Executor.(interface{ Run(context.Context) }); ok {
		wg.Go(func() { r.Run(ctx) }) // ends with ctx, after its runs
	}
	if !c.startInformers(ctx, &wg) {
		return nil
	}
	if d.Options.ConfigFile != "" && d.Options.ConfigReloadInterval > 0 {
		// A valid change ends ctx: Run stops as on SIGTERM and returns nil.
		wg.Go(func() { c.watchConfig(ctx, d.Options.ConfigReloadInterval, cancel) })
	}
	if c.prober != nil {
		// Gardener's Cluster kind may be installed later: looked for now and periodically.
		wg.Go(func() { c.prober.WatchClusters(ctx) })
		wg.Go(func() { c.prober.WatchStandAside(ctx) }) // dependency-watchdog's prober Lease
	}
	if !d.Options.EnableLeaderElection {
		c.lead(ctx)
		c.Log.Info("Stopped.")
		return nil
	}
	return c.runElected(ctx, watchdog)
}

// serveEndpoints serves /metrics and /healthz, /readyz on their flags' addresses until ctx
// ends, "" or "0" turning one off.
func (c *Coordinator) serveEndpoints(ctx context.Context, wg *sync.WaitGroup, watchdog *leaderelection.HealthzAdaptor) error {
	metrics, health := http.NewServeMux(), http.NewServeMux()
	metrics.Handle("/metrics", promhttp.HandlerFor(c.Metrics.Registry, promhttp.HandlerOpts{}))
	health.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		// The leader election's watchdog, when electing.
		if watchdog != nil {
			if err := watchdog.Check(r); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	health.HandleFunc("/readyz", c.readyz)
	for _, s := range []struct {
		flag, addr, what string
		handler          http.Handler
	}{
		{"metrics-bind-addr", c.Options.MetricsBindAddr, "/metrics", metrics},
		{"health-bind-addr", c.Options.HealthBindAddr, "/healthz and /readyz", health},
	} {
		if s.addr == "" || s.addr == "0" {
			continue
		}
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return fmt.Errorf("--%s=%s: %w", s.flag, s.addr, err)
		}
		srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second}
		wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				c.Log.WithError(err).WithField("addr", s.addr).Error("HTTP server stopped.")
			}
		})
		wg.Go(func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		})
		c.Log.WithField("addr", ln.Addr().String()).Infof("Serving %s.", s.what)
	}
	return nil
}

// startInformers runs the controllers' informers until ctx ends and waits for their caches;
// false: ctx ended first (WaitForCacheSync waits for nothing else).
func (c *Coordinator) startInformers(ctx context.Context, wg *sync.WaitGroup) bool {
	if c.weeder != nil {
		c.weeder.StartDependsOn(ctx) // the watches annotations ask for while the caches fill
	}
	infs := c.informers()
	synced := make([]cache.InformerSynced, 0, len(infs))
	for _, inf := range infs {
		wg.Go(func() { inf.RunWithContext(ctx) })
		synced = append(synced, inf.HasSynced)
	}
	c.Log.Info("Waiting for the informer caches to sync.")
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return false
	}
	c.synced.Store(true)
	services := 0
	if c.weeder != nil {
		services = len(c.weeder.Keys())
		c.weeder.ReportExclusions() // now that the namespaces are known
	}
	c.Log.WithField("services", services).Info("Caches synced; ready.")
	return true
}

// runElected campaigns for the Lease and leads while it holds it. Losing the Lease ends it
// with ErrLostLeadership: the process restarts as a standby rather than keep half-state.
func (c *Coordinator) runElected(ctx context.Context, watchdog *leaderelection.HealthzAdaptor) error {
	o := c.Options
	ns, lease := o.LeaseNamespace(os.LookupEnv), o.Lease()
	id := cmp.Or(c.Identity, leaseIdentity())
	log := c.Log.WithFields(logrus.Fields{"lease": ns + "/" + lease, "identity": id})
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, lease,
		c.LeaseClient.CoreV1(), c.LeaseClient.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id, EventRecorder: c.Recorder})
	if err != nil {
		return err
	}
	// OnStartedLeading runs in a goroutine of the elector's: it only hands the context over,
	// and lead runs here, so nothing outlives Run.
	leading := make(chan context.Context, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            lease,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) { leading <- lctx },
			OnStoppedLeading: func() { log.Info("Not leading.") },
			OnNewLeader: func(identity string) {
				if identity != id {
					log.WithField("leader", identity).Info("Standing by; another replica leads.")
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	log.Info("Campaigning for leadership.")
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(ctx)
	}()
	select {
	case lctx := <-leading:
		log.Info("Won leadership.")
		c.lead(lctx)
		<-done
	case <-done:
	}
	if ctx.Err() != nil {
		log.Info("Stopped; lease released.")
		return nil
	}
	return fmt.Errorf("%w of Lease %s/%s", ErrLostLeadership, ns, lease)
}

// leaseIdentity is this replica's name in the Lease: the pod's name, when the Deployment
// passes it, is what a reader of the Lease looks for (a pod on the host network has the
// node's host name, shared by every replica), plus a random suffix.
func leaseIdentity() string {
	host := os.Getenv("POD_NAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

// readyz answers /readyz: ready once the caches have synced, unless the config file has
// become invalid (the coordinator still works, with the config it started with).
func (c *Coordinator) readyz(w http.ResponseWriter, _ *http.Request) {
	if !c.synced.Load() {
		http.Error(w, "informer caches not synced yet", http.StatusServiceUnavailable)
		return
	}
	c.file.mu.Lock()
	problem, since := c.file.problem, c.file.since
	c.file.mu.Unlock()
	if problem != "" {
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
