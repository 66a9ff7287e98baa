// Package weeder is the coordinator's weeder controller, end to end: its config section, its
// pure decisions, how its Jobs are described, its metrics. It watches the EndpointSlices (or
// legacy Endpoints) of the configured services and launches weeder Jobs: armed when a
// service goes down (Ready → notReady), so the Job reaps the moment it is back; unarmed when
// it comes back without an armed one (notReady → Ready); and a catch-up weeder when a service
// is first seen Ready (on start, on winning leadership, for a new service) while one of its
// dependents is crash-looping. The coordinator holds no right to delete pods.
//
// The path from an event to a Job, by file:
//
//   - endpoints.go: onEndpoints folds the event into the service's own view; an edge is
//     recorded with its time, when it happens, and the service's key is queued. Its state
//     is what no API object holds (the recorded edges, the Jobs just created).
//   - sync.go: Reconcile (the sync of one key) takes the last recorded edge, however late:
//     an outage that began and ended while the key waited gets the weeder its return calls
//     for. It reads what covers the service from the caches (coverage), lets PlanWeeder
//     decide, and acts once.
//   - launch.go: the one action: launch, arm or stop a weeder Job through package jobs,
//     record the Service's Event, count it.
//   - batch.go: in a storm, the services wait a moment and share batch Jobs.
//   - dependson.go: the services workloads name with AnnotationDependsOn, followed like
//     the configured ones (their selectors from the workloads' cache, indexed by the services
//     they declare; their slices from a watch per name).
//
// The pure decisions are in decide.go (Decide, PlanWeeder) and batch.go (PlanLaunch); the
// endpoints' sources and handler in endpoints.go, the other informers in New and caches.go
// (dependents, weeder Jobs).
package weeder

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/jobs"
)

// Reasons of the Events the coordinator records on Services.
const (
	EventWeederStarted = "WeederStarted"
	// EventWeederStopped: the service went down again while its weeder ran.
	EventWeederStopped = "WeederStopped"
	EventWeederFailed  = "WeederFailed"
	// EventWeederArmed: the service went down; its weeder was launched armed.
	EventWeederArmed = "WeederArmed"
)

// Options are the coordinator's flags the weeder reads.
type Options struct {
	// Batching: when a storm of services is covered by batch Jobs (--weeder-batch-*).
	Batching Batching
	// ConcurrentReconciles is the number of workers (--concurrent-reconciles).
	ConcurrentReconciles int
	// NoNamespaceReads: this service account may not list or watch namespaces (gardenlet's
	// weeder RBAC): no namespace informer, no namespaces.selector, and a deleted namespace
	// shows only as its services' endpoints going: a service whose endpoints are gone counts
	// as going away (its weeder is stopped; a return Ready with a crash-looping dependent is
	// covered by that first sighting's catch-up).
	NoNamespaceReads bool
	// NoServiceReads: this service account may not read Services (gardenlet's weeder RBAC): a
	// lone outage is armed without asking whether its Service is being deleted.
	NoServiceReads bool
	// NoWorkloadReads: this service account may not list and watch Deployments, StatefulSets
	// and DaemonSets: the depends-on annotation is not followed.
	NoWorkloadReads bool
}

// Deps is what the weeder runs with: what it shares with the prober (its Namespaces are not
// read with Options.NoNamespaceReads; its Events are on the Services) and its own.
type Deps struct {
	ctrl.Shared
	// Config is the weeder's section of the config at start: the informers are built for it.
	Config  *Config
	Options Options
	Metrics *Metrics
}

// Controller watches the configured services and launches weeder Jobs.
type Controller struct {
	client   kubernetes.Interface
	opts     Options
	log      logrus.FieldLogger
	metrics  *Metrics
	recorder record.EventRecorder
	now      func() time.Time

	cfg      *Config
	launcher *jobs.Launcher // the jobTemplate resolved (namespace, image)
	// nsNames and nsSel are the config's namespaces section (Exclusion).
	nsNames map[string]bool
	nsSel   labels.Selector

	src  cache.SharedIndexInformer // the configured services' endpoints (newSource)
	deps *dependents               // the configured dependents' pods
	// runs are the weeder runs in the Jobs' namespace, indexed by the services they cover (a
	// batch under each of its services), so an edge reads what covers its service without an
	// API call.
	runs *jobs.RunView
	// dependsOn: the workloads' depends-on annotations; nil when they are not followed.
	dependsOn *dependsOn
	nsInf     cache.SharedIndexInformer
	nsLister  corelisters.NamespaceLister // is a namespace going away, does it match
	// nsSelect: namespaces are chosen by their labels (namespaces.selector).
	nsSelect bool
	// leadingSince is when this replica took the lead (nil or zero: it does not lead). Only
	// the leader counts failed Jobs and runs' reports, so replicas do not count each one twice.
	leadingSince atomic.Pointer[time.Time]
	// exclusionsReady: the caches have synced (ReportExclusions), so a followed service in a
	// namespace the config leaves out is reported as such.
	exclusionsReady atomic.Bool

	queue workqueue.TypedRateLimitingInterface[string] // services' keys
	batch *batcher

	// What the weeder knows that no API object holds; everything else (the endpoints, the
	// weeder Jobs, the namespaces, the dependents) it reads from its informers' caches when
	// it acts.
	mu sync.Mutex
	// services: per followed <namespace>/<service> with endpoints objects (or an edge still
	// owed an action), what the event handler saw of it.
	services map[string]*serviceState
	// expectations: the weeder Jobs created that the Job cache has not shown yet.
	expectations jobExpectations
}

// New builds the weeder and its informers (not started; the coordinator runs them): the
// configured services' endpoints (newSource), the configured dependents' pods, the weeder
// Jobs (the executor's runs) and their reports in the Jobs' namespace, and the workloads
// (newDependsOnWatch); the namespaces are d's, shared with the prober. The config must name
// at least one service or let the weeder follow workloads' depends-on annotations
// (Config.Weeds).
func New(d Deps) (*Controller, error) {
	d, err := withDefaults(d)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		client:       d.Client,
		opts:         d.Options,
		log:          d.Log,
		metrics:      d.Metrics,
		recorder:     d.Recorder,
		now:          d.Now,
		nsSelect:     d.Config.NeedsNamespaceInformer(),
		queue:        ctrl.NewQueue("depwatch-coordinator"),
		batch:        newBatcher(),
		services:     map[string]*serviceState{},
		expectations: jobExpectations{},
		cfg:          d.Config,
		launcher:     &jobs.Launcher{Executor: d.Executor, Template: d.Template},
		nsNames:      map[string]bool{},
		nsSel:        d.Config.NamespaceSelector(),
	}
	if ns := d.Config.Namespaces; ns != nil {
		for _, n := range ns.Names {
			c.nsNames[n] = true
		}
	}
	if !c.opts.NoNamespaceReads {
		c.nsInf = d.Namespaces
		c.nsLister = corelisters.NewNamespaceLister(c.nsInf.GetIndexer())
	}
	if c.deps, err = newDependents(d.Client, c.cfg); err != nil {
		return nil, err
	}
	// A run's add observes its expectation, and a run that stops frees a place under
	// --max-weeder-jobs, so the batches waiting for one look again.
	c.runs, err = d.Executor.RunView(d.Template.Namespace, jobs.KindWeeder, func(r jobs.Run) []string { return r.Facts.Covers() }, jobs.RunHandlers{
		Added:    c.onJobAdded,
		Stopped:  func(jobs.Run) { c.batch.poke() },
		Reported: c.onReport,
		Failed: func(jobs.Run) {
			if !c.leadSince().IsZero() {
				c.metrics.JobsFailed.WithLabelValues(string(jobs.KindWeeder)).Inc()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	// An endpoints event may make an edge (onEndpoints); a namespace's new labels may leave
	// its services out of the config's namespaces, or in again (onNamespace).
	if c.nsSelect {
		if _, err := c.nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) { c.onNamespace(obj) }}); err != nil {
			return nil, err
		}
	}
	if c.src, err = newSource(d.Client, c.cfg); err != nil {
		return nil, err
	}
	if _, err := c.src.AddEventHandler(c.endpointsHandler()); err != nil {
		return nil, err
	}
	if err := c.newDependsOnWatch(d); err != nil {
		return nil, err
	}
	return c, nil
}

// endpointsHandler folds a source's events (onEndpoints), the config's and the annotations'.
func (c *Controller) endpointsHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onEndpoints(obj, false) },
		UpdateFunc: func(_, obj any) { c.onEndpoints(obj, false) },
		DeleteFunc: func(obj any) { c.onEndpoints(obj, true) },
	}
}

// withDefaults checks what New needs and fills in what it may leave out.
func withDefaults(d Deps) (Deps, error) {
	if d.Config == nil || d.Client == nil || d.Log == nil || d.Metrics == nil {
		return d, errors.New("weeder: client, config, log and metrics are required")
	}
	if !d.Config.Weeds(d.Options.NoWorkloadReads) {
		return d, errors.New("weeder: no service is configured and workloads' depends-on annotations are not followed")
	}
	if d.Options.NoNamespaceReads && d.Config.NeedsNamespaceInformer() {
		return d, errors.New("namespaces.selector: choosing namespaces by their labels needs to list and watch namespaces, which this service account may not")
	}
	d.Shared = d.WithDefaults(!d.Options.NoNamespaceReads)
	if d.Options.Batching == (Batching{}) {
		d.Options.Batching = DefaultBatching() // Options not from the flags (tests, embedding)
	}
	if d.Options.ConcurrentReconciles < 1 {
		d.Options.ConcurrentReconciles = 1
	}
	return d, nil
}

func (c *Controller) lead(since time.Time) { c.leadingSince.Store(&since) }

func (c *Controller) leadSince() time.Time {
	if p := c.leadingSince.Load(); p != nil {
		return *p
	}
	return time.Time{}
}

// Informers the weeder runs: its own, and its caches of the executor's runs.
func (c *Controller) Informers() []jobs.Follower {
	infs := []jobs.Follower{c.src, c.runs}
	if c.nsInf != nil {
		infs = append(infs, c.nsInf)
	}
	if c.dependsOn != nil {
		for _, inf := range c.dependsOn.workloads {
			infs = append(infs, inf)
		}
	}
	for _, inf := range c.deps.informers() {
		infs = append(infs, inf)
	}
	return infs
}

// Lead runs the batch launcher, the catch-up and the workers until ctx ends, then waits for
// them.
func (c *Controller) Lead(ctx context.Context) {
	c.lead(c.now())
	defer c.lead(time.Time{})
	var wg sync.WaitGroup
	wg.Go(func() { c.runBatches(ctx) })
	n := c.CatchUp()
	c.log.WithField("services", n).Info("Catch-up: every Ready service is checked for crash-looping dependents, and outages under way are armed.")
	ctrl.Work(ctx, c.queue, c.opts.ConcurrentReconciles, c)
	wg.Wait()
}

// CatchUp queues every Ready service for the catch-up check (a weeder if one of its
// dependents is crash-looping and none is active) and keeps the outage edges of services
// still down; other edges seen before now were another leader's to act on. It runs when this
// replica takes the lead, before its workers start, and returns how many services it queued.
func (c *Controller) CatchUp() int {
	now := c.now()
	var keys []string
	c.mu.Lock()
	for key, st := range c.services {
		switch {
		case st.seen.Ready:
			st.owed = catchUpEdge(now)
		case st.seen.Known && st.owed != nil && st.owed.edge == EdgeOutage:
		default:
			st.owed = nil
		}
		if st.owed != nil {
			keys = append(keys, key)
		}
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.queue.Add(k)
	}
	return len(keys)
}
