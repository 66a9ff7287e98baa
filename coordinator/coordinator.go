// Package coordinator is depwatch's always-on part: it watches the EndpointSlices (or
// legacy Endpoints) of the configured services and launches weeder Jobs: armed when a
// service goes down (Ready → notReady), so the Job reaps the moment it is back; unarmed when
// it comes back without an armed one (notReady → Ready); plus a catch-up on start and on
// winning leadership.
//
// Flow: informer event → handler (key <namespace>/<service>, note when seen) → workqueue →
// reconcile (read the cache, Decide(prev, now) gives the edge) → the service's active weeder
// Jobs → PlanWeeder(edge, arm, active) → one action (launch, arm, keep or stop a weeder Job
// through package jobs, record an Event, count it). The coordinator holds no right to delete
// pods.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/depwatch/depwatch/jobs"
)

// maxRetries bounds the retries of one failed launch (rate-limited, ~5 ms doubling).
const maxRetries = 8

// Reasons of the Events the coordinator records on Services.
const (
	EventWeederStarted = "WeederStarted"
	// EventWeederStopped: the service went down again while its weeder ran.
	EventWeederStopped = "WeederStopped"
	EventWeederFailed  = "WeederFailed"
	// EventWeederArmed: the service went down; its weeder was launched armed.
	EventWeederArmed = "WeederArmed"
)

// Deps is what the coordinator runs with.
type Deps struct {
	Client kubernetes.Interface
	// Dynamic reads Gardener's Cluster resources (prober); nil: they are not looked for.
	Dynamic dynamic.Interface
	Config  *Config
	Options Options
	Log     logrus.FieldLogger
	Metrics *Metrics
	// Template is the config's jobTemplate with Namespace and Image resolved.
	Template jobs.Template
	// Resolve fills a reloaded config's jobTemplate as Template was filled at start (see
	// ResolveTemplate); nil: an unset image or namespace keeps Template's.
	Resolve func(context.Context, jobs.Template) (jobs.Template, error)
	// Recorder records Events; nil: Run builds one that writes to the API server.
	Recorder record.EventRecorder
	// Identity in the leader election (default: host name + random suffix).
	Identity string
	// Now is the clock (tests).
	Now func() time.Time
}

// Coordinator watches the configured services and launches weeder Jobs.
type Coordinator struct {
	client   kubernetes.Interface
	opts     Options
	log      logrus.FieldLogger
	metrics  *Metrics
	recorder record.EventRecorder
	now      func() time.Time

	// cur is the running config; a reload swaps it whole (see reload.go). Each reconcile
	// reads it once, so one decision never mixes two configs.
	cur atomic.Pointer[live]
	// base is the config the informers were built from: what a reload cannot change.
	base    *Config
	resolve func(context.Context, jobs.Template) (jobs.Template, error)
	reload  reloadState

	src   source                    // nil when no service is configured (prober only)
	pr    *prober                   // nil without a prober section
	nsInf cache.SharedIndexInformer // nil unless namespaces.selector is set
	queue workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	states map[string]*serviceState

	synced atomic.Bool
}

// serviceState is what the coordinator remembers of one <namespace>/<service>.
type serviceState struct {
	known, ready bool
	// observedAt is when the first not-yet-reconciled event for the service arrived.
	observedAt time.Time
	// catchUp: found Ready with crash-looping dependents; launch on the next reconcile.
	catchUp bool
	// pending is the action owed for the last edge (kept across retries until it is done or
	// the service changes again).
	pending *pendingLaunch
}

type pendingLaunch struct {
	reason string
	at     time.Time
}

// New builds a coordinator and its informers (not started).
func New(d Deps) (*Coordinator, error) {
	if d.Config == nil || d.Client == nil || d.Log == nil {
		return nil, errors.New("coordinator: client, config and log are required")
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics("dev")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Options.ConcurrentReconciles < 1 {
		d.Options.ConcurrentReconciles = 1
	}
	c := &Coordinator{
		client:   d.Client,
		opts:     d.Options,
		log:      d.Log,
		metrics:  d.Metrics,
		recorder: d.Recorder,
		now:      d.Now,
		base:     d.Config,
		resolve:  d.Resolve,
		states:   map[string]*serviceState{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "depwatch-coordinator"}),
	}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{} // replaced in Run
	}
	c.cur.Store(newLive(d.Client, d.Config, d.Template))
	c.metrics.configLoaded(d.Now())
	if needsNamespaceInformer(d.Config) {
		c.nsInf = coreinformers.NewNamespaceInformer(d.Client, 0, cache.Indexers{})
		_ = c.nsInf.SetTransform(stripManagedFields)
	}
	if d.Config.Prober != nil {
		pr, err := newProber(c, d)
		if err != nil {
			return nil, err
		}
		c.pr = pr
	}
	if len(d.Config.Services()) == 0 {
		return c, nil
	}
	if d.Options.UseEndpoints || d.Config.UseEndpoints {
		c.src = newEndpointsSource(d.Client, d.Config.Services())
	} else {
		src, err := newSliceSource(d.Client, d.Config.Services())
		if err != nil {
			return nil, err
		}
		c.src = src
	}
	if _, err := c.src.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.onEvent,
		UpdateFunc: func(_, obj any) { c.onEvent(obj) },
		DeleteFunc: c.onEvent,
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// onEvent is the informer handler: note when the event was seen and queue the service.
func (c *Coordinator) onEvent(obj any) {
	key, ok := c.src.KeyOf(obj)
	if !ok || !c.relevant(c.live(), key) {
		return
	}
	now := c.now()
	c.mu.Lock()
	st := c.state(key)
	if st.observedAt.IsZero() {
		st.observedAt = now
	}
	c.mu.Unlock()
	c.queue.Add(key)
}

// state returns (creating) the state of key; c.mu must be held.
func (c *Coordinator) state(key string) *serviceState {
	st, ok := c.states[key]
	if !ok {
		st = &serviceState{}
		c.states[key] = st
	}
	return st
}

// relevant: a service configured in l, in a namespace l watches.
func (c *Coordinator) relevant(l *live, key string) bool {
	ns, svc := splitKey(key)
	if !l.configured(svc) {
		return false
	}
	return c.watched(l, ns)
}

func (c *Coordinator) watched(l *live, ns string) bool {
	if len(l.names) > 0 && !l.names[ns] {
		return false
	}
	if c.nsInf == nil {
		return true
	}
	obj, exists, err := c.nsInf.GetIndexer().GetByKey(ns)
	if err != nil || !exists {
		return false
	}
	n, ok := obj.(*corev1.Namespace)
	return ok && l.nsSel.Matches(labels.Set(n.Labels))
}

// reconcile brings one service's state up to date and performs the action it calls for.
func (c *Coordinator) reconcile(ctx context.Context, key string) error {
	l := c.live()
	var obs Observation
	if c.relevant(l, key) {
		var err error
		if obs, err = c.src.Observe(key); err != nil {
			return err
		}
	}

	c.mu.Lock()
	st := c.state(key)
	prev := Observation{Known: st.known, Ready: st.ready}
	edge := Decide(prev, obs)
	if !obs.Known {
		// Deleted (or no longer watched): forget it; never launch on a delete. A weeder of a
		// service whose namespace is being deleted is stopped (best effort, no retry).
		if st.ready {
			c.metrics.ServicesReady.Dec()
		}
		delete(c.states, key)
		c.mu.Unlock()
		// A service a reload removed from the config is only forgotten: its selectors are gone.
		if ns, svc := splitKey(key); edge == EdgeGone && l.configured(svc) {
			log := c.log.WithFields(logrus.Fields{"namespace": ns, "service": svc})
			if err := c.actOnEdge(ctx, l, key, &pendingLaunch{reason: "gone", at: c.now()}, EdgeGone, log); err != nil {
				log.WithError(err).Warn("The service's endpoints are gone; could not check for a weeder Job to stop.")
			}
		}
		return nil
	}
	if obs.Ready != st.ready {
		if obs.Ready {
			c.metrics.ServicesReady.Inc()
		} else {
			c.metrics.ServicesReady.Dec()
		}
	}
	st.known, st.ready = true, obs.Ready
	seenAt := st.observedAt
	if seenAt.IsZero() {
		seenAt = c.now()
	}
	st.observedAt = time.Time{}
	switch edge {
	case EdgeReady:
		st.pending = &pendingLaunch{reason: jobs.TriggerReady, at: seenAt}
		c.metrics.Triggers.WithLabelValues(string(jobs.KindWeeder), jobs.TriggerReady).Inc()
	case EdgeOutage:
		st.pending = &pendingLaunch{reason: jobs.TriggerOutage, at: seenAt}
		c.metrics.Triggers.WithLabelValues(string(jobs.KindWeeder), jobs.TriggerOutage).Inc()
	}
	if st.catchUp {
		st.catchUp = false
		if obs.Ready && st.pending == nil {
			st.pending = &pendingLaunch{reason: jobs.TriggerCatchUp, at: seenAt}
			c.metrics.Triggers.WithLabelValues(string(jobs.KindWeeder), jobs.TriggerCatchUp).Inc()
		}
	}
	if st.pending != nil && (st.pending.reason == jobs.TriggerOutage) == obs.Ready {
		// The service changed again before the owed action was done (a retry): the edge it
		// was for is over; the new edge, if any, set its own above.
		st.pending = nil
	}
	p := st.pending
	c.mu.Unlock()

	ns, svc := splitKey(key)
	log := c.log.WithFields(logrus.Fields{"namespace": ns, "service": svc})
	log.WithFields(logrus.Fields{"ready": obs.Ready, "wasKnown": prev.Known, "wasReady": prev.Ready, "edge": edge.String()}).Debug("Service readiness reconciled.")
	if p == nil {
		return nil
	}
	edgeOf := EdgeReady
	if p.reason == jobs.TriggerOutage {
		edgeOf = EdgeOutage
	}
	if err := c.actOnEdge(ctx, l, key, p, edgeOf, log); err != nil {
		return err
	}
	c.mu.Lock()
	if st, ok := c.states[key]; ok && st.pending == p {
		st.pending = nil
	}
	c.mu.Unlock()
	return nil
}

// weederSpec builds the service's weeder Job spec for a trigger from config l; armed adds the gate.
func weederSpec(l *live, key string, p *pendingLaunch, armed bool) (jobs.Spec, error) {
	ns, svc := splitKey(key)
	cfg := l.cfg
	var grace *time.Duration
	if cfg.GracePeriod != nil {
		grace = &cfg.GracePeriod.Duration
	}
	return jobs.Weeder(jobs.WeederSpec{
		Namespace:     ns,
		Service:       svc,
		Selectors:     cfg.Selectors(svc),
		WatchDuration: cfg.Watch(),
		GracePeriod:   grace,
		Trigger:       p.reason,
		TriggerTime:   p.at,
		Armed:         armed,
		MaxWait:       cfg.MaxWait(),
		ReapCooldown:  cfg.Cooldown(),
	})
}

// actOnEdge finds the service's active weeder Jobs (and, on an outage or when it is gone,
// whether the service is going away), lets PlanWeeder decide, and does it.
func (c *Coordinator) actOnEdge(ctx context.Context, l *live, key string, p *pendingLaunch, edge Edge, log logrus.FieldLogger) error {
	ns, svc := splitKey(key)
	spec, err := weederSpec(l, key, p, false)
	if err != nil {
		return err // validated at load; cannot happen
	}
	active, err := l.launcher.Active(ctx, spec)
	if err != nil {
		c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), string(jobs.ResultError)).Inc()
		log.WithError(err).WithField("trigger", p.reason).Error("Could not list the service's weeder Jobs; will retry.")
		return err
	}
	current, armedJob := NoWeeder, ""
	for i := range active {
		if jobs.Armed(&active[i]) {
			current, armedJob = ArmedWeeder, active[i].Name
			break
		}
		current = UnarmedWeeder
	}
	in := WeederInput{Edge: edge, Arm: l.cfg.Arm(svc), Active: current}
	going := ""
	if edge == EdgeOutage || edge == EdgeGone {
		if going, err = c.goingAway(ctx, ns, svc, edge == EdgeOutage); err != nil {
			log.WithError(err).Error("Could not tell whether the service is being deleted; will retry.")
			return err
		}
		in.Going = going != ""
	}
	action := PlanWeeder(in)
	if in.Going {
		log = log.WithField("going", going)
	}
	switch action {
	case ActionKeepWeeder:
		c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), string(jobs.ResultKept)).Inc()
		what := "it reaps the moment the service is Ready, then for watchDuration"
		if edge == EdgeOutage {
			what = "it pauses while the service is down and reaps again when it is Ready, until its watchDuration ends"
		}
		log.WithFields(logrus.Fields{"job": l.launcher.Template.Namespace + "/" + armedJob, "trigger": p.reason, "result": string(jobs.ResultKept)}).
			Infof("An armed weeder Job is active for the service: no new Job; %s.", what)
		return nil
	case ActionStopWeeder:
		return c.stopWeeder(ctx, l, key, active, going, log)
	case ActionArmWeeder, ActionLaunchWeeder:
		return c.launchWeeder(ctx, l, key, p, action == ActionArmWeeder, active, log)
	default:
		switch {
		case in.Going:
			log.Infof("Service has no ready endpoint any more and is going away (%s): no weeder is armed.", going)
		case edge == EdgeOutage:
			log.WithField("trigger", p.reason).Info("Service has no ready endpoint any more; no weeder Job was running.")
		}
		return nil
	}
}

// goingAway says why the service is not coming back ("" when it may): its namespace is
// being deleted or is gone, or (withService) the Service itself is gone or being deleted.
func (c *Coordinator) goingAway(ctx context.Context, ns, svc string, withService bool) (string, error) {
	n, err := c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "namespace gone", nil
	case err != nil:
		return "", err
	case n.DeletionTimestamp != nil || n.Status.Phase == corev1.NamespaceTerminating:
		return "namespace being deleted", nil
	case !withService:
		return "", nil
	}
	s, err := c.client.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "service gone", nil
	case err != nil:
		return "", err
	case s.DeletionTimestamp != nil:
		return "service being deleted", nil
	}
	return "", nil
}

// launchWeeder launches the service's weeder Job over active, the weeder Jobs actOnEdge has
// just listed (so they are not listed twice).
func (c *Coordinator) launchWeeder(ctx context.Context, l *live, key string, p *pendingLaunch, armed bool, active []batchv1.Job, log logrus.FieldLogger) error {
	ns, svc := splitKey(key)
	spec, err := weederSpec(l, key, p, armed)
	if err != nil {
		return err // validated at load; cannot happen
	}
	out, err := l.launcher.LaunchOver(ctx, spec, active)
	c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), string(out.Result)).Inc()
	if err != nil {
		log.WithError(err).WithField("trigger", p.reason).Error("Could not launch the weeder Job; will retry.")
		return err
	}
	latency := c.now().Sub(p.at)
	c.metrics.TriggerToJob.WithLabelValues(string(jobs.KindWeeder)).Observe(latency.Seconds())
	fields := logrus.Fields{
		"job":       out.Job.Namespace + "/" + out.Job.Name,
		"trigger":   p.reason,
		"result":    string(out.Result),
		"replaced":  out.Replaced,
		"latencyMs": latency.Milliseconds(),
		"armed":     armed,
	}
	if armed {
		log.WithFields(fields).WithField("maxWait", l.cfg.MaxWait().String()).Info("The service went down: launched its weeder Job armed; it starts reaping the moment the service is Ready again.")
		c.recordOnService(ctx, ns, svc, corev1.EventTypeNormal, EventWeederArmed,
			fmt.Sprintf("Armed weeder Job %s/%s (trigger %s%s): it restarts crash-looping dependents from the moment the service is Ready again (waiting at most %s), for %s",
				out.Job.Namespace, out.Job.Name, p.reason, replacedNote(out.Replaced), l.cfg.MaxWait(), l.cfg.Watch()))
		return nil
	}
	log.WithFields(fields).Info("Launched a weeder Job.")
	c.recordOnService(ctx, ns, svc, corev1.EventTypeNormal, EventWeederStarted,
		fmt.Sprintf("Started weeder Job %s/%s (trigger %s%s): restarting crash-looping dependents for %s",
			out.Job.Namespace, out.Job.Name, p.reason, replacedNote(out.Replaced), l.cfg.Watch()))
	return nil
}

// stopWeeder deletes the service's running weeder Job, if any: the service went down again
// and arming is off, or (going says why) it is going away.
func (c *Coordinator) stopWeeder(ctx context.Context, l *live, key string, active []batchv1.Job, going string, log logrus.FieldLogger) error {
	ns, svc := splitKey(key)
	stopped, err := l.launcher.Delete(ctx, active)
	if err != nil {
		log.WithError(err).Error("The service went down but its running weeder Job could not be stopped; will retry.")
		return err
	}
	if len(stopped) == 0 {
		log.Info("Service has no ready endpoint any more; no weeder Job was running.")
		return nil
	}
	c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), "stopped").Add(float64(len(stopped)))
	if going != "" {
		log.WithField("jobs", stopped).Infof("The service is going away (%s): stopped its weeder Job.", going)
		c.recordOnService(ctx, ns, svc, corev1.EventTypeNormal, EventWeederStopped,
			fmt.Sprintf("Stopped weeder Job(s) %v: the service is going away (%s)", stopped, going))
		return nil
	}
	log.WithField("jobs", stopped).Info("Service has no ready endpoint any more: stopped its weeder Job, so dependents are not restarted while they cannot work.")
	c.recordOnService(ctx, ns, svc, corev1.EventTypeNormal, EventWeederStopped,
		fmt.Sprintf("Stopped weeder Job(s) %v: the service has no ready endpoint; a new weeder starts when it is Ready again", stopped))
	return nil
}

func replacedNote(r []string) string {
	if len(r) == 0 {
		return ""
	}
	return fmt.Sprintf(", replacing %v", r)
}

// recordOnService records an Event on the Service (by reference if it cannot be read).
func (c *Coordinator) recordOnService(ctx context.Context, ns, svc, typ, reason, msg string) {
	var obj runtime.Object = &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: ns, Name: svc}
	if s, err := c.client.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{}); err == nil {
		obj = s
	}
	c.recorder.Event(obj, typ, reason, msg)
}

func (c *Coordinator) processNext(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	err := c.reconcile(ctx, key)
	switch {
	case err == nil:
		c.queue.Forget(key)
	case ctx.Err() != nil:
		c.queue.Forget(key)
	case c.queue.NumRequeues(key) < maxRetries:
		c.queue.AddRateLimited(key)
	default:
		c.queue.Forget(key)
		c.mu.Lock()
		if st, ok := c.states[key]; ok {
			st.pending = nil
		}
		c.mu.Unlock()
		ns, svc := splitKey(key)
		c.log.WithError(err).WithFields(logrus.Fields{"namespace": ns, "service": svc}).Error("Giving up launching the weeder Job.")
		c.recordOnService(ctx, ns, svc, corev1.EventTypeWarning, EventWeederFailed, "Could not launch a weeder Job: "+err.Error())
	}
	return true
}

// lead runs the workers and the catch-up until ctx ends, then waits for the workers.
func (c *Coordinator) lead(ctx context.Context) {
	c.metrics.Leader.Set(1)
	defer c.metrics.Leader.Set(0)
	c.log.WithField("workers", c.opts.ConcurrentReconciles).Info("Active: handling service transitions.")

	var wg sync.WaitGroup
	if c.pr != nil {
		wg.Go(func() { c.pr.lead(ctx, c.opts.ConcurrentReconciles) })
	}
	if c.src == nil {
		<-ctx.Done()
		c.queue.ShutDown()
		wg.Wait()
		return
	}
	for i := 0; i < c.opts.ConcurrentReconciles; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	if n, err := c.CatchUp(ctx); err != nil && ctx.Err() == nil {
		c.log.WithError(err).Error("Catch-up incomplete.")
	} else if err == nil {
		c.log.WithField("services", n).Info("Catch-up done: Ready services with crash-looping dependents were queued.")
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

// CatchUp queues a weeder launch for every configured service that is Ready while at least
// one of its dependents (pods matching its selectors in its namespace) is in CrashLoopBackOff.
// Pods are listed once per distinct selector across the cluster (paginated), not per namespace.
func (c *Coordinator) CatchUp(ctx context.Context) (int, error) {
	if c.src == nil {
		return 0, nil
	}
	l := c.live()
	readyNS := map[string][]string{} // service → namespaces where it is Ready
	for _, key := range c.src.Keys() {
		if !c.relevant(l, key) {
			continue
		}
		obs, err := c.src.Observe(key)
		if err != nil {
			return 0, err
		}
		if obs.Ready {
			ns, svc := splitKey(key)
			readyNS[svc] = append(readyNS[svc], ns)
		}
	}
	crashing := map[string]map[string]bool{} // selector → namespaces with a crash-looping pod
	queued := 0
	for _, svc := range l.cfg.Services() {
		if len(readyNS[svc]) == 0 {
			continue
		}
		sels, err := jobs.SelectorStrings(l.cfg.Selectors(svc))
		if err != nil {
			return queued, err
		}
		hit := map[string]bool{}
		for _, sel := range sels {
			nss, ok := crashing[sel]
			if !ok {
				if nss, err = c.crashLoopingNamespaces(ctx, sel); err != nil {
					return queued, err
				}
				crashing[sel] = nss
			}
			for ns := range nss {
				hit[ns] = true
			}
		}
		for _, ns := range readyNS[svc] {
			if !hit[ns] {
				continue
			}
			key := ns + "/" + svc
			c.mu.Lock()
			c.state(key).catchUp = true
			c.mu.Unlock()
			c.queue.Add(key)
			queued++
			c.log.WithFields(logrus.Fields{"namespace": ns, "service": svc}).Info("Catch-up: service is Ready and a dependent is in CrashLoopBackOff.")
		}
	}
	return queued, nil
}

func (c *Coordinator) crashLoopingNamespaces(ctx context.Context, selector string) (map[string]bool, error) {
	out := map[string]bool{}
	opts := metav1.ListOptions{LabelSelector: selector, Limit: 500}
	for {
		list, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing pods %q for catch-up: %w", selector, err)
		}
		for i := range list.Items {
			if CrashLooping(&list.Items[i]) {
				out[list.Items[i].Namespace] = true
			}
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// informers the coordinator runs.
func (c *Coordinator) informers() []cache.SharedIndexInformer {
	var infs []cache.SharedIndexInformer
	if c.src != nil {
		infs = append(infs, c.src.Informer())
	}
	if c.nsInf != nil {
		infs = append(infs, c.nsInf)
	}
	if c.pr != nil {
		infs = append(infs, c.pr.informers()...)
	}
	return infs
}

// Ready reports whether the caches have synced (the /readyz condition).
func (c *Coordinator) Ready() bool { return c.synced.Load() }
