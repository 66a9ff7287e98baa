// Package prober is the coordinator's prober controller, end to end: its config section
// (`prober:`, dependency-watchdog's prober ConfigMap data), which namespaces are probed and
// when (Gardener's Cluster resources, the initial delay, throttling), the shards of namespaces
// each probe Job covers, the history of finished probe Jobs, and the metrics read from the
// probe pods' reports. The probing and scaling themselves are package probe's, in the Jobs.
package prober

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	batchv1listers "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// Controller launches probe Jobs: informer event (namespace, Gardener Cluster, probe Job) →
// handler (queue the namespace) → reconcile (read the caches, DecideProbe) → one action
// (launch a Job through package jobs, or requeue for when the next probe is due), plus the
// clean-up of finished probe Jobs beyond the history limits. Finished probe pods' termination
// messages feed the decision and scale metrics. Only the leader reconciles.
type Controller struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
	disco  discovery.DiscoveryInterface
	// cur is the running prober section and its launcher; a config reload swaps it whole.
	cur      atomic.Pointer[live]
	jobCache batchv1listers.JobLister
	log      logrus.FieldLogger
	metrics  *Metrics
	now      func() time.Time
	started  time.Time

	nsInf  cache.SharedIndexInformer // namespaces matching the prober's selector
	jobInf cache.SharedIndexInformer // probe Jobs in the Job namespace
	podInf cache.SharedIndexInformer // their pods (termination messages)
	queue  workqueue.TypedRateLimitingInterface[string]

	leading atomic.Bool

	mu      sync.Mutex
	next    map[string]time.Time // namespace → next probe due
	paused  map[string]string    // namespace → why it is not probed (selected but skipped)
	counted map[types.UID]bool   // pods whose summary was counted
	// throttled counts each namespace's probe Jobs in a row that reported throttled (429).
	throttled map[string]int
	// shootNotes: per namespace, the last shoot settings logged (logged again on change).
	shootNotes map[string]string
	// lastProbe: per probed namespace, its last probe as the last report said.
	lastProbe map[string]time.Time
	// shardNext: per shard, no Job is launched before this.
	shardNext map[int]time.Time
	// stuck: per shard, why its active Job has no running pod (cannot start).
	stuck map[int]string
	// shards is the shard count last seen.
	shards int
	// shardTurn serialises shard turns (see reconcileShard).
	shardTurn sync.Mutex
	// recorder returns the coordinator's Event recorder (it is replaced when Run starts).
	recorder func() record.EventRecorder
	cluster  *clusterWatch // nil while Gardener's Cluster kind is not installed
	clusterW sync.WaitGroup
}

// clusterWatch is the dynamic informer of Gardener's Cluster resources, started when
// discovery shows the kind and stopped when it disappears.
type clusterWatch struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
}

const (
	jobTargetIndex = "depwatch-target"
	// jobCoversIndex: the namespaces a probe Job probes.
	jobCoversIndex = "depwatch-covers"
)

// jobCovers is the namespaces a probe Job probes: its shard's namespaces, or the one
// namespace of a Job for one namespace alone.
func jobCovers(j *batchv1.Job) []string {
	if list := jobs.ReadFacts(j).Namespaces; len(list) > 0 {
		return list
	}
	if ns := j.Labels[jobs.LabelNamespace]; ns != "" {
		return []string{jobTarget(j)}
	}
	return nil
}

func New(d Deps) (*Controller, error) {
	if d.Config == nil || d.Client == nil || d.Log == nil || d.Metrics == nil {
		return nil, errors.New("prober: client, config, log and metrics are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Recorder == nil {
		d.Recorder = func() record.EventRecorder { return &record.FakeRecorder{} }
	}
	cfg := d.Config
	p := &Controller{
		client:     d.Client,
		dyn:        d.Dynamic,
		disco:      d.Client.Discovery(),
		log:        d.Log.WithField("component", "prober"),
		metrics:    d.Metrics,
		now:        d.Now,
		started:    d.Now(),
		next:       map[string]time.Time{},
		paused:     map[string]string{},
		counted:    map[types.UID]bool{},
		throttled:  map[string]int{},
		shootNotes: map[string]string{},
		lastProbe:  map[string]time.Time{},
		shardNext:  map[int]time.Time{},
		stuck:      map[int]string{},
		recorder:   d.Recorder,
		queue:      ctrl.NewQueue("depwatch-prober"),
	}
	sel := cfg.Selector().String()
	p.nsInf = coreinformers.NewFilteredNamespaceInformer(d.Client, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = sel })
	_ = p.nsInf.SetTransform(ctrl.StripManagedFields)
	kindSel := labels.Set{jobs.LabelKind: string(jobs.KindProbe)}.String()
	p.jobInf = batchinformers.NewFilteredJobInformer(d.Client, d.Template.Namespace, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, jobTargetIndex: func(obj any) ([]string, error) {
			j, ok := obj.(*batchv1.Job)
			if !ok {
				return nil, nil
			}
			return []string{jobTarget(j)}, nil
		}, jobCoversIndex: func(obj any) ([]string, error) {
			j, ok := obj.(*batchv1.Job)
			if !ok {
				return nil, nil
			}
			return jobCovers(j), nil
		}},
		func(o *metav1.ListOptions) { o.LabelSelector = kindSel })
	_ = p.jobInf.SetTransform(ctrl.StripManagedFields)
	p.podInf = coreinformers.NewFilteredPodInformer(d.Client, d.Template.Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = kindSel })
	_ = p.podInf.SetTransform(ctrl.StripManagedFields)
	p.jobCache = batchv1listers.NewJobLister(p.jobInf.GetIndexer())
	p.Apply(cfg, d.Template)

	handlers := []struct {
		inf cache.SharedIndexInformer
		key func(any) (string, bool)
	}{
		{p.nsInf, func(obj any) (string, bool) {
			k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			return k, err == nil
		}},
	}
	for _, h := range handlers {
		key := h.key
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { p.enqueue(key(obj)) },
			UpdateFunc: func(_, obj any) { p.enqueue(key(obj)) },
			DeleteFunc: func(obj any) { p.enqueue(key(obj)) },
		}); err != nil {
			return nil, err
		}
	}
	onJob := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		j, ok := obj.(*batchv1.Job)
		if !ok || !jobs.Finished(j) {
			return // only a finished Job changes anything: history, or the shard's next Job
		}
		if i, isShard := shardOfTarget(jobTarget(j)); isShard && len(jobs.ReadFacts(j).Namespaces) > 0 {
			p.queue.Add(shardKey(i))
		}
		// Its namespaces: one that moved to another shard while it ran joins that shard's next Job.
		for _, ns := range jobCovers(j) {
			p.queue.Add(ns)
		}
	}
	if _, err := p.jobInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onJob,
		UpdateFunc: func(old, obj any) {
			if p.leading.Load() {
				p.metrics.CountFailed(string(jobs.KindProbe), old, obj)
			}
			onJob(obj)
		},
		DeleteFunc: onJob,
	}); err != nil {
		return nil, err
	}
	if _, err := p.podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.onPod,
		UpdateFunc: func(_, obj any) { p.onPod(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				p.mu.Lock()
				delete(p.counted, pod.UID)
				p.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, err
	}
	p.metrics.initProbe()
	return p, nil
}

// live is one applied prober section with the launcher of its Jobs.
type live struct {
	cfg      *Config
	launcher *jobs.Launcher
}

func (p *Controller) conf() *live { return p.cur.Load() }

// Config is the running prober section.
func (p *Controller) Config() *Config { return p.conf().cfg }

// swap makes cfg and tpl (resolved) the running prober section. The fields it ignored are
// logged when they differ from the running section's, one warning each, with its path.
func (p *Controller) Apply(cfg *Config, tpl jobs.Template) {
	var before []string
	if cur := p.cur.Load(); cur != nil {
		before = cur.cfg.Warnings()
	}
	if !slices.Equal(before, cfg.Warnings()) {
		for _, w := range cfg.Warnings() {
			field, _, _ := strings.Cut(w, ":")
			p.log.WithFields(logrus.Fields{"field": field, "action": "ignored", "reason": "unknown field"}).
				Warnf("The prober config has a field depwatch does not know; it is ignored, as dependency-watchdog ignores it: %s.", w)
		}
	}
	p.cur.Store(&live{cfg: cfg, launcher: &jobs.Launcher{Client: p.client, Template: tpl, Cache: p.jobCache}})
}

func jobTarget(j *batchv1.Job) string {
	if t := jobs.ReadFacts(j).Target; t != "" {
		return t
	}
	return j.Labels[jobs.LabelNamespace]
}

func (p *Controller) enqueue(key string, ok bool) {
	if ok && key != "" {
		p.queue.Add(key)
	}
}

func (p *Controller) Informers() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{p.nsInf, p.jobInf, p.podInf}
}

// onPod reads a finished probe pod's report once (leader only, pods that ended after this
// coordinator started, so a restart does not count old ones again): the totals feed the
// metrics, each namespace's entry its last-probe time and its throttling back-off.
func (p *Controller) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !p.leading.Load() {
		return
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != string(jobs.KindProbe) || cs.State.Terminated == nil {
			continue
		}
		term := cs.State.Terminated
		if term.FinishedAt.Time.Before(p.started) {
			return
		}
		p.mu.Lock()
		done := p.counted[pod.UID]
		p.counted[pod.UID] = true
		p.mu.Unlock()
		if done {
			return
		}
		rep, err := probe.DecodeReport(term.Message)
		if err != nil {
			p.metrics.ProbeDecisions.WithLabelValues("error").Inc()
			p.log.WithFields(logrus.Fields{"pod": pod.Namespace + "/" + pod.Name, "reason": "no report"}).
				Warnf("A probe pod ended without a readable report (refused its configuration, or killed): %v.", err)
			return
		}
		for r, n := range rep.Results {
			p.metrics.ProbeDecisions.WithLabelValues(r).Add(float64(n))
		}
		for r, n := range rep.Ops {
			p.metrics.ProbeScaleOps.WithLabelValues(r).Add(float64(n))
		}
		for ns, e := range rep.Namespaces {
			if e.Last == probe.ResultNotProbed {
				continue
			}
			at := rep.End.Add(-e.Ago)
			p.noteLastProbe(ns, at)
			if !rep.DryRun {
				p.noteMeltdown(ns, e.Last)
			}
			p.noteThrottling(ns, e, at)
		}
		return
	}
}

// noteLastProbe sets the namespace's last-probe time (only while it is probed: a forgotten
// namespace's series is gone for good).
func (p *Controller) noteLastProbe(ns string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, probed := p.next[ns]; !probed {
		return
	}
	if at.After(p.lastProbe[ns]) {
		p.lastProbe[ns] = at
		p.metrics.ProbeLastProbe.WithLabelValues(ns).Set(float64(at.Unix()))
	}
}

// noteMeltdown keeps the namespace's meltdown series as its last decision left it: set by a
// scale-down, gone after a scale-up (or a probe that found everything up); a probe without
// a decision changes nothing.
func (p *Controller) noteMeltdown(ns string, last probe.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, probed := p.next[ns]; !probed {
		return
	}
	switch last {
	case probe.ResultScaleDown:
		p.metrics.ProbeMeltdown.WithLabelValues(ns).Set(1)
	case probe.ResultScaleUp, probe.ResultHealthy:
		p.metrics.ProbeMeltdown.DeleteLabelValues(ns)
	}
}

// noteThrottling: a namespace whose last probe was throttled (an API server answered 429)
// gets its next probe pushed out by the back-off, doubling with each throttled probe in a
// row, across Jobs, so a throttled API server is not probed again at full rate; the next Job
// of its shard is told (NAMESPACE_SETTINGS notBefore). Any other result ends the back-off.
func (p *Controller) noteThrottling(ns string, e probe.NamespaceResult, last time.Time) {
	p.mu.Lock()
	if e.Last != probe.ResultThrottled {
		delete(p.throttled, ns)
		p.mu.Unlock()
		return
	}
	p.throttled[ns] += max(e.Throttled, 1)
	n := p.throttled[ns]
	next, scheduled := p.next[ns]
	if scheduled {
		next = NextAfterThrottle(next, last, n)
		p.next[ns] = next
	}
	p.mu.Unlock()
	if !scheduled {
		return
	}
	p.log.WithFields(logrus.Fields{"namespace": ns, "action": "back-off", "reason": "throttled", "backoff": probe.ThrottleBackoff(n).String(), "nextProbe": next.UTC().Format(time.RFC3339)}).
		Warnf("The probe was throttled (HTTP 429) %d time(s) in a row: the next probe of this namespace waits until %s.", n, next.UTC().Format(time.RFC3339))
	p.queue.Add(ns)
}

// watchClusters looks for Gardener's Cluster kind now and every clusterDiscoveryInterval:
// when it appears the Cluster informer starts, when it goes the informer stops; either way
// every namespace is reconciled again.
func (p *Controller) WatchClusters(ctx context.Context) {
	defer func() {
		p.mu.Lock()
		if p.cluster != nil {
			p.cluster.cancel()
			p.cluster = nil
		}
		p.mu.Unlock()
		p.clusterW.Wait()
	}()
	// A timer, not a ticker: each wait reads the running config (a reload may change it).
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.checkClusterKind(ctx)
		t.Reset(p.conf().cfg.DiscoveryInterval())
	}
}

// clusterKindInstalled asks discovery whether extensions.gardener.cloud/v1alpha1 serves clusters.
func (p *Controller) clusterKindInstalled() (bool, error) {
	if p.dyn == nil {
		return false, nil
	}
	list, err := p.disco.ServerResourcesForGroupVersion(ClusterGVR.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == ClusterGVR.Resource {
			return true, nil
		}
	}
	return false, nil
}

func (p *Controller) checkClusterKind(ctx context.Context) {
	installed, err := p.clusterKindInstalled()
	if err != nil {
		p.log.WithError(err).Warn("Cannot tell whether Gardener's Cluster resources exist; keeping the current view.")
		return
	}
	p.mu.Lock()
	running := p.cluster != nil
	switch {
	case installed && !running:
		cctx, cancel := context.WithCancel(ctx)
		inf := dynamicinformer.NewFilteredDynamicInformer(p.dyn, ClusterGVR, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
		_ = inf.SetTransform(ctrl.StripManagedFields)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { p.enqueue(clusterKey(obj)) },
			UpdateFunc: func(_, obj any) { p.enqueue(clusterKey(obj)) },
			DeleteFunc: func(obj any) { p.enqueue(clusterKey(obj)) },
		})
		p.cluster = &clusterWatch{inf: inf, cancel: cancel}
		p.clusterW.Add(1)
		go func() {
			defer p.clusterW.Done()
			inf.RunWithContext(cctx)
		}()
		p.log.Info("Gardener Cluster resources found: watching them; shoots that are hibernated, waking up, being created, restored, migrated or deleted, or have no workers, are not probed; a shoot's nodeMonitorGracePeriod and per-pool nodeConditions apply to its probes.")
	case !installed && running:
		p.cluster.cancel()
		p.cluster = nil
		p.log.Info("Gardener Cluster resources are gone: probing by namespace labels alone.")
	default:
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.enqueueAll()
}

func clusterKey(obj any) (string, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Key, true
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return "", false
	}
	return u.GetName(), true
}

// clusterFor returns the namespace's Cluster (nil if none or the kind is not installed) and
// whether the Cluster cache is still syncing.
func (p *Controller) clusterFor(ns string) (*unstructured.Unstructured, bool) {
	p.mu.Lock()
	cw := p.cluster
	p.mu.Unlock()
	if cw == nil {
		return nil, false
	}
	if !cw.inf.HasSynced() {
		return nil, true
	}
	obj, exists, err := cw.inf.GetIndexer().GetByKey(ns)
	if err != nil || !exists {
		return nil, false
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u, false
}

func (p *Controller) enqueueAll() {
	for _, k := range p.nsInf.GetIndexer().ListKeys() {
		p.queue.Add(k)
	}
	p.mu.Lock()
	for ns := range p.next {
		p.queue.Add(ns)
	}
	p.mu.Unlock()
}

// input reads the caches for one namespace.
func (p *Controller) input(ns string) (ProbeInput, error) {
	in := ProbeInput{Now: p.now()}
	obj, exists, err := p.nsInf.GetIndexer().GetByKey(ns)
	if err != nil {
		return in, err
	}
	if exists {
		n, ok := obj.(*corev1.Namespace)
		in.Watched = ok && n.DeletionTimestamp == nil && n.Status.Phase != corev1.NamespaceTerminating &&
			p.conf().cfg.Selector().Matches(labels.Set(n.Labels))
	}
	in.Cluster, in.ClusterPending = p.clusterFor(ns)
	p.mu.Lock()
	_, in.Probed = p.next[ns]
	p.mu.Unlock()
	return in, nil
}

// reconcile handles one queue key: a shard ("shard:<i>") or a namespace.
func (p *Controller) Reconcile(ctx context.Context, key string) error {
	if i, ok := parseShardKey(key); ok {
		return p.reconcileShard(ctx, i)
	}
	return p.reconcileNamespace(ctx, key)
}

// reconcileNamespace decides whether ns is probed (DecideProbe), keeps its membership, and
// then reconciles its shard, so a namespace's first Job follows at once when it is due.
func (p *Controller) reconcileNamespace(ctx context.Context, ns string) error {
	// Probe Jobs of one namespace alone (a manual one, or from before shards) keep their limits.
	if err := p.cleanHistory(ctx, ns); err != nil {
		p.log.WithError(err).WithField("namespace", ns).Warn("Could not remove old probe Jobs; will retry.")
	}
	in, err := p.input(ns)
	if err != nil {
		return err
	}
	action, why := DecideProbe(in)
	cfg := p.conf().cfg
	log := p.log.WithFields(logrus.Fields{"namespace": ns, "action": string(action)})
	switch action {
	case ProbeForget:
		p.mu.Lock()
		_, had := p.next[ns]
		delete(p.next, ns)
		delete(p.throttled, ns)
		delete(p.shootNotes, ns)
		if _, ok := p.lastProbe[ns]; ok {
			delete(p.lastProbe, ns)
			p.metrics.ProbeLastProbe.DeleteLabelValues(ns)
		}
		p.metrics.ProbeMeltdown.DeleteLabelValues(ns)
		_, wasPaused := p.paused[ns]
		if in.Watched && !wasPaused {
			p.paused[ns] = why
			p.metrics.ProbeNamespaces.WithLabelValues("paused").Inc()
		} else if !in.Watched && wasPaused {
			delete(p.paused, ns)
			p.metrics.ProbeNamespaces.WithLabelValues("paused").Dec()
		}
		p.mu.Unlock()
		if had {
			p.metrics.ProbeNamespaces.WithLabelValues("probed").Dec()
			log.WithField("reason", why).Info("Not probing this namespace (any more): the next probe Job of its shard leaves it out.")
			p.noteShardCount()
		}
		return nil
	case ProbeDeferred:
		p.queue.AddAfter(ns, time.Second)
		return nil
	case ProbeFirst:
		at := in.Now.Add(cfg.Delay())
		p.mu.Lock()
		p.next[ns] = at
		if _, wasPaused := p.paused[ns]; wasPaused {
			delete(p.paused, ns)
			p.metrics.ProbeNamespaces.WithLabelValues("paused").Dec()
		}
		p.mu.Unlock()
		p.metrics.ProbeNamespaces.WithLabelValues("probed").Inc()
		log.WithFields(logrus.Fields{"reason": why, "firstProbeIn": cfg.Delay().String()}).Info("Probing this namespace.")
	}
	i := ShardOf(ns, p.noteShardCount())
	if err := p.reconcileShard(ctx, i); err != nil {
		// The shard's key retries with its own back-off: a launch that keeps failing (no Job
		// namespace, quota, API errors) is tried once per back-off step, not once per member.
		p.log.WithError(err).WithFields(logrus.Fields{"namespace": ns, "shard": p.shardName(i)}).Debug("The shard's turn failed; it is retried on its own.")
		p.queue.AddRateLimited(shardKey(i))
	}
	return nil
}

// shardMembers are the probed namespaces of shard i (sorted), and whether the shard exists.
func (p *Controller) shardMembers(i int) ([]string, map[string]time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	count := ShardCount(len(p.next), p.conf().cfg.PerJob())
	if i >= count {
		return nil, nil, false
	}
	var members []string
	notBefore := map[string]time.Time{}
	for ns, at := range p.next {
		if ShardOf(ns, count) == i {
			members = append(members, ns)
			notBefore[ns] = at
		}
	}
	slices.Sort(members)
	return members, notBefore, true
}

// coveredElsewhere: the namespaces of list that an active probe Job of another target probes
// (their shard changed while it runs, or a Job of one namespace alone): they join their new
// shard's next Job once that one ends, so no namespace is ever probed by two Jobs at once.
func (p *Controller) coveredElsewhere(target string, list []string) map[string]bool {
	out := map[string]bool{}
	for _, ns := range list {
		objs, err := p.jobInf.GetIndexer().ByIndex(jobCoversIndex, ns)
		if err != nil {
			continue
		}
		for _, o := range objs {
			if j, ok := o.(*batchv1.Job); ok && j.DeletionTimestamp == nil && !jobs.Finished(j) && jobTarget(j) != target {
				out[ns] = true
			}
		}
	}
	return out
}

// activeJob is the shard target's probe Job that has not finished (nil: none).
func (p *Controller) activeJob(target string) *batchv1.Job {
	objs, _ := p.jobInf.GetIndexer().ByIndex(jobTargetIndex, target)
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok && j.DeletionTimestamp == nil && !jobs.Finished(j) {
			return j
		}
	}
	return nil
}

// reconcileShard: history clean-up, DecideShard and its one action. Shard turns run one at a
// time: the workers reconcile namespaces concurrently, and two members of one shard must not
// both find it due and launch two Jobs before either has recorded the launch.
func (p *Controller) reconcileShard(ctx context.Context, i int) error {
	p.shardTurn.Lock()
	defer p.shardTurn.Unlock()
	target := p.shardName(i)
	if err := p.cleanHistory(ctx, target); err != nil {
		p.log.WithError(err).WithField("shard", target).Warn("Could not remove old probe Jobs; will retry.")
	}
	cfg := p.conf().cfg
	now := p.now()
	members, notBefore, exists := p.shardMembers(i)
	active := p.activeJob(target)
	p.checkStuck(i, active, now)
	if !exists {
		return nil // the shard count went down: its last Job runs out, nothing follows
	}
	elsewhere := p.coveredElsewhere(target, members)
	in := ShardInput{Active: active != nil, Now: now}
	p.mu.Lock()
	in.NextAt = p.shardNext[i]
	p.mu.Unlock()
	var due []string
	for _, ns := range members {
		if elsewhere[ns] {
			continue
		}
		in.Members++
		at := notBefore[ns]
		if !at.After(now.Add(cfg.RunDuration())) {
			due = append(due, ns)
		}
		if !at.After(now) {
			in.DueNow = true
		} else if in.EarliestDue.IsZero() || at.Before(in.EarliestDue) {
			in.EarliestDue = at
		}
	}
	in.Due = len(due)
	action, why := DecideShard(in)
	log := p.log.WithFields(logrus.Fields{"shard": target, "action": string(action), "reason": why, "namespaces": in.Members})
	switch action {
	case ShardIdle:
		return nil
	case ShardKeep:
		p.metrics.JobsLaunched.WithLabelValues(string(jobs.KindProbe), string(jobs.ResultKept)).Inc()
		// Looked at again when the Job ends (its informer event), and meanwhile for a Job that
		// cannot start.
		p.queue.AddAfter(shardKey(i), stuckAfter(cfg))
		return nil
	case ShardWait:
		at := in.NextAt
		if !now.Before(at) {
			at = in.EarliestDue
		}
		p.queue.AddAfter(shardKey(i), max(at.Sub(now), time.Second))
		return nil
	}
	if err := p.launch(ctx, i, due, notBefore, now, log); err != nil {
		return err
	}
	d := Jittered(cfg.Interval(), cfg.Jitter())
	p.mu.Lock()
	p.shardNext[i] = now.Add(d)
	p.mu.Unlock()
	p.queue.AddAfter(shardKey(i), d)
	return nil
}

// launch launches shard i's probe Job for its due namespaces with each shoot's own settings
// as they are now: a Job keeps what was true when it started, the next one picks up a change.
func (p *Controller) launch(ctx context.Context, i int, namespaces []string, notBefore map[string]time.Time, now time.Time, log logrus.FieldLogger) error {
	cur := p.conf()
	cfg := cur.cfg
	settings := map[string]probe.NamespaceSettings{}
	for _, ns := range namespaces {
		cluster, _ := p.clusterFor(ns)
		shoot := ShootSettingsOf(cluster)
		grace := shoot.Grace(cfg.KCMGrace())
		p.noteShootSettings(ns, shoot, grace, p.log.WithField("namespace", ns))
		var s probe.NamespaceSettings
		if grace != cfg.KCMGrace() {
			s.NodeMonitorGrace = grace
		}
		s.NodeConditions = shoot.NodeConditions
		if at := notBefore[ns]; at.After(now) {
			s.NotBefore = at
		}
		settings[ns] = s
	}
	spec, err := jobs.Probe(jobs.ProbeSpec{
		Shard:                     p.shardName(i),
		Namespaces:                namespaces,
		NamespaceSettings:         settings,
		Concurrency:               len(namespaces), // each namespace its own slot: a hanging one delays no other
		Jitter:                    cfg.Jitter(),
		KubeconfigSecretName:      cfg.KubeConfigSecretName,
		ProbeTimeout:              cfg.Timeout(),
		NodeMonitorGrace:          cfg.KCMGrace(),
		NodeLeaseFailureFraction:  cfg.LeaseFailure(),
		LeaseExpiryBufferFraction: cfg.ExpiryBuffer(),
		DependentResources:        cfg.ResourcesJSON(),
		ScaleChain:                cfg.ScaleChain(),
		DryRun:                    cfg.DryRun,
		RunDuration:               cfg.RunDuration(),
		Interval:                  cfg.Interval(),
		TriggerTime:               now,
	})
	if err != nil {
		return err // validated at load
	}
	out, err := cur.launcher.Launch(ctx, spec)
	p.metrics.JobsLaunched.WithLabelValues(string(jobs.KindProbe), string(out.Result)).Inc()
	if err != nil {
		log.WithError(err).Error("Could not launch the shard's probe Job; will retry. The other shards are not affected.")
		return err
	}
	log.WithFields(logrus.Fields{"job": out.Job.Namespace + "/" + out.Job.Name, "result": string(out.Result)}).
		Debugf("Launched a probe Job for %d namespace(s).", len(namespaces))
	return nil
}

// noteShootSettings logs a namespace's shoot-specific settings when they change (not on every
// probe: a seed has up to a thousand namespaces probed every few seconds).
func (p *Controller) noteShootSettings(ns string, s ShootSettings, grace time.Duration, log logrus.FieldLogger) {
	note := fmt.Sprintf("grace=%s conditions=%s problems=%v", grace, s.NodeConditionsJSON(), s.Problems)
	p.mu.Lock()
	changed := p.shootNotes[ns] != note
	p.shootNotes[ns] = note
	p.mu.Unlock()
	if !changed {
		return
	}
	fields := logrus.Fields{"nodeMonitorGrace": grace.String(), "nodeConditions": s.NodeConditionsJSON(), "reason": "shoot settings"}
	if s.NodeMonitorGrace > 0 {
		log.WithFields(fields).Info("The shoot sets its own nodeMonitorGracePeriod: its probes use it from the next probe Job on.")
	} else {
		log.WithFields(fields).Debug("Probe settings of this namespace from the next probe Job on.")
	}
	for _, pr := range s.Problems {
		log.WithFields(logrus.Fields{"reason": pr}).Warnf("The shoot's Cluster has a probe setting depwatch cannot use; the default applies: %s.", pr)
	}
}

// cleanHistory deletes the target's (a shard's, or one namespace's) finished probe Jobs
// beyond the history limits.
func (p *Controller) cleanHistory(ctx context.Context, target string) error {
	objs, err := p.jobInf.GetIndexer().ByIndex(jobTargetIndex, target)
	if err != nil {
		return err
	}
	list := make([]*batchv1.Job, 0, len(objs))
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok {
			list = append(list, j)
		}
	}
	cur := p.conf()
	excess := jobs.ExcessHistory(list, cur.cfg.SuccessfulHistory(), cur.cfg.FailedHistory())
	if len(excess) == 0 {
		return nil
	}
	del := make([]batchv1.Job, 0, len(excess))
	for _, j := range excess {
		del = append(del, *j)
	}
	deleted, err := cur.launcher.Delete(ctx, del)
	p.metrics.ProbeJobsCleaned.Add(float64(len(deleted)))
	if len(deleted) > 0 {
		p.log.WithFields(logrus.Fields{"target": target, "jobs": deleted}).Debug("Removed finished probe Jobs beyond the history limits.")
	}
	if err != nil {
		return fmt.Errorf("history clean-up: %w", err)
	}
	return nil
}

// GiveUp is told by the worker loop that a key failed ctrl.MaxRetries times in a row.
func (p *Controller) GiveUp(key string, err error) {
	p.log.WithError(err).WithField("key", key).Error("Giving up on this probe turn; trying again in one interval.")
	p.queue.AddAfter(key, p.conf().cfg.Interval())
}

// lead runs the prober's workers until ctx ends.
func (p *Controller) Lead(ctx context.Context, workers int) {
	p.leading.Store(true)
	defer p.leading.Store(false)
	cfg := p.conf().cfg
	p.log.WithFields(logrus.Fields{"selector": cfg.Selector().String(), "interval": cfg.Interval().String(),
		"initialDelay": cfg.Delay().String(), "jobRunDuration": cfg.RunDuration().String(), "namespacesPerJob": cfg.PerJob()}).Info("Active: probing the selected namespaces.")
	p.enqueueAll()
	ctrl.Work(ctx, p.queue, workers, p)
}

// stuckAfter is how long a shard's probe Job may go without a running pod before the shard
// counts as stuck: a pod normally runs seconds after its Job is created.
func stuckAfter(cfg *Config) time.Duration { return max(time.Minute, cfg.Interval()) }

// checkStuck notes whether shard i's active Job cannot start (no pod, or a pod that stays
// Pending: no node fits, quota, admission): its namespaces are then not probed. It is made
// visible, once per Job, as a Warning log line and Event on the Job, in the metric
// depwatch_coordinator_probe_shards{state="stuck"} and in /readyz's detail. The other shards
// carry on: each has its own Job.
func (p *Controller) checkStuck(i int, active *batchv1.Job, now time.Time) {
	why := ""
	if active != nil && now.Sub(active.CreationTimestamp.Time) >= stuckAfter(p.conf().cfg) {
		why = p.whyNotRunning(active)
	}
	p.mu.Lock()
	before := p.stuck[i]
	if why == "" {
		delete(p.stuck, i)
	} else {
		p.stuck[i] = why
	}
	n := len(p.stuck)
	p.mu.Unlock()
	p.metrics.ProbeShards.WithLabelValues("stuck").Set(float64(n))
	if why == "" || why == before {
		return
	}
	msg := fmt.Sprintf("The probe Job of %s has no running pod after %s: %s. Its namespaces (%s) are not probed until it starts; the other shards are not affected.",
		p.shardName(i), now.Sub(active.CreationTimestamp.Time).Round(time.Second), why, strings.Join(jobs.ReadFacts(active).Namespaces, ","))
	p.log.WithFields(logrus.Fields{"shard": p.shardName(i), "job": active.Namespace + "/" + active.Name, "action": "none", "reason": why}).Warn(msg)
	if p.recorder != nil {
		p.recorder().Event(active, corev1.EventTypeWarning, "ProbeShardNotRunning", msg)
	}
}

// whyNotRunning is why the Job has no running (or finished) pod, "" when it has one.
func (p *Controller) whyNotRunning(j *batchv1.Job) string {
	var pending []string
	for _, o := range p.podInf.GetIndexer().List() {
		pod, ok := o.(*corev1.Pod)
		if !ok || pod.Labels[batchv1.JobNameLabel] != j.Name {
			continue
		}
		if pod.Status.Phase != corev1.PodPending {
			return ""
		}
		why := "pod " + pod.Name + " Pending"
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				why += fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
			}
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				if w.Reason == "ContainerCreating" || w.Reason == "PodInitializing" {
					continue
				}
				why += fmt.Sprintf(" (%s: %s)", w.Reason, w.Message)
			}
		}
		pending = append(pending, why)
	}
	if len(pending) == 0 {
		return "no pod was created (a ResourceQuota or an admission webhook refusing it? see the Job's Events)"
	}
	return strings.Join(pending, "; ")
}

// stuckShards is /readyz's detail: one line per shard whose Job cannot start.
func (p *Controller) StuckShards() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for i, why := range p.stuck {
		out = append(out, fmt.Sprintf("probe %s: its Job has no running pod: %s", p.shardName(i), why))
	}
	slices.Sort(out)
	return out
}

// shardName is shard i's Job target under the running config's namespace selector.
func (p *Controller) shardName(i int) string { return ShardName(i, p.conf().cfg.Selector().String()) }

// noteShardCount returns the shard count for the probed namespaces now; when it changed,
// namespaces move between shards, so every shard looks at its members again.
func (p *Controller) noteShardCount() int {
	per := p.conf().cfg.PerJob()
	p.mu.Lock()
	count := ShardCount(len(p.next), per)
	before := p.shards
	p.shards = count
	p.mu.Unlock()
	if count != before {
		p.metrics.ProbeShards.WithLabelValues("total").Set(float64(count))
		p.log.WithFields(logrus.Fields{"shards": count, "before": before, "reason": "probed namespaces changed"}).
			Infof("The probed namespaces now form %d shard(s) of about %d: one probe Job each at a time.", count, per)
		for i := range max(count, before) {
			p.queue.Add(shardKey(i))
		}
	}
	return count
}
