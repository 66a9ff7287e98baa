// Package prober is the coordinator's prober controller, end to end: its config section
// (`prober:`, dependency-watchdog's prober ConfigMap data), which namespaces are probed and
// when (Gardener's Cluster resources, the initial delay, throttling), the shards of namespaces
// each probe Job covers and their membership ConfigMaps, the history of finished probe Jobs,
// and the metrics read from the probe runs' reports. The probing and scaling themselves are
// package probe's, in the Jobs.
//
// Files by concern: controller.go (informers, leading), handlers.go, state.go, reconcile.go (a
// namespace's turn), shardturn.go (a shard's turn, its launch, its history and a Job that
// cannot start), membership.go (what a running shard Job probes), clusters.go (Gardener's
// Cluster kind), reports.go (finished probe runs), standaside_watch.go (dependency-watchdog's
// prober Lease); the pure decisions in decide.go, shards.go and standaside.go; config.go;
// metrics.go.
package prober

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/jobs"
)

// Deps is what the prober runs with: what it shares with the weeder (of the Namespaces, it
// reads those its selector matches) and its own.
type Deps struct {
	ctrl.Shared
	// Dynamic reads Gardener's Cluster resources; nil: they are not looked for.
	Dynamic dynamic.Interface
	// Config is the running config's prober section.
	Config  *Config
	Metrics *Metrics
	// DWDLeaseNamespace is where dependency-watchdog's prober Lease is when the config names
	// no namespace ("": garden).
	DWDLeaseNamespace string
	// OwnLease is the Lease this coordinator elects through (nil: no leader election): the
	// prober never stands aside for it.
	OwnLease *LeaseRef
	// Self is what the prober's own Events (standing aside) are about: the coordinator's
	// Lease or pod; nil: they are dropped.
	Self *corev1.ObjectReference
	// NoScaleTargets: this service account may not write the probe admission policy's
	// parameters (gardenlet's, under the image swap), which are then not written.
	NoScaleTargets bool
}

// Controller launches probe Jobs: informer event (namespace, Gardener Cluster, probe Job) →
// handler (queue the namespace) → reconcile (read the caches, DecideProbe) → one action
// (launch a Job through package jobs, or requeue for when the next probe is due), plus the
// clean-up of finished probe Jobs beyond the history limits. Finished probe pods' termination
// messages feed the decision and scale metrics. Only the leader reconciles.
type Controller struct {
	client   kubernetes.Interface
	dyn      dynamic.Interface
	cfg      *Config        // the running prober section (a changed config restarts the coordinator)
	launcher *jobs.Launcher // of its Jobs
	log      logrus.FieldLogger
	metrics  *Metrics
	now      func() time.Time
	started  time.Time

	nsInf cache.SharedIndexInformer // namespaces; the prober's are those its selector matches
	view  *jobs.RunView             // the probe runs in the Jobs' namespace, by target
	// notStarted says why a run has not started (the view's NotStarted; tests set it).
	notStarted func(jobs.Run) string
	members    jobs.Memberships // the shards' memberships
	queue      workqueue.TypedRateLimitingInterface[string]

	leading atomic.Bool

	probeState
	// noScaleTargets: the probe policy's parameters are not written (Deps.NoScaleTargets).
	noScaleTargets bool
	// recorder returns the coordinator's Event recorder; nil: Events are dropped.
	recorder record.EventRecorder
	cluster  *clusterWatch // nil while Gardener's Cluster kind is not installed
	aside    *standAsideWatch
	clusterW sync.WaitGroup
}

// New builds the prober: it takes the cluster's namespaces (shared with the weeder) and
// follows, in the Jobs' namespace, the executor's probe runs (their changes and reports), the
// shards' memberships and dependency-watchdog's prober Lease. The coordinator runs them.
func New(d Deps) (*Controller, error) {
	if d.Config == nil || d.Client == nil || d.Log == nil || d.Metrics == nil {
		return nil, errors.New("prober: client, config, log and metrics are required")
	}
	d.Shared = d.WithDefaults(true)
	p := &Controller{
		client:   d.Client,
		dyn:      d.Dynamic,
		cfg:      d.Config,
		launcher: &jobs.Launcher{Executor: d.Executor, Template: d.Template},
		log:      d.Log.WithField("component", "prober"),
		metrics:  d.Metrics,
		now:      d.Now,
		started:  d.Now(),
		nsInf:    d.Namespaces,
		probeState: probeState{
			next: map[string]time.Time{}, paused: sets.New[string](), throttled: map[string]int{}, shootNotes: map[string]string{},
			reportedProbe: map[string]time.Time{}, shardNext: map[int]time.Time{}, stuck: map[int]string{},
		},
		recorder:       d.Recorder,
		noScaleTargets: d.NoScaleTargets,
		queue:          ctrl.NewQueue("depwatch-prober"),
	}
	p.members = d.Executor.Memberships(d.Template.Namespace, p.onLeft)
	var err error
	p.view, err = d.Executor.RunView(d.Template.Namespace, jobs.KindProbe, func(r jobs.Run) []string { return []string{r.Facts.Target} }, jobs.RunHandlers{
		Added: func(r jobs.Run) {
			if !r.Active() {
				p.onEnded(r)
			}
		},
		Stopped:  p.onEnded,
		Reported: p.onReport,
		Failed: func(jobs.Run) {
			if p.leading.Load() {
				p.metrics.JobsFailed.WithLabelValues(string(jobs.KindProbe)).Inc()
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("following the probe runs: %w", err)
	}
	p.notStarted = p.view.NotStarted
	// A namespace is queued for its own events; one whose labels leave the selector is
	// looked at once more, and let go.
	if _, err := p.nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.queueKey(obj, p.selected(obj)) },
		UpdateFunc: func(old, obj any) { p.queueKey(obj, p.selected(old) || p.selected(obj)) },
		DeleteFunc: func(obj any) { p.queueKey(obj, p.selected(obj)) },
	}); err != nil {
		return nil, err
	}
	if p.aside, err = p.newStandAsideWatch(d); err != nil {
		return nil, err
	}
	p.metrics.initProbe()
	return p, nil
}

// Informers the prober runs: its namespaces, and its caches of the executor's runs.
func (p *Controller) Informers() []jobs.Follower {
	return []jobs.Follower{p.nsInf, p.view, p.members}
}

func (p *Controller) enqueueAll() {
	for _, k := range p.selectedKeys() {
		p.queue.Add(k)
	}
	p.mu.Lock()
	for ns := range p.next {
		p.queue.Add(ns)
	}
	p.mu.Unlock()
}

// GiveUp is told by the worker loop that a key failed ctrl.MaxRetries times in a row.
func (p *Controller) GiveUp(key string, err error) {
	p.log.WithError(err).WithField("key", key).Error("Giving up on this probe turn; trying again in one interval.")
	p.queue.AddAfter(key, p.cfg.Interval())
}

// Lead runs the prober's workers until ctx ends.
func (p *Controller) Lead(ctx context.Context, workers int) {
	p.leading.Store(true)
	defer p.leading.Store(false)
	p.mu.Lock()
	p.starting = map[string]bool{}
	for _, k := range p.selectedKeys() {
		p.starting[k] = true
	}
	p.settled = len(p.starting) == 0
	p.mu.Unlock()
	defer p.endStandAside()
	p.startStandAside(ctx) // before any namespace is looked at
	var wg sync.WaitGroup
	defer wg.Wait()
	if !p.noScaleTargets {
		// Before the first probe, for a while; then on, beside the probing.
		first, cancel := context.WithTimeout(ctx, scaleTargetsTimeout)
		done := p.writeScaleTargets(first)
		cancel()
		if !done {
			wg.Go(func() { p.writeScaleTargets(ctx) })
		}
	}
	p.log.WithFields(logrus.Fields{"selector": p.cfg.Selector().String(), "interval": p.cfg.Interval().String(),
		"initialDelay": p.cfg.Delay().String(), "jobRunDuration": p.cfg.RunDuration().String(), "namespacesPerJob": p.cfg.PerJob()}).Info("Active: probing the selected namespaces.")
	p.enqueueAll()
	ctrl.Work(ctx, p.queue, workers, p)
}
