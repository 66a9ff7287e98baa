// Package weeder is the coordinator's weeder controller, end to end: its config section, its
// pure decisions, how its Jobs are described, its metrics. It watches the EndpointSlices (or
// legacy Endpoints) of the configured services and launches weeder Jobs: armed when a
// service goes down (Ready → notReady), so the Job reaps the moment it is back; unarmed when
// it comes back without an armed one (notReady → Ready); and a catch-up weeder when a service
// is first seen Ready (on start, on winning leadership, for a new service) while one of its
// dependents is crash-looping.
//
// Flow: informer event → handler (folds the event into the service's own view; an edge is
// recorded with its time, when it happens) → workqueue → reconcile (the last recorded edge,
// however late: an outage that began and ended while the key waited gets the weeder its
// return calls for) → the service's active weeder Jobs → PlanWeeder → one action (launch,
// arm, keep or stop a weeder Job through package jobs, record an Event, count it). A gone
// service without a weeder and a catch-up check read only the informer caches. The
// coordinator holds no right to delete pods.
package weeder

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
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
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
}

// Deps is what the weeder runs with.
type Deps struct {
	Client kubernetes.Interface
	// Config is the weeder's section of the config at start: the informers are built for it.
	Config  *Config
	Options Options
	Log     logrus.FieldLogger
	Metrics *Metrics
	// Template is the config's jobTemplate with Namespace and Image resolved.
	Template jobs.Template
	// Recorder records Events on the Services; nil: they are dropped.
	Recorder record.EventRecorder
	// Now is the clock (tests).
	Now func() time.Time
}

// Controller watches the configured services and launches weeder Jobs.
type Controller struct {
	client   kubernetes.Interface
	opts     Options
	log      logrus.FieldLogger
	metrics  *Metrics
	recorder record.EventRecorder
	now      func() time.Time

	// cur is the running config; a reload swaps it whole (Apply). Each reconcile reads it
	// once, so one decision never mixes two configs.
	cur atomic.Pointer[live]
	// base is the config the informers were built from: what a reload cannot change.
	base *Config

	src   source      // the configured services' endpoints
	deps  *dependents // the configured dependents' pods
	wjobs *weederJobs // weeder Jobs
	// leading: only the leader counts failed Jobs, so replicas do not count each one twice.
	leading atomic.Bool
	nsInf   cache.SharedIndexInformer // is a namespace going away, does it match
	// nsSelect: namespaces are chosen by their labels (namespaces.selector).
	nsSelect bool
	batch    *batcher
	queue    workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	states map[string]*serviceState
	// expecting: weeder Jobs created (name → when) that the Job cache has not shown yet.
	expecting map[string]time.Time
}

// serviceState is what the coordinator knows of one configured <namespace>/<service>. The
// event handler folds every event into view and seen and records each edge in pending, when
// it happens; reconcile acts on pending however late the queue reaches the key, so an outage
// that begins and ends while the key waits still gets its weeder.
type serviceState struct {
	view view
	// seen is the readiness after the last event the handler folded.
	seen Observation
	// relevant: configured and in a watched namespace when last looked at.
	relevant bool
	// counted: the service is in the services_ready gauge.
	counted bool
	// pending is the edge owed an action: the last one the handler recorded. A newer edge
	// replaces it, because the older one is over (its outage ended, or its return was
	// followed by a new outage): the action for the newer one is what can still help.
	pending *pendingLaunch
	// launched is the last weeder Job this coordinator created for the service, until the
	// Job cache has caught up with it (an expectation: the service is covered meanwhile).
	launched      string
	launchedArmed bool
	// launchedOwn: the Job covers this service alone (it may be replaced or stopped for it).
	launchedOwn bool
	launchedUID types.UID
}

// pendingLaunch is an edge owed an action.
type pendingLaunch struct {
	edge Edge
	// reason is the Job trigger: ready, outage or catch-up ("gone" for EdgeGone).
	reason string
	// at is when the handler saw the edge: the weeder's latency counts from it.
	at time.Time
	// check: a catch-up (a Ready service first seen, or found Ready on taking the lead): act
	// only if a dependent is crash-looping, and keep any weeder already active.
	check bool
	// counted: in triggers_total (a retry does not count it again).
	counted bool
}

// launchedGrace is how long a Job this coordinator created is assumed active while the Job
// cache has not caught up with it yet.
const launchedGrace = 2 * time.Minute

// New builds the weeder and its informers (not started). The config must name at least one
// service.
func New(d Deps) (*Controller, error) {
	if d.Config == nil || d.Client == nil || d.Log == nil || d.Metrics == nil {
		return nil, errors.New("weeder: client, config, log and metrics are required")
	}
	if len(d.Config.Services()) == 0 {
		return nil, errors.New("weeder: no service is configured")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Options.Batching == (Batching{}) {
		d.Options.Batching = DefaultBatching() // Options not from the flags (tests, embedding)
	}
	if d.Options.ConcurrentReconciles < 1 {
		d.Options.ConcurrentReconciles = 1
	}
	c := &Controller{
		client:    d.Client,
		opts:      d.Options,
		log:       d.Log,
		metrics:   d.Metrics,
		recorder:  d.Recorder,
		now:       d.Now,
		base:      d.Config,
		states:    map[string]*serviceState{},
		expecting: map[string]time.Time{},
		batch:     newBatcher(),
		nsSelect:  d.Config.NeedsNamespaceInformer(),
		queue:     ctrl.NewQueue("depwatch-coordinator"),
	}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{}
	}
	c.cur.Store(newLive(d.Client, d.Config, d.Template))
	c.nsInf = coreinformers.NewNamespaceInformer(d.Client, 0, cache.Indexers{})
	_ = c.nsInf.SetTransform(ctrl.StripManagedFields)
	if d.Config.UseEndpoints {
		c.src = newEndpointsSource(d.Client, d.Config.Services())
	} else {
		src, err := newSliceSource(d.Client, d.Config.Services())
		if err != nil {
			return nil, err
		}
		c.src = src
	}
	deps, err := newDependents(d.Client, d.Config)
	if err != nil {
		return nil, err
	}
	c.deps = deps
	c.wjobs = newWeederJobs(d.Client, d.Template.Namespace)
	// A weeder Job that finishes or goes frees a place under --max-weeder-jobs.
	if _, err := c.wjobs.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.jobSeen(obj) },
		UpdateFunc: func(old, obj any) {
			if c.leading.Load() {
				c.metrics.CountFailed(string(jobs.KindWeeder), old, obj)
			}
			c.batch.poke()
		},
		DeleteFunc: func(any) { c.batch.poke() },
	}); err != nil {
		return nil, err
	}
	if _, err := c.src.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onEvent(obj, false) },
		UpdateFunc: func(_, obj any) { c.onEvent(obj, false) },
		DeleteFunc: func(obj any) { c.onEvent(obj, true) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Apply makes cfg and tpl (resolved) the running config from the next decision on. relook:
// which services count may have changed (namespaces or services edited), so each known one is
// looked at again.
func (c *Controller) Apply(cfg *Config, tpl jobs.Template, relook bool) {
	c.cur.Store(newLive(c.client, cfg, tpl))
	if relook {
		c.relook()
	}
}

// Keys is the configured services whose endpoints the cache holds (<namespace>/<service>).
func (c *Controller) Keys() []string { return c.src.Keys() }

// onEvent is the informer handler: fold the event into the service's view and, when it makes
// an edge, record it with its time and queue the service. It makes no API call.
func (c *Controller) onEvent(obj any, deleted bool) {
	key, ok := c.src.KeyOf(obj)
	if !ok {
		return
	}
	if _, svc := splitKey(key); !c.base.Configured(svc) {
		return // legacy Endpoints of every service in the cluster reach the handler
	}
	l := c.live()
	now := c.now()
	c.mu.Lock()
	st := c.state(key)
	prev := st.seen
	obs := c.src.Fold(&st.view, obj, deleted)
	st.seen = obs
	relevant := c.relevant(l, key)
	st.relevant = relevant
	c.count(st)
	var p *pendingLaunch
	switch edge := Decide(prev, obs); {
	case !relevant:
	case edge == EdgeReady:
		p = &pendingLaunch{edge: EdgeReady, reason: jobs.TriggerReady, at: now}
	case edge == EdgeOutage:
		p = &pendingLaunch{edge: EdgeOutage, reason: jobs.TriggerOutage, at: now}
	case edge == EdgeGone:
		p = &pendingLaunch{edge: EdgeGone, reason: "gone", at: now}
	case !prev.Known && obs.Ready:
		// A first sighting says nothing of what happened before it: if a dependent is
		// crash-looping, an outage the coordinator never saw may have just ended.
		p = &pendingLaunch{edge: EdgeReady, reason: jobs.TriggerCatchUp, at: now, check: true}
	}
	if p != nil {
		if old := st.pending; old != nil && !old.check && old.edge != p.edge {
			// The queue had not reached the older edge when this one came: it is over, and
			// the action for this one is what can still help.
			c.metrics.EdgesOvertaken.WithLabelValues(old.edge.String()).Inc()
		}
		st.pending = p
	}
	if !obs.Known && st.pending == nil {
		delete(c.states, key)
	}
	c.mu.Unlock()
	if p != nil {
		c.queue.Add(key)
	}
}

// count keeps the services_ready gauge; c.mu must be held.
func (c *Controller) count(st *serviceState) {
	if counted := st.relevant && st.seen.Ready; counted != st.counted {
		st.counted = counted
		if counted {
			c.metrics.ServicesReady.Inc()
		} else {
			c.metrics.ServicesReady.Dec()
		}
	}
}

// relook applies a reloaded config to every known service: one it no longer covers is
// forgotten (its owed action dropped), one it now covers counts as first seen.
func (c *Controller) relook() {
	l := c.live()
	now := c.now()
	var keys []string
	c.mu.Lock()
	for key, st := range c.states {
		rel := c.relevant(l, key)
		switch {
		case !rel:
			st.pending = nil
		case !st.relevant && st.seen.Ready:
			st.pending = &pendingLaunch{edge: EdgeReady, reason: jobs.TriggerCatchUp, at: now, check: true}
			keys = append(keys, key)
		}
		st.relevant = rel
		c.count(st)
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.queue.Add(k)
	}
}

// state returns (creating) the state of key; c.mu must be held.
func (c *Controller) state(key string) *serviceState {
	st, ok := c.states[key]
	if !ok {
		st = &serviceState{}
		c.states[key] = st
	}
	return st
}

// relevant: a service configured in l, in a namespace l watches.
func (c *Controller) relevant(l *live, key string) bool {
	ns, svc := splitKey(key)
	if !l.configured(svc) {
		return false
	}
	return c.watched(l, ns)
}

func (c *Controller) watched(l *live, ns string) bool {
	if len(l.names) > 0 && !l.names[ns] {
		return false
	}
	if !c.nsSelect {
		return true
	}
	obj, exists, err := c.nsInf.GetIndexer().GetByKey(ns)
	if err != nil || !exists {
		return false
	}
	n, ok := obj.(*corev1.Namespace)
	return ok && l.nsSel.Matches(labels.Set(n.Labels))
}

// reconcile acts on the edge the handler recorded last for one service, once.
func (c *Controller) reconcile(ctx context.Context, key string) error {
	c.mu.Lock()
	st := c.states[key]
	var p *pendingLaunch
	var seen Observation
	if st != nil {
		p, seen = st.pending, st.seen
	}
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	if err := c.act(ctx, c.live(), key, st, p, seen); err != nil {
		return err
	}
	c.mu.Lock()
	if st.pending == p {
		st.pending = nil
		if !st.seen.Known && c.states[key] == st {
			delete(c.states, key)
		}
	}
	c.mu.Unlock()
	return nil
}

// act performs the action one pending edge calls for.
func (c *Controller) act(ctx context.Context, l *live, key string, st *serviceState, p *pendingLaunch, seen Observation) error {
	if !c.relevant(l, key) {
		return nil // a reload took the service or its namespace out since the edge
	}
	ns, svc := splitKey(key)
	log := c.log.WithFields(logrus.Fields{"namespace": ns, "service": svc})
	switch {
	case p.edge == EdgeGone:
		if !c.mayHaveWeeder(key, st) {
			log.Debug("The service's endpoints are gone and it has no weeder Job: nothing to do.")
			return nil
		}
		return c.actOnEdge(ctx, l, key, st, p, EdgeGone, log)
	case p.check:
		if !seen.Ready {
			return nil // down again: its outage edge is pending, or nothing is to do
		}
		sels, err := jobs.SelectorStrings(l.cfg.Selectors(svc))
		if err != nil {
			return err // validated at load; cannot happen
		}
		pod, err := c.deps.crashLooping(ctx, c.client, ns, sels)
		if err != nil {
			return err
		}
		if pod == "" {
			log.Debug("Service is Ready and none of its dependents is crash-looping: no catch-up weeder.")
			return nil
		}
		c.countTrigger(p)
		log.WithField("pod", pod).Info("Catch-up: the service is Ready and a dependent is in CrashLoopBackOff; making sure a weeder restarts it.")
		return c.actOnEdge(ctx, l, key, st, p, EdgeReady, log)
	default:
		c.countTrigger(p)
		return c.actOnEdge(ctx, l, key, st, p, p.edge, log)
	}
}

func (c *Controller) countTrigger(p *pendingLaunch) {
	if !p.counted {
		p.counted = true
		c.metrics.Triggers.WithLabelValues(string(jobs.KindWeeder), p.reason).Inc()
	}
}

// mayHaveWeeder: the Job cache holds an active weeder Job of the service, or this
// coordinator launched one the cache has not caught up with yet.
func (c *Controller) mayHaveWeeder(key string, st *serviceState) bool {
	if len(c.wjobs.active(key)) > 0 {
		return true
	}
	if _, ok := c.batch.waitingFor(key); ok {
		return true
	}
	_, ok := c.expected(st)
	return ok
}

// expected: a weeder Job this coordinator created for the service that the Job cache has not
// shown yet (armed or not). Once the cache has shown it, the cache alone says whether it is
// still active.
func (c *Controller) expected(st *serviceState) (armed, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.expecting[st.launched]
	return st.launchedArmed, ok && st.launched != "" && c.now().Sub(at) < launchedGrace
}

// jobSeen is the Job informer's add: the Job is no longer only expected.
func (c *Controller) jobSeen(obj any) {
	if j, ok := obj.(*batchv1.Job); ok {
		c.mu.Lock()
		delete(c.expecting, j.Name)
		c.mu.Unlock()
	}
}

// activeWeederJobs counts the weeder Jobs active now: the cache's, plus those created that
// it has not shown yet.
func (c *Controller) activeWeederJobs() int {
	n := c.wjobs.count()
	now := c.now()
	c.mu.Lock()
	for name, at := range c.expecting {
		if now.Sub(at) >= launchedGrace {
			delete(c.expecting, name) // the cache missed it (deleted at once): stop counting it
			continue
		}
		n++
	}
	c.mu.Unlock()
	return n
}

// noteLaunch remembers the weeder Job just created for key (see expected).
func (c *Controller) noteLaunch(key string, job *batchv1.Job, armed, own bool) {
	name := job.Name
	c.mu.Lock()
	if !c.wjobs.has(c.live().tpl.Namespace, name) {
		c.expecting[name] = c.now()
	}
	if st, ok := c.states[key]; ok {
		st.launched, st.launchedArmed, st.launchedOwn, st.launchedUID = name, armed, own, job.UID
	}
	c.mu.Unlock()
}

// weederSpec builds the service's weeder Job spec for a trigger from config l; armed adds the gate.
func weederSpec(l *live, key string, p *pendingLaunch, armed bool) (jobs.Spec, error) {
	ns, svc := splitKey(key)
	w := weederSettings(l, p, armed)
	w.Namespace, w.Service, w.Selectors = ns, svc, l.cfg.Selectors(svc)
	return jobs.Weeder(w)
}

// weederSettings is what every weeder Job of config l shares, one service's or a batch's.
func weederSettings(l *live, p *pendingLaunch, armed bool) jobs.WeederSpec {
	cfg := l.cfg
	var grace *time.Duration
	if cfg.GracePeriod != nil {
		grace = &cfg.GracePeriod.Duration
	}
	return jobs.WeederSpec{
		WatchDuration: cfg.Watch(),
		GracePeriod:   grace,
		Trigger:       p.reason,
		TriggerTime:   p.at,
		Armed:         armed,
		MaxWait:       cfg.MaxWait(),
		ReapCooldown:  cfg.Cooldown(),
	}
}

// actOnEdge reads what covers the service (its active weeder Jobs from the cache, a Job just
// created, or a place in a batch being formed) and, on an outage or when it is gone, whether
// its namespace is going away; lets PlanWeeder decide, and does it. A decision that needs no
// action costs no API call.
func (c *Controller) actOnEdge(ctx context.Context, l *live, key string, st *serviceState, p *pendingLaunch, edge Edge, log logrus.FieldLogger) error {
	ns, svc := splitKey(key)
	active := c.wjobs.active(key)
	current, covering := NoWeeder, ""
	for _, j := range active {
		if jobs.Armed(j) {
			current, covering = ArmedWeeder, j.Name
			break
		}
		current, covering = UnarmedWeeder, j.Name
	}
	own := ownJobs(active)
	if current != ArmedWeeder {
		if armed, ok := c.expected(st); ok {
			current, covering = UnarmedWeeder, st.launched
			if armed {
				current = ArmedWeeder
			}
			c.mu.Lock()
			if st.launchedOwn { // not in the cache yet, but replaced or stopped like one that is
				own = append(own, batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: l.launcher.Template.Namespace, Name: st.launched, UID: st.launchedUID}})
			}
			c.mu.Unlock()
		}
	}
	if current != ArmedWeeder {
		if armed, ok := c.batch.waitingFor(key); ok {
			current, covering = UnarmedWeeder, "a batch Job being formed"
			if armed {
				current = ArmedWeeder
			}
		}
	}
	in := WeederInput{Edge: edge, Arm: l.cfg.Arm(svc), Active: current, CatchUp: p.check}
	going := ""
	if edge == EdgeOutage || edge == EdgeGone {
		var err error
		if going, err = c.goingAway(ctx, ns); err != nil {
			log.WithError(err).Error("Could not tell whether the service's namespace is being deleted; will retry.")
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
		c.observeEdge(p)
		fields := logrus.Fields{"job": l.launcher.Template.Namespace + "/" + covering, "trigger": p.reason, "result": string(jobs.ResultKept)}
		if current != ArmedWeeder {
			log.WithFields(fields).Info("A weeder Job is already restarting the service's crash-looping dependents: no new Job.")
			return nil
		}
		what := "it reaps the moment the service is Ready, then for watchDuration"
		if edge == EdgeOutage {
			what = "it pauses while the service is down and reaps again when it is Ready, until its watchDuration ends"
		}
		log.WithFields(fields).Infof("An armed weeder Job is active for the service: no new Job; %s.", what)
		return nil
	case ActionStopWeeder:
		c.batch.drop(key)
		return c.stopWeeder(ctx, l, key, p, own, going, log)
	case ActionArmWeeder, ActionLaunchWeeder:
		return c.launchWeeder(ctx, l, key, p, action == ActionArmWeeder, own, log)
	default:
		if in.Going {
			c.batch.drop(key)
		}
		switch {
		case in.Going:
			log.Infof("Service has no ready endpoint any more and is going away (%s): no weeder is armed.", going)
		case edge == EdgeOutage:
			log.WithField("trigger", p.reason).Info("Service has no ready endpoint any more; no weeder Job was running.")
		}
		return nil
	}
}

// ownJobs keeps the Jobs that cover one service only: those may be replaced or stopped for
// it; a batch Job goes on for its other services.
func ownJobs(active []*batchv1.Job) []batchv1.Job {
	var out []batchv1.Job
	for _, j := range active {
		if len(jobs.JobTargets(j)) == 1 {
			out = append(out, *j)
		}
	}
	return out
}

// goingAway says why a service of namespace ns is not coming back ("" when it may): the
// namespace is being deleted or is gone. Read from the namespace cache; only a namespace the
// cache does not hold (just created, or gone) costs an API read. A Service deleted on its own
// takes its EndpointSlices with it: that is EdgeGone, and its namespace stays.
func (c *Controller) goingAway(ctx context.Context, ns string) (string, error) {
	var n *corev1.Namespace
	if obj, ok, _ := c.nsInf.GetIndexer().GetByKey(ns); ok {
		n, _ = obj.(*corev1.Namespace)
	}
	if n == nil {
		got, err := c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "namespace gone", nil
		case err != nil:
			return "", err
		}
		n = got
	}
	if n.DeletionTimestamp != nil || n.Status.Phase == corev1.NamespaceTerminating {
		return "namespace being deleted", nil
	}
	return "", nil
}

// serviceGoing says why the Service is not coming back ("" when it may): it is gone or
// being deleted.
func (c *Controller) serviceGoing(ctx context.Context, ns, svc string) (string, error) {
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

// launchWeeder covers the service with a weeder: a Job of its own while launches are rare
// (replacing its own unarmed Job, if one runs), else a place in the batch being formed.
func (c *Controller) launchWeeder(ctx context.Context, l *live, key string, p *pendingLaunch, armed bool, own []batchv1.Job, log logrus.FieldLogger) error {
	ns, svc := splitKey(key)
	recent, waiting := c.batch.input(c.now(), c.opts.Batching.Window)
	if PlanLaunch(c.opts.Batching, LaunchInput{RecentOwn: recent, Waiting: waiting, Active: c.activeWeederJobs()}) == LaunchInBatch {
		c.batch.add(&batchItem{key: key, p: p, armed: armed, since: c.now()})
		log.WithFields(logrus.Fields{"trigger": p.reason, "armed": armed, "waiting": waiting + 1}).
			Info("Many services need a weeder at once: this one joins a batch weeder Job.")
		return nil
	}
	if armed {
		// A lone outage may be its Service being deleted (its pods going first): one read
		// spares a weeder that would wait maxWait for nothing. A storm's services are not
		// read one by one; a deleted one's target in a batch Job just waits out maxWait.
		if gone, err := c.serviceGoing(ctx, ns, svc); err != nil {
			log.WithError(err).Error("Could not tell whether the Service is being deleted; will retry.")
			return err
		} else if gone != "" {
			log.WithField("going", gone).Infof("Service has no ready endpoint any more and is going away (%s): no weeder is armed.", gone)
			return nil
		}
	}
	spec, err := weederSpec(l, key, p, armed)
	if err != nil {
		return err // validated at load; cannot happen
	}
	out, err := l.launcher.LaunchOver(ctx, spec, own)
	c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), string(out.Result)).Inc()
	if err != nil {
		log.WithError(err).WithField("trigger", p.reason).Error("Could not launch the weeder Job; will retry.")
		return err
	}
	c.batch.ownLaunched(c.now())
	c.noteLaunch(key, out.Job, armed, true)
	latency := c.now().Sub(p.at)
	c.metrics.TriggerToJob.WithLabelValues(string(jobs.KindWeeder)).Observe(latency.Seconds())
	c.observeEdge(p)
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
		c.recordEvent(ns, svc, corev1.EventTypeNormal, EventWeederArmed,
			fmt.Sprintf("Armed weeder Job %s/%s (trigger %s%s): it restarts crash-looping dependents from the moment the service is Ready again (waiting at most %s), for %s",
				out.Job.Namespace, out.Job.Name, p.reason, replacedNote(out.Replaced), l.cfg.MaxWait(), l.cfg.Watch()))
		return nil
	}
	log.WithFields(fields).Info("Launched a weeder Job.")
	c.recordEvent(ns, svc, corev1.EventTypeNormal, EventWeederStarted,
		fmt.Sprintf("Started weeder Job %s/%s (trigger %s%s): restarting crash-looping dependents for %s",
			out.Job.Namespace, out.Job.Name, p.reason, replacedNote(out.Replaced), l.cfg.Watch()))
	return nil
}

// stopWeeder deletes the service's own running weeder Job, if any: the service went down
// again and arming is off, or (going says why) it is going away.
func (c *Controller) stopWeeder(ctx context.Context, l *live, key string, p *pendingLaunch, active []batchv1.Job, going string, log logrus.FieldLogger) error {
	ns, svc := splitKey(key)
	stopped, err := l.launcher.Delete(ctx, active)
	if err != nil {
		log.WithError(err).Error("The service went down but its running weeder Job could not be stopped; will retry.")
		return err
	}
	if len(stopped) == 0 {
		log.Info("Service has no ready endpoint any more; no weeder Job of its own was running.")
		return nil
	}
	c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), "stopped").Add(float64(len(stopped)))
	c.observeEdge(p)
	if going != "" {
		log.WithField("jobs", stopped).Infof("The service is going away (%s): stopped its weeder Job.", going)
		c.recordEvent(ns, svc, corev1.EventTypeNormal, EventWeederStopped,
			fmt.Sprintf("Stopped weeder Job(s) %v: the service is going away (%s)", stopped, going))
		return nil
	}
	log.WithField("jobs", stopped).Info("Service has no ready endpoint any more: stopped its weeder Job, so dependents are not restarted while they cannot work.")
	c.recordEvent(ns, svc, corev1.EventTypeNormal, EventWeederStopped,
		fmt.Sprintf("Stopped weeder Job(s) %v: the service has no ready endpoint; a new weeder starts when it is Ready again", stopped))
	return nil
}

// observeEdge records how long after its edge the weeder's action was done.
func (c *Controller) observeEdge(p *pendingLaunch) {
	c.metrics.EdgeToAction.WithLabelValues(p.reason).Observe(c.now().Sub(p.at).Seconds())
}

func replacedNote(r []string) string {
	if len(r) == 0 {
		return ""
	}
	return fmt.Sprintf(", replacing %v", r)
}

// recordEvent records an Event on the Service. Its UID (which `kubectl describe service`
// matches Events by) comes from its EndpointSlices' owner reference, so a storm of Events
// costs no reads; with legacy Endpoints, which carry no owner, the Service is read. (A slice
// made by hand without an owner gives an Event without UID: listed by kubectl get events, not
// by describe; a storm is never held up by a read per Event.)
func (c *Controller) recordEvent(ns, svc, typ, reason, msg string) {
	ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: ns, Name: svc}
	c.mu.Lock()
	if st, ok := c.states[ns+"/"+svc]; ok {
		ref.UID = st.view.serviceUID()
	}
	c.mu.Unlock()
	if _, legacy := c.src.(*endpointsSource); ref.UID == "" && legacy {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if s, err := c.client.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{}); err == nil {
			ref.UID, ref.ResourceVersion = s.UID, s.ResourceVersion
		}
	}
	c.recorder.Event(ref, typ, reason, msg)
}

// Reconcile acts on the edge recorded last for one service (the worker loop's side).
func (c *Controller) Reconcile(ctx context.Context, key string) error {
	c.mu.Lock()
	var tried *pendingLaunch
	if st, ok := c.states[key]; ok {
		tried = st.pending
	}
	c.mu.Unlock()
	if err := c.reconcile(ctx, key); err != nil {
		return &attemptError{err: err, tried: tried}
	}
	return nil
}

// attemptError carries the edge a failed attempt acted on, so giving up drops that edge and
// not a newer one recorded while it was retried.
type attemptError struct {
	err   error
	tried *pendingLaunch
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// GiveUp is told by the worker loop that a service's launch failed ctrl.MaxRetries times.
func (c *Controller) GiveUp(key string, err error) {
	var ae *attemptError
	if errors.As(err, &ae) {
		c.mu.Lock()
		if st, ok := c.states[key]; ok && st.pending == ae.tried {
			st.pending = nil // a newer edge recorded meanwhile is still owed its action
		}
		c.mu.Unlock()
		err = ae.err
	}
	ns, svc := splitKey(key)
	c.log.WithError(err).WithFields(logrus.Fields{"namespace": ns, "service": svc}).Error("Giving up launching the weeder Job.")
	c.recordEvent(ns, svc, corev1.EventTypeWarning, EventWeederFailed, "Could not launch a weeder Job: "+err.Error())
}

// Lead runs the batcher, the catch-up and the workers until ctx ends, then waits for them.
func (c *Controller) Lead(ctx context.Context) {
	c.leading.Store(true)
	defer c.leading.Store(false)
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
	for key, st := range c.states {
		switch {
		case st.seen.Ready:
			st.pending = &pendingLaunch{edge: EdgeReady, reason: jobs.TriggerCatchUp, at: now, check: true}
		case st.seen.Known && st.pending != nil && st.pending.edge == EdgeOutage:
		default:
			st.pending = nil
		}
		if st.pending != nil {
			keys = append(keys, key)
		}
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.queue.Add(k)
	}
	return len(keys)
}

// Informers the weeder runs.
func (c *Controller) Informers() []cache.SharedIndexInformer {
	infs := []cache.SharedIndexInformer{c.src.Informer(), c.wjobs.inf, c.nsInf}
	return append(infs, c.deps.informers()...)
}
