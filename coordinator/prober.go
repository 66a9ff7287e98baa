package coordinator

import (
	"context"
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
	"k8s.io/client-go/util/workqueue"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// prober launches probe Jobs: informer event (namespace, Gardener Cluster, probe Job) →
// handler (queue the namespace) → reconcile (read the caches, DecideProbe) → one action
// (launch a Job through package jobs, or requeue for when the next probe is due), plus the
// clean-up of finished probe Jobs beyond the history limits. Finished probe pods' termination
// messages feed the decision and scale metrics. Only the leader reconciles.
type prober struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
	disco  discovery.DiscoveryInterface
	// cur is the running prober section and its launcher; a config reload swaps it whole.
	cur      atomic.Pointer[proberLive]
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
	cluster    *clusterWatch // nil while Gardener's Cluster kind is not installed
	clusterW   sync.WaitGroup
}

// clusterWatch is the dynamic informer of Gardener's Cluster resources, started when
// discovery shows the kind and stopped when it disappears.
type clusterWatch struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
}

const jobTargetIndex = "depwatch-target"

func newProber(c *Coordinator, d Deps) (*prober, error) {
	cfg := d.Config.Prober
	p := &prober{
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
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "depwatch-prober"}),
	}
	sel := cfg.Selector().String()
	p.nsInf = coreinformers.NewFilteredNamespaceInformer(d.Client, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = sel })
	_ = p.nsInf.SetTransform(stripManagedFields)
	kindSel := labels.Set{jobs.LabelKind: string(jobs.KindProbe)}.String()
	p.jobInf = batchinformers.NewFilteredJobInformer(d.Client, d.Template.Namespace, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, jobTargetIndex: func(obj any) ([]string, error) {
			j, ok := obj.(*batchv1.Job)
			if !ok {
				return nil, nil
			}
			return []string{jobTarget(j)}, nil
		}},
		func(o *metav1.ListOptions) { o.LabelSelector = kindSel })
	_ = p.jobInf.SetTransform(stripManagedFields)
	p.podInf = coreinformers.NewFilteredPodInformer(d.Client, d.Template.Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = kindSel })
	_ = p.podInf.SetTransform(stripManagedFields)
	p.jobCache = batchv1listers.NewJobLister(p.jobInf.GetIndexer())
	p.swap(cfg, d.Template)

	handlers := []struct {
		inf cache.SharedIndexInformer
		key func(any) (string, bool)
	}{
		{p.nsInf, func(obj any) (string, bool) {
			k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			return k, err == nil
		}},
		{p.jobInf, func(obj any) (string, bool) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			j, ok := obj.(*batchv1.Job)
			if !ok || !jobs.Finished(j) {
				return "", false // only a finished Job changes anything: history, or a kept turn
			}
			return jobTarget(j), true
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

// proberLive is one applied prober section with the launcher of its Jobs.
type proberLive struct {
	cfg      *ProberConfig
	launcher *jobs.Launcher
}

func (p *prober) conf() *proberLive { return p.cur.Load() }

// swap makes cfg and tpl (resolved) the running prober section. The fields it ignored are
// logged when they differ from the running section's, one warning each, with its path.
func (p *prober) swap(cfg *ProberConfig, tpl jobs.Template) {
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
	p.cur.Store(&proberLive{cfg: cfg, launcher: &jobs.Launcher{Client: p.client, Template: tpl, Cache: p.jobCache}})
}

func jobTarget(j *batchv1.Job) string {
	if t := j.Annotations[jobs.AnnotationTarget]; t != "" {
		return t
	}
	return j.Labels[jobs.LabelNamespace]
}

func (p *prober) enqueue(key string, ok bool) {
	if ok && key != "" {
		p.queue.Add(key)
	}
}

func (p *prober) informers() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{p.nsInf, p.jobInf, p.podInf}
}

// onPod counts a finished probe pod's summary once (leader only, pods that ended after this
// coordinator started, so a restart does not count old ones again).
func (p *prober) onPod(obj any) {
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
		sum, ok := ParseProbeSummary(term.Message)
		if !ok {
			p.metrics.ProbeDecisions.WithLabelValues("error").Inc()
			return
		}
		if ns := pod.Labels[jobs.LabelNamespace]; ns != "" {
			p.noteThrottling(ns, sum.Last, term.FinishedAt.Time)
		}
		for r, n := range sum.Results {
			p.metrics.ProbeDecisions.WithLabelValues(r).Add(float64(n))
		}
		for r, n := range sum.Resources {
			p.metrics.ProbeScaleOps.WithLabelValues(r).Add(float64(n))
		}
		return
	}
}

// noteThrottling: a probe Job that reported throttled (an API server answered 429) pushes
// its namespace's next probe out by the back-off, doubling with each such Job in a row, so a
// throttled API server is not probed again at full rate; any other result ends the back-off.
func (p *prober) noteThrottling(ns, last string, finished time.Time) {
	p.mu.Lock()
	if last != string(probe.ResultThrottled) {
		delete(p.throttled, ns)
		p.mu.Unlock()
		return
	}
	p.throttled[ns]++
	n := p.throttled[ns]
	next, scheduled := p.next[ns]
	if scheduled {
		next = NextAfterThrottle(next, finished, n)
		p.next[ns] = next
	}
	p.mu.Unlock()
	if !scheduled {
		return
	}
	p.log.WithFields(logrus.Fields{"namespace": ns, "action": "back-off", "reason": "throttled", "backoff": probe.ThrottleBackoff(n).String(), "nextProbe": next.UTC().Format(time.RFC3339)}).
		Warnf("The probe was throttled (HTTP 429) %d time(s) in a row: the next probe of this namespace waits until %s.", n, next.UTC().Format(time.RFC3339))
	p.queue.AddAfter(ns, next.Sub(p.now()))
}

// watchClusters looks for Gardener's Cluster kind now and every clusterDiscoveryInterval:
// when it appears the Cluster informer starts, when it goes the informer stops; either way
// every namespace is reconciled again.
func (p *prober) watchClusters(ctx context.Context) {
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
func (p *prober) clusterKindInstalled() (bool, error) {
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

func (p *prober) checkClusterKind(ctx context.Context) {
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
		_ = inf.SetTransform(stripManagedFields)
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
func (p *prober) clusterFor(ns string) (*unstructured.Unstructured, bool) {
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

func (p *prober) enqueueAll() {
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
func (p *prober) input(ns string) (ProbeInput, error) {
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
	objs, err := p.jobInf.GetIndexer().ByIndex(jobTargetIndex, ns)
	if err != nil {
		return in, err
	}
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok && j.DeletionTimestamp == nil && !jobs.Finished(j) {
			in.Active = true
		}
	}
	p.mu.Lock()
	in.NextAt = p.next[ns]
	p.mu.Unlock()
	return in, nil
}

// reconcile handles one namespace: history clean-up, then DecideProbe and its one action.
func (p *prober) reconcile(ctx context.Context, ns string) error {
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
			log.WithField("reason", why).Info("Not probing this namespace (any more).")
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
		p.queue.AddAfter(ns, cfg.Delay())
		return nil
	case ProbeWait:
		p.queue.AddAfter(ns, in.NextAt.Sub(in.Now))
		return nil
	case ProbeKeep:
		p.metrics.JobsLaunched.WithLabelValues(string(jobs.KindProbe), string(jobs.ResultKept)).Inc()
		log.Debug("Probe due but the previous probe Job is still active: skipping this turn.")
		p.schedule(ns, in.Now)
		return nil
	}
	if err := p.launch(ctx, ns, in.Now, in.Cluster, log); err != nil {
		return err
	}
	p.schedule(ns, in.Now)
	return nil
}

func (p *prober) schedule(ns string, now time.Time) {
	cfg := p.conf().cfg
	d := Jittered(cfg.Interval(), cfg.Jitter())
	p.mu.Lock()
	if _, ok := p.next[ns]; ok {
		p.next[ns] = now.Add(d)
	}
	p.mu.Unlock()
	p.queue.AddAfter(ns, d)
}

// launch launches a probe Job with the shoot's own settings as they are now: a Job keeps
// what was true when it started, the next one picks up a change.
func (p *prober) launch(ctx context.Context, ns string, now time.Time, cluster *unstructured.Unstructured, log logrus.FieldLogger) error {
	cur := p.conf()
	cfg := cur.cfg
	shoot := ShootSettingsOf(cluster)
	grace := shoot.Grace(cfg.KCMGrace())
	p.noteShootSettings(ns, shoot, grace, log)
	spec, err := jobs.Probe(jobs.ProbeSpec{
		Namespace:                 ns,
		KubeconfigSecretName:      cfg.KubeConfigSecretName,
		ProbeTimeout:              cfg.Timeout(),
		NodeMonitorGrace:          grace,
		NodeConditions:            shoot.NodeConditionsJSON(),
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
		log.WithError(err).Error("Could not launch the probe Job; will retry.")
		return err
	}
	log.WithFields(logrus.Fields{"job": out.Job.Namespace + "/" + out.Job.Name, "result": string(out.Result)}).Debug("Launched a probe Job.")
	return nil
}

// noteShootSettings logs a namespace's shoot-specific settings when they change (not on every
// probe: a seed has up to a thousand namespaces probed every few seconds).
func (p *prober) noteShootSettings(ns string, s ShootSettings, grace time.Duration, log logrus.FieldLogger) {
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

// cleanHistory deletes the namespace's finished probe Jobs beyond the history limits.
func (p *prober) cleanHistory(ctx context.Context, ns string) error {
	objs, err := p.jobInf.GetIndexer().ByIndex(jobTargetIndex, ns)
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
		p.log.WithFields(logrus.Fields{"namespace": ns, "jobs": deleted}).Debug("Removed finished probe Jobs beyond the history limits.")
	}
	if err != nil {
		return fmt.Errorf("history clean-up: %w", err)
	}
	return nil
}

func (p *prober) processNext(ctx context.Context) bool {
	ns, shutdown := p.queue.Get()
	if shutdown {
		return false
	}
	defer p.queue.Done(ns)
	err := p.reconcile(ctx, ns)
	switch {
	case err == nil, ctx.Err() != nil:
		p.queue.Forget(ns)
	case p.queue.NumRequeues(ns) < maxRetries:
		p.queue.AddRateLimited(ns)
	default:
		p.queue.Forget(ns)
		p.log.WithError(err).WithField("namespace", ns).Error("Giving up on this probe turn; the next comes with the next interval.")
		p.schedule(ns, p.now())
	}
	return true
}

// lead runs the prober's workers until ctx ends.
func (p *prober) lead(ctx context.Context, workers int) {
	p.leading.Store(true)
	defer p.leading.Store(false)
	cfg := p.conf().cfg
	p.log.WithFields(logrus.Fields{"selector": cfg.Selector().String(), "interval": cfg.Interval().String(),
		"initialDelay": cfg.Delay().String(), "jobRunDuration": cfg.RunDuration().String()}).Info("Active: probing the selected namespaces.")
	p.enqueueAll()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for p.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	p.queue.ShutDown()
	wg.Wait()
}
