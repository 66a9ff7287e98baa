// Package coordinator is depwatch's always-on plumbing: flags, config loading and watching
// (configwatch.go: a valid change restarts the coordinator), leader election, informer start-up, metrics and health. The work is done by two
// controllers, each in its own package and each end to end (config section, pure decisions,
// its Jobs, its metrics):
//
//   - coordinator/weeder watches the configured services' endpoints and launches weeder Jobs
//     (armed when a service goes down, unarmed when it comes back, a catch-up when a Ready
//     service's dependent is found crash-looping);
//   - coordinator/prober keeps every selected control-plane namespace probed by a shard's
//     probe Job.
//
// Both drain their queue with the one worker loop of coordinator/ctrl. The coordinator holds
// no right to delete pods or to scale anything.
package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/coordinator/egress"
	"github.com/depwatch/depwatch/coordinator/metrics"
	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/coordinator/rights"
	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/coordinator/weeder"
	"github.com/depwatch/depwatch/jobs"
)

// Deps is what the coordinator runs with: what it hands both controllers (ctrl.Shared: its
// Executor carries the runs out as Jobs or, package coordinator/inprocess, in this process,
// and Run runs it when it has a Run method of its own; Run builds the Recorder when none is
// given) and its own.
type Deps struct {
	ctrl.Shared
	// Dynamic reads Gardener's Cluster resources (prober); nil: they are not looked for.
	Dynamic dynamic.Interface
	Config  *config.Config
	Options Options
	Metrics *metrics.Metrics
	// Rights are what this service account may do (rights.Check); nil: rights.All, depwatch's
	// own install. Without Events, only those in the Lease's namespace are written.
	Rights *rights.Rights
	// EventClient writes Events (a client with a rate limit of its own); nil: Client.
	EventClient kubernetes.Interface
	// LeaseClient campaigns for and renews the Lease (nil: Client): a client with a rate limit
	// of its own, a request every retry period, so that a storm of requests in the process's
	// shared budget can never delay a renewal past the renew deadline and cost the leadership
	// (controller-runtime gives dependency-watchdog's leader election its own client too).
	LeaseClient kubernetes.Interface
	// Identity in the leader election (default: host name + random suffix).
	Identity string
}

// Coordinator runs the weeder and the prober with one config, one leader election and one
// set of endpoints, on its Deps (their defaults filled in). Config is the config it started
// with, which it runs until it stops.
type Coordinator struct {
	Deps
	// file is what the config file has held since start: why it cannot be used (its
	// problems, one a line; "" while it is valid) and since when.
	file struct {
		mu      sync.Mutex
		problem string
		since   time.Time
	}

	weeder *weeder.Controller // nil when no service is configured (prober only)
	prober *prober.Controller // nil without a prober section

	synced atomic.Bool // the caches have synced (the /readyz condition)
}

// New builds the coordinator and its controllers' informers (not started).
func New(d Deps) (*Coordinator, error) {
	if d.Config == nil || d.Client == nil || d.Log == nil {
		return nil, errors.New("coordinator: client, config and log are required")
	}
	if d.Metrics == nil {
		d.Metrics = metrics.New("dev")
	}
	// An unset Batching (Options not from ParseFlags: tests, embedding) is the weeder's to default.
	d.Options.ConcurrentReconciles = max(d.Options.ConcurrentReconciles, 1)
	d.LeaseClient = cmp.Or(d.LeaseClient, d.Client)
	// One executor and one namespace informer for both controllers: they share their watches.
	// The weeder reads every namespace, the prober those its selector matches; a weeder that
	// may not read namespaces (gardenlet's) runs beside no prober: it is dependency-watchdog's
	// weeder command.
	d.Shared = d.WithDefaults(true)
	c := &Coordinator{Deps: d}
	for _, w := range c.Config.Warnings() { // each by its path (prober.<field> for the prober section's)
		field, _, _ := strings.Cut(w, ":")
		c.Log.WithFields(logrus.Fields{"field": field, "action": "ignored", "reason": "unknown field"}).
			Warnf("The config has a field depwatch does not know; it is ignored: %s.", w)
	}
	c.Metrics.ConfigValid.Set(1)
	// The prober when the config has its section, the weeder when it has services or follows
	// workloads' annotations.
	may := d.rights()
	var err error
	if d.Config.Prober != nil {
		dwdNS, own, self := proberLeases(d.Options, os.LookupEnv)
		if c.prober, err = prober.New(prober.Deps{
			Shared: d.Shared, Dynamic: d.Dynamic, Config: d.Config.Prober, Metrics: d.Metrics.Prober,
			DWDLeaseNamespace: dwdNS, OwnLease: own, Self: self, NoScaleTargets: !may.ScaleTargets,
		}); err != nil {
			return nil, err
		}
	}
	if !d.Config.Weeds(!may.Workloads) {
		if c.prober == nil { // the config weeds by annotations alone, which may not be read
			return nil, fmt.Errorf("nothing to run: the config names no service and has no prober section, and this service account may not list and watch Deployments, StatefulSets and DaemonSets to follow their %s annotations", weeder.AnnotationDependsOn)
		}
		return c, nil
	}
	if c.weeder, err = weeder.New(weeder.Deps{
		Shared: d.Shared, Config: &d.Config.Config, Metrics: d.Metrics.Weeder,
		Options: weeder.Options{Batching: d.Options.Batching, ConcurrentReconciles: d.Options.ConcurrentReconciles,
			NoNamespaceReads: !may.Namespaces, NoServiceReads: !may.Services, NoWorkloadReads: !may.Workloads},
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// rights are d.Rights, or rights.All when not given.
func (d Deps) rights() rights.Rights {
	if d.Rights != nil {
		return *d.Rights
	}
	return rights.All()
}

// lead runs both controllers until ctx ends, then waits for them.
func (c *Coordinator) lead(ctx context.Context) {
	c.Metrics.Leader.Set(1)
	defer c.Metrics.Leader.Set(0)
	c.Log.WithField("workers", c.Options.ConcurrentReconciles).Info("Active: handling service transitions.")
	var wg sync.WaitGroup
	if c.Options.JobEgressPolicy {
		wg.Go(func() { egress.Keeper{Client: c.Client, Namespace: c.Template.Namespace, Log: c.Log}.Run(ctx) })
	}
	if c.prober != nil {
		wg.Go(func() { c.prober.Lead(ctx, c.Options.ConcurrentReconciles) })
	} else if c.rights().ScaleTargets {
		// No prober: the probe admission policy's parameters are created empty where they are
		// missing, so that no probe may write anything; names an earlier config's prober
		// added stay (jobs.UnionScaleTargets: a probe Job it launched may still be running).
		wg.Go(func() {
			prober.KeepScaleTargets(ctx, c.Client, jobs.Template{Namespace: c.Template.Namespace}.ScaleTargets(nil), c.Log)
		})
	}
	if c.weeder != nil {
		wg.Go(func() { c.weeder.Lead(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
}

// informers the controllers run, each once (the namespace informer is both's).
func (c *Coordinator) informers() []jobs.Follower {
	var infs []jobs.Follower
	if c.weeder != nil {
		infs = append(infs, c.weeder.Informers()...)
	}
	if c.prober != nil {
		for _, inf := range c.prober.Informers() {
			if !slices.Contains(infs, inf) {
				infs = append(infs, inf)
			}
		}
	}
	return infs
}

// proberLeases are what the prober needs to know to stand aside for dependency-watchdog's
// prober (prober.standAsideForDependencyWatchdog): where that Lease is when the config names
// no namespace (dependency-watchdog's own default, garden; in the `dependency-watchdog prober`
// command, the namespace of the Lease it elects through, which is dependency-watchdog's), the
// Lease this coordinator elects through (never stood aside for: in that command it is the very
// Lease), and what the prober's Events are about (that Lease; nil without leader election).
func proberLeases(o Options, lookup func(string) (string, bool)) (dwdNamespace string, own *prober.LeaseRef, self *corev1.ObjectReference) {
	if o.Role == roles.Prober {
		dwdNamespace = o.LeaseNamespace(os.LookupEnv)
	}
	if !o.EnableLeaderElection {
		pod, _ := lookup("POD_NAME")
		ns, _ := lookup("POD_NAMESPACE")
		if pod != "" && ns != "" {
			self = &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: pod}
		}
		return dwdNamespace, nil, self
	}
	own = &prober.LeaseRef{Namespace: o.LeaseNamespace(os.LookupEnv), Name: o.Lease()}
	self = &corev1.ObjectReference{Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: own.Namespace, Name: own.Name}
	return dwdNamespace, own, self
}

// standAsideSummary is --check-config's sentence on prober.standAsideForDependencyWatchdog.
func standAsideSummary(o Options, p *prober.Config) string {
	dwdNS, own, _ := proberLeases(o, os.LookupEnv)
	ref, on := p.StandAsideLease(dwdNS)
	switch {
	case !on:
		return "Does not stand aside for dependency-watchdog's prober (standAsideForDependencyWatchdog.enabled: false)."
	case own != nil && *own == ref:
		return fmt.Sprintf("Elects through dependency-watchdog's prober Lease %s itself, in its place.", ref)
	}
	return fmt.Sprintf("Probes nothing while dependency-watchdog's prober holds its Lease %s (renewed within its leaseDurationSeconds).", ref)
}
