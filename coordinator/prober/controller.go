// Package prober is the coordinator's prober controller, end to end: its config section
// (`prober:`, dependency-watchdog's prober ConfigMap data), which namespaces are probed and
// when (Gardener's Cluster resources, the initial delay, throttling), the shards of namespaces
// each probe Job covers and their membership ConfigMaps, the history of finished probe Jobs,
// and the metrics read from the probe runs' reports. The probing and scaling themselves are
// package probe's, in the Jobs.
//
// Files by concern: controller.go (informers, handlers, leading), reconcile.go (a namespace's
// turn), shardturn.go (a shard's turn and its launch), membership.go (what a running shard
// Job probes), clusters.go (Gardener's Cluster kind), reports.go (finished probe runs),
// history.go, stuck.go; the pure decisions in decide.go and shards.go; config.go; metrics.go.
package prober

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/jobs"
)

// Controller launches probe Jobs: informer event (namespace, Gardener Cluster, probe Job) →
// handler (queue the namespace) → reconcile (read the caches, DecideProbe) → one action
// (launch a Job through package jobs, or requeue for when the next probe is due), plus the
// clean-up of finished probe Jobs beyond the history limits. Finished probe pods' termination
// messages feed the decision and scale metrics. Only the leader reconciles.
type Controller struct {
	client  kubernetes.Interface
	exec    jobs.Executor
	dyn     dynamic.Interface
	disco   discovery.DiscoveryInterface
	running *runningConfig // the prober section and the launcher of its Jobs
	log     logrus.FieldLogger
	metrics *Metrics
	now     func() time.Time
	started time.Time

	nsInf cache.SharedIndexInformer // namespaces matching the prober's selector
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

func New(d Deps) (*Controller, error) {
	if d.Config == nil || d.Client == nil || d.Log == nil || d.Metrics == nil {
		return nil, errors.New("prober: client, config, log and metrics are required")
	}
	d.Shared = d.WithDefaults(true)
	cfg := d.Config
	p := &Controller{
		client:         d.Client,
		exec:           d.Executor,
		dyn:            d.Dynamic,
		disco:          d.Client.Discovery(),
		log:            d.Log.WithField("component", "prober"),
		metrics:        d.Metrics,
		now:            d.Now,
		started:        d.Now(),
		probeState:     newProbeState(),
		recorder:       d.Recorder,
		noScaleTargets: d.NoScaleTargets,
		queue:          ctrl.NewQueue("depwatch-prober"),
	}
	if err := p.newInformers(d.Namespaces, d.Template.Namespace); err != nil {
		return nil, err
	}
	p.running = &runningConfig{cfg: cfg, launcher: &jobs.Launcher{Executor: p.exec, Template: d.Template}}
	p.aside = newStandAsideWatch(d)
	if err := p.addHandlers(); err != nil {
		return nil, err
	}
	if err := p.addStandAsideHandlers(); err != nil {
		return nil, err
	}
	p.metrics.initProbe()
	return p, nil
}

// runningConfig is the prober section with the launcher of its Jobs.
type runningConfig struct {
	cfg      *Config
	launcher *jobs.Launcher
}

func (p *Controller) current() *runningConfig { return p.running }

// Config is the running prober section.
func (p *Controller) Config() *Config { return p.current().cfg }

func (p *Controller) enqueue(key string, ok bool) {
	if ok && key != "" {
		p.queue.Add(key)
	}
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
	p.queue.AddAfter(key, p.current().cfg.Interval())
}

// lead runs the prober's workers until ctx ends.
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
	cfg := p.current().cfg
	p.log.WithFields(logrus.Fields{"selector": cfg.Selector().String(), "interval": cfg.Interval().String(),
		"initialDelay": cfg.Delay().String(), "jobRunDuration": cfg.RunDuration().String(), "namespacesPerJob": cfg.PerJob()}).Info("Active: probing the selected namespaces.")
	p.enqueueAll()
	ctrl.Work(ctx, p.queue, workers, p)
}
