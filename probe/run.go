package probe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
)

// Deps are the clients a run uses. Seed, Dynamic, Scales and Mapper talk to the cluster the
// Job runs in (the "seed": the Secret, the dependents, Events); NewShootClient builds the
// client of the probed control plane from the Secret's kubeconfig.
type Deps struct {
	Seed           kubernetes.Interface // Secrets (get) and Events (create) in NAMESPACE
	Dynamic        dynamic.Interface    // the dependents: annotations (get/patch), status.readyReplicas
	Scales         scale.ScalesGetter   // the dependents' scale subresource (get/patch)
	Mapper         meta.RESTMapper      // ref kind + apiVersion → resource
	NewShootClient ShootClientFactory

	// NoEvents: the run records no Events (it may not: the in-process executor under RBAC
	// that grants none); what they would say is in its log lines all the same.
	NoEvents bool
	// FollowMembership, when set, is where a run that follows a shard's membership
	// (NAMESPACES_CONFIGMAP) reads it from: it calls apply with each new membership of the
	// ConfigMap namespace/name until ctx ends, never twice at once. nil: the ConfigMap is
	// watched through Seed.
	FollowMembership func(ctx context.Context, namespace, name string, apply func(Membership), log logrus.FieldLogger) error

	// Test seams; zero values mean the real thing.
	Now          func() time.Time // "now" of the lease expiry
	PollInterval time.Duration    // readiness polling; default 1s
}

func (d Deps) validate() error {
	var missing []string
	names := []string{"Seed", "Dynamic", "Scales", "Mapper", "NewShootClient"}
	for i, set := range []bool{d.Seed != nil, d.Dynamic != nil, d.Scales != nil, d.Mapper != nil, d.NewShootClient != nil} {
		if !set {
			missing = append(missing, names[i])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("probe deps: missing %v", missing)
	}
	return nil
}

// NewDeps builds the production clients for the seed from cfg: a deferred discovery
// RESTMapper (re-reads discovery when a kind is not found, so CRDs installed later resolve),
// the scale client on it, the dynamic client, and NewShootClient.
func NewDeps(cfg *rest.Config) (Deps, error) { return NewDepsWith(cfg, nil) }

// NewDepsWith is NewDeps on a discovery cache shared by the runs of one process (the
// in-process executor's): each run has clients with its own rate limit, and discovery is read
// once, not once per run. nil: a cache of the run's own.
func NewDepsWith(cfg *rest.Config, cached discovery.CachedDiscoveryInterface) (Deps, error) {
	seed, err := kubernetes.NewForConfig(protobuf(cfg))
	if err != nil {
		return Deps{}, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Deps{}, fmt.Errorf("building the dynamic client: %w", err)
	}
	if cached == nil {
		cached = memory.NewMemCacheClient(seed.Discovery())
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return Deps{}, fmt.Errorf("building the scale client: %w", err)
	}
	return Deps{Seed: seed, Dynamic: dyn, Scales: scales, Mapper: mapper, NewShootClient: NewShootClient}, nil
}

// protobuf is a copy of cfg (its rate limiter the same) that speaks protobuf: the typed
// clients read only built-in types (Secrets, ConfigMaps, Leases, Nodes, Events), whose
// protobuf is several times smaller on the wire and cheaper to decode than JSON. A shoot's
// Nodes are the largest (their status lists every image on the node), and a shard reads them
// on every probe. The dynamic and scale clients stay on JSON: custom resources have no
// protobuf.
func protobuf(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg
}

// ErrScaleFailed is wrapped by Run's error when a resource could not be scaled (or a required
// one is missing).
var ErrScaleFailed = errors.New("scaling failed")

type runner struct {
	deps Deps
	opts Options
	log  logrus.FieldLogger
	sum  Summary
	// throttled counts the consecutive throttled probes (0 after any other result).
	throttled int
	// slots bounds how many namespaces of the run probe at the same moment.
	slots chan struct{}
	// lastAt is when the last probe finished (zero: none yet).
	lastAt time.Time
	// stop ends the run's schedule. A probe still reading (Secret, API server, leases,
	// Machines) when it comes is abandoned, since nothing has been changed yet: a hanging
	// control plane must not hold its whole shard's Job, and so the hand-over to the next
	// Job, for up to three probe timeouts. A probe that is scaling is finished.
	stop context.Context
	// left: the namespace left the shard's membership (its contexts are cancelled for that).
	left atomic.Bool

	settings NamespaceSettings // its own, as the fleet started it with them
	cancel   context.CancelFunc
	err      error // what run returned
}

// RunAll performs the run for every namespace of opts (NAMESPACE, or NAMESPACES) at once, each
// on its own: its first probe after its notBefore (NAMESPACE_SETTINGS) and, in a run of
// several namespaces with SCHEDULE, after a random part of BACKOFF_JITTER_FACTOR × the
// interval, so they do not all fire together; then, with SCHEDULE, one probe on every tick of
// its own until RUN_DURATION has elapsed (a probe in hand is finished; a namespace's probes
// never overlap: a tick inside a probe is skipped). At most PROBE_CONCURRENCY namespaces probe
// at the same moment; every request of a probe is bounded by PROBE_TIMEOUT, so a slow or
// hanging control plane delays no other namespace beyond the slot it holds. ctx is SIGTERM:
// no new probe, level or resource starts after it, and waits are abandoned.
//
// It returns the Report (one entry per namespace), each namespace's Summary in the order
// given, and an error. With NAMESPACE the error is non-nil when the last probe could not run
// (Secret, kubeconfig, credentials) or a resource could not be scaled in it ("no decision" is
// not an error). With NAMESPACES the error is non-nil only for incomplete deps: one broken
// control plane must not fail (and retry) a Job that serves many; its failures are in its log
// lines, its Events and its report entry.
func RunAll(ctx context.Context, deps Deps, opts Options, log logrus.FieldLogger) (Report, []Summary, error) {
	if err := deps.validate(); err != nil {
		return Report{End: time.Now()}, nil, err
	}
	if deps.PollInterval <= 0 {
		deps.PollInterval = time.Second
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	conc := max(opts.Concurrency, 1)
	multi := len(opts.Namespaces) > 0
	log.WithFields(startFields(opts, conc, multi)).Info("Probe run starting.")

	// stop ends the schedule: RUN_DURATION after the start, or SIGTERM.
	stop, cancel := ctx, context.CancelFunc(func() {})
	if opts.Schedule != nil {
		stop, cancel = context.WithTimeout(ctx, opts.RunDuration)
	}
	defer cancel()

	f := &fleet{ctx: ctx, stop: stop, deps: deps, opts: opts, log: log, slots: make(chan struct{}, conc), multi: multi, live: map[string]*runner{}}
	for _, ns := range opts.names() {
		f.start(ns, opts.Settings[ns])
	}
	if opts.MembershipName != "" {
		// The membership is followed until the schedule ends; then no runner starts any more
		// and the fleet's runners are waited for.
		follow := deps.FollowMembership
		if follow == nil {
			follow = func(ctx context.Context, ns, name string, apply func(Membership), log logrus.FieldLogger) error {
				return followMembership(ctx, deps.Seed, ns, name, apply, log)
			}
		}
		if err := follow(stop, opts.MembershipNamespace, opts.MembershipName, f.follow, log); err != nil {
			log.WithError(err).Error("Cannot follow the shard's membership; probing the namespaces the run started with.")
		}
		<-stop.Done()
	}
	runners := f.close()

	why := "done"
	switch {
	case ctx.Err() != nil:
		why = "asked to stop (SIGTERM or context cancelled)"
	case opts.Schedule != nil:
		why = "RUN_DURATION elapsed"
	}
	rep := report(runners, time.Now(), opts.DryRun)
	sums, firstErr := finishedLines(runners, rep, why)
	if multi {
		return rep, sums, nil
	}
	return rep, sums, firstErr
}

// startFields are the settings the run's first line names.
func startFields(opts Options, conc int, multi bool) logrus.Fields {
	fields := logrus.Fields{
		"kubeconfig_secret": opts.KubeconfigSecretName,
		"probe_timeout":     opts.ProbeTimeout.String(), "node_monitor_grace": opts.NodeMonitorGrace.String(),
		"node_lease_failure_fraction": opts.NodeLeaseFailureFraction, "lease_expiry_buffer_fraction": opts.LeaseExpiryBufferFraction,
		"resources": len(opts.Resources), "dry_run": opts.DryRun, "schedule": opts.ScheduleSpec, "run_duration": opts.RunDuration.String(),
	}
	if opts.MembershipName != "" {
		fields["membership"] = MembershipRef(opts.MembershipNamespace, opts.MembershipName)
	}
	if multi {
		fields["namespace"] = NamespacesEnv(opts.Namespaces)
		fields["namespaces"] = len(opts.Namespaces)
		fields["concurrency"] = conc
		fields["jitter"] = opts.Jitter
	} else {
		fields["namespace"] = opts.Namespace
	}
	return fields
}

// finishedLines logs each namespace's last line and returns the namespaces' summaries and the
// first namespace's error (a one-namespace run's exit status).
func finishedLines(runners []*runner, rep Report, why string) ([]Summary, error) {
	sums := make([]Summary, len(runners))
	var firstErr error
	for i, r := range runners {
		sums[i] = r.sum
		if i == 0 {
			firstErr = r.err
		}
		line := r.log.WithFields(logrus.Fields{"probes": r.sum.Probes, "result": string(rep.Namespaces[r.opts.Namespace].Last), "stop_reason": why})
		if r.left.Load() {
			line = line.WithField("stop_reason", "left the shard's membership")
		}
		if r.err != nil {
			line.WithField("error", r.err.Error()).Errorf("Probe run finished (%s) with an error: %s", why, r.sum)
		} else {
			line.Infof("Probe run finished (%s): %s", why, r.sum)
		}
	}
	return sums, firstErr
}

// run is one namespace's part of a run: its first probe at notBefore (or after spread), then
// on the schedule until stop. A namespace whose first probe is not due before stop is not
// probed at all.
func (r *runner) run(ctx context.Context, spread time.Duration) error {
	notBefore := r.settings.NotBefore
	if wait := max(time.Until(notBefore), spread); wait > 0 {
		if d := time.Until(notBefore); d > 0 {
			r.log.WithFields(logrus.Fields{"action": "wait", "reason": "initial delay or back-off", "first_probe": notBefore.UTC().Format(time.RFC3339)}).
				Infof("The first probe of this namespace waits until %s.", notBefore.UTC().Format(time.RFC3339))
		}
		select {
		case <-r.stop.Done():
			if r.left.Load() {
				return nil // said when it left
			}
			r.log.WithFields(logrus.Fields{"action": string(ActionNone), "result": string(ResultNotProbed), "reason": "the run ended before the first probe was due"}).
				Info("Not probed in this run: its first probe was not due yet; the next probe Job of its shard probes it.")
			return nil
		case <-time.After(wait):
		}
	}
	lastErr := r.probe(ctx)
	if r.opts.Schedule == nil || ctx.Err() != nil {
		return lastErr
	}
	for r.stop.Err() == nil {
		// The next tick is taken after the probe: ticks that fell inside it are skipped, not
		// queued.
		select {
		case <-r.stop.Done():
		case <-time.After(time.Until(r.nextProbe())):
			lastErr = r.probe(ctx)
		}
	}
	return lastErr
}

// nextProbe is the schedule's next tick, stretched by up to BACKOFF_JITTER_FACTOR of the
// interval; after a throttled probe (429), the ticks within the back-off are skipped too, so
// a throttled API server is not asked again at full rate.
func (r *runner) nextProbe() time.Time {
	now := time.Now()
	next := r.opts.Schedule.Next(now)
	if r.opts.Jitter > 0 {
		next = now.Add(wait.Jitter(next.Sub(now), r.opts.Jitter))
	}
	if r.throttled > 0 {
		until := now.Add(ThrottleBackoff(r.throttled))
		for next.Before(until) && !next.IsZero() {
			next = r.opts.Schedule.Next(next)
		}
	}
	return next
}

// probe runs one probe: Secret → API server → leases → decision → scaling.
func (r *runner) probe(ctx context.Context) error {
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return nil
	}
	defer func() { <-r.slots }()
	r.sum.Probes++
	log := r.log.WithFields(logrus.Fields{"namespace": r.opts.Namespace, "probe": r.sum.Probes})
	readCtx, cancelRead := context.WithCancel(ctx)
	defer cancelRead()
	defer context.AfterFunc(r.stop, cancelRead)()
	res, reason, err := r.probeOnce(ctx, readCtx, log)
	if res == ResultNotProbed {
		r.sum.Probes-- // abandoned at the run's end: not a probe
		return nil
	}
	r.lastAt = time.Now()
	r.sum.Last, r.sum.LastReason = res, reason
	r.sum.Results[res]++
	if res == ResultThrottled {
		r.throttled++
		log.WithFields(logrus.Fields{"action": "back-off", "reason": reason, "backoff": ThrottleBackoff(r.throttled).String()}).
			Warnf("An API server is throttling the probe (429): the next probe waits at least %s.", ThrottleBackoff(r.throttled))
	} else {
		r.throttled = 0
	}
	return err
}

// probeOnce reads with readCtx (cancelled when the run's schedule ends) and scales with ctx:
// read the shoot, decide, scale.
func (r *runner) probeOnce(ctx, readCtx context.Context, log logrus.FieldLogger) (Result, string, error) {
	in, pe := r.readShoot(readCtx)
	if pe != nil {
		return r.noDecision(ctx, readCtx, log, pe)
	}
	d := Decide(in)
	excluded := 0
	for _, n := range d.Excluded {
		excluded += n
	}
	fields := logrus.Fields{"action": string(d.Action), "reason": d.Reason, "candidates": d.Candidates, "expired": d.Expired,
		"excluded": excluded, "excluded_by_reason": FormatExclusions(d.Excluded), "machine_rule": in.Filter.Machines != nil,
		"node_monitor_grace": r.opts.NodeMonitorGrace.String(), "dry_run": r.opts.DryRun}
	if d.Action == ActionNone {
		log.WithFields(fields).WithField("result", string(ResultSkipped)).Infof("No scaling decision: %s.", d.Reason)
		return ResultSkipped, d.Reason, nil
	}
	log.WithFields(fields).Infof("Decision: %s: %s.", d.Action, d.Reason)
	if ctx.Err() != nil {
		why := "The run is stopping: nothing is scaled."
		if r.left.Load() {
			why = "This namespace left the shard: nothing is scaled."
		}
		log.WithField("action", string(OutcomeNotStarted)).Info(why)
		r.sum.Outcomes[OutcomeNotStarted] += len(r.opts.Resources)
		return resultForDecision(d.Action, false), d.Reason, nil
	}
	return r.scale(ctx, d, log)
}

// readShoot reads what a decision needs: the kubeconfig Secret, the shoot's API server, its
// node leases and nodes, and the seed's Machines. A failed read is the probe's result.
func (r *runner) readShoot(readCtx context.Context) (LeaseInput, *probeError) {
	secretCtx, cancel := context.WithTimeout(readCtx, r.opts.ProbeTimeout)
	kc, pe := readKubeconfig(secretCtx, r.deps.Seed, r.opts.Namespace, r.opts.KubeconfigSecretName)
	cancel()
	if pe != nil {
		return LeaseInput{}, pe
	}
	shoot, err := r.deps.NewShootClient(kc, r.opts.ProbeTimeout)
	clear(kc)
	if err != nil {
		return LeaseInput{}, broken("kubeconfig in Secret %s/%s (key %q): %s", r.opts.Namespace, r.opts.KubeconfigSecretName, KubeconfigKey, redact(err.Error()))
	}
	if pe := probeAPIServer(readCtx, shoot, r.opts.ProbeTimeout); pe != nil {
		return LeaseInput{}, pe
	}
	leases, nodes, pe := listLeaseInput(readCtx, shoot, r.opts.ProbeTimeout)
	if pe != nil {
		return LeaseInput{}, pe
	}
	machines, pe := listMachines(readCtx, r.deps.Dynamic, r.opts.Namespace, r.opts.ProbeTimeout)
	if pe != nil {
		return LeaseInput{}, pe
	}
	return LeaseInput{
		Leases: leases, Nodes: nodes, Now: r.deps.Now(),
		Filter:                    CandidateFilter{Machines: machines, NodeConditions: r.opts.NodeConditions},
		NodeMonitorGrace:          r.opts.NodeMonitorGrace,
		LeaseExpiryBufferFraction: r.opts.LeaseExpiryBufferFraction,
		NodeLeaseFailureFraction:  r.opts.NodeLeaseFailureFraction,
	}, nil
}

// noDecision logs why a probe made no decision and returns its result. A probe abandoned
// because its namespace left the shard, or because the run ended during its reads, changed
// nothing and is not a failure.
func (r *runner) noDecision(ctx, readCtx context.Context, log logrus.FieldLogger, pe *probeError) (Result, string, error) {
	if r.left.Load() {
		log.WithFields(logrus.Fields{"action": string(ActionNone), "result": string(ResultNotProbed), "reason": "left the shard's membership during the probe"}).
			Info("This namespace left the shard while its probe was still reading; the probe is abandoned and nothing was changed.")
		return ResultNotProbed, "", nil
	}
	if ctx.Err() == nil && readCtx.Err() != nil {
		log.WithFields(logrus.Fields{"action": string(ActionNone), "result": string(ResultNotProbed), "reason": "the run ended during the probe's reads"}).
			Info("The run ended while this probe was still reading; it is abandoned (nothing was changed) and the next Job of the shard probes again.")
		return ResultNotProbed, "", nil
	}
	fields := logrus.Fields{"action": string(ActionNone), "result": string(pe.result), "reason": pe.Error()}
	if pe.result == ResultError {
		log.WithFields(fields).Errorf("No scaling decision, the probe could not run: %v. Nothing was scaled.", pe)
		return pe.result, pe.Error(), pe
	}
	log.WithFields(fields).Warnf("No scaling decision: %v. Nothing was scaled.", pe)
	return pe.result, pe.Error(), nil
}

// scale carries out a scale-down or scale-up decision, level by level, and counts each
// resource's outcome.
func (r *runner) scale(ctx context.Context, d Decision, log logrus.FieldLogger) (Result, string, error) {
	s := &scaler{deps: r.deps, namespace: r.opts.Namespace, dryRun: r.opts.DryRun, direction: d.Action,
		why: d.Reason, log: r.log.WithField("probe", r.sum.Probes)}
	var failed []string
	changed := false
	for i, o := range s.scaleAll(ctx, r.opts.Resources) {
		r.sum.Outcomes[o]++
		if o.failure() {
			failed = append(failed, fmt.Sprintf("%s (%s)", r.opts.Resources[i].Ref, o))
		}
		switch o {
		case OutcomeScaledUp, OutcomeWouldScaleUp, OutcomeAnnotationsRemoved, OutcomeFailed, OutcomeAdmissionRefused, OutcomeMissing, OutcomeInterrupted:
			changed = true
		}
	}
	result := resultForDecision(d.Action, changed)
	log.WithFields(logrus.Fields{"decision": string(d.Action), "result": string(result), "reason": d.Reason, "failed": len(failed)}).
		Infof("Probe done: %s.", result)
	if len(failed) > 0 {
		return result, d.Reason, fmt.Errorf("%w: %v", ErrScaleFailed, failed)
	}
	return result, d.Reason, nil
}

// resultForDecision: a scale-up decision that found everything up is "healthy".
func resultForDecision(a Action, scaledUp bool) Result {
	switch {
	case a == ActionScaleDown:
		return ResultScaleDown
	case scaledUp:
		return ResultScaleUp
	default:
		return ResultHealthy
	}
}

// fleet is the namespaces a run probes, each with its own runner. It starts with the run's
// NAMESPACE or NAMESPACES; a run that follows a membership ConfigMap starts and stops runners
// as the membership changes.
type fleet struct {
	ctx   context.Context // SIGTERM
	stop  context.Context // the end of the schedule: RUN_DURATION or SIGTERM
	deps  Deps
	opts  Options
	log   logrus.FieldLogger
	slots chan struct{}
	multi bool

	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	live   map[string]*runner // namespace → its runner now
	all    []*runner          // every runner the run had, in start order
}

// start starts namespace ns's runner with its own settings s; the caller holds f.mu or is the
// only user of f.
func (f *fleet) start(ns string, s NamespaceSettings) {
	if f.closed {
		return
	}
	ctx, cancelCtx := context.WithCancel(f.ctx)
	stop, cancelStop := context.WithCancel(f.stop)
	r := &runner{deps: f.deps, opts: f.opts.target(ns, s), log: f.log.WithField("namespace", ns), slots: f.slots, stop: stop,
		sum:      Summary{Namespace: ns, DryRun: f.opts.DryRun, Results: map[Result]int{}, Outcomes: map[Outcome]int{}},
		settings: s, cancel: func() { cancelCtx(); cancelStop() }}
	f.live[ns] = r
	f.all = append(f.all, r)
	var spread time.Duration
	if f.multi && f.opts.Schedule != nil && f.opts.Jitter > 0 {
		now := time.Now()
		interval := f.opts.Schedule.Next(now).Sub(now)
		spread = wait.Jitter(interval, f.opts.Jitter) - interval
	}
	f.wg.Go(func() {
		defer r.cancel()
		r.err = r.run(ctx, spread)
	})
}

// follow makes the fleet probe what m says: a namespace that joined starts (its first probe
// at its notBefore), one that left stops at once (a probe still reading is abandoned, no
// level or resource of a scaling starts after it, and it is not probed again), and one whose
// own settings changed starts again with them.
func (f *fleet) follow(m Membership) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	running := make(map[string]NamespaceSettings, len(f.live))
	for ns, r := range f.live {
		running[ns] = r.settings
	}
	start, stop := membershipDiff(running, m)
	for _, ns := range stop {
		r := f.live[ns]
		r.left.Store(true)
		r.cancel()
		delete(f.live, ns)
		r.log.WithFields(logrus.Fields{"action": "stop", "reason": "left the shard's membership"}).
			Info("Not probing this namespace any more: the coordinator took it out of this shard (it is not probed, or another shard probes it). Nothing more is probed or scaled here.")
	}
	for _, ns := range start {
		f.start(ns, m.Settings[ns])
		f.live[ns].log.WithFields(logrus.Fields{"action": "start", "reason": "joined the shard's membership"}).
			Info("Probing this namespace from now on: the coordinator added it to this shard.")
	}
}

// close stops the fleet from starting runners and waits for those it has.
func (f *fleet) close() []*runner {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
	return f.all
}

// report is the run's Report and Summaries from every runner it had: a namespace that was
// stopped and started again (settings changed, or it left and came back) is reported by its
// latest probe.
func report(runners []*runner, end time.Time, dryRun bool) Report {
	rep := Report{End: end, DryRun: dryRun, Results: map[string]int{}, Ops: map[string]int{}, Namespaces: map[string]NamespaceResult{}}
	latest := map[string]time.Time{}
	for _, r := range runners {
		ns := r.opts.Namespace
		e := NamespaceResult{Last: r.sum.Last, Throttled: r.throttled}
		if r.sum.Probes == 0 {
			e.Last = ResultNotProbed
		} else {
			e.Ago = max(end.Sub(r.lastAt), 0)
		}
		// lastAt is zero for a runner that did not probe: any that did is later.
		if _, seen := rep.Namespaces[ns]; !seen || r.lastAt.After(latest[ns]) {
			rep.Namespaces[ns] = e
			latest[ns] = r.lastAt
		}
		for res, n := range r.sum.Results {
			rep.Results[string(res)] += n
		}
		for op, n := range r.sum.Ops() {
			rep.Ops[op] += n
		}
	}
	return rep
}
