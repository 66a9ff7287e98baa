package probe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/meta"
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

	// Test seams; zero values mean the real thing.
	Now          func() time.Time // "now" of the lease expiry
	PollInterval time.Duration    // readiness polling; default 1s
}

func (d Deps) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d Deps) validate() error {
	var missing []string
	if d.Seed == nil {
		missing = append(missing, "Seed")
	}
	if d.Dynamic == nil {
		missing = append(missing, "Dynamic")
	}
	if d.Scales == nil {
		missing = append(missing, "Scales")
	}
	if d.Mapper == nil {
		missing = append(missing, "Mapper")
	}
	if d.NewShootClient == nil {
		missing = append(missing, "NewShootClient")
	}
	if len(missing) > 0 {
		return fmt.Errorf("probe deps: missing %v", missing)
	}
	return nil
}

// NewDeps builds the production clients for the seed from cfg: a deferred discovery
// RESTMapper (re-reads discovery when a kind is not found, so CRDs installed later resolve),
// the scale client on it, the dynamic client, and NewShootClient.
func NewDeps(cfg *rest.Config) (Deps, error) {
	seed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Deps{}, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Deps{}, fmt.Errorf("building the dynamic client: %w", err)
	}
	cached := memory.NewMemCacheClient(seed.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return Deps{}, fmt.Errorf("building the scale client: %w", err)
	}
	return Deps{Seed: seed, Dynamic: dyn, Scales: scales, Mapper: mapper, NewShootClient: NewShootClient}, nil
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
}

// Run performs the run: one probe now and, with SCHEDULE, one on every tick until RUN_DURATION
// has elapsed (a probe in hand is finished; probes never overlap: a tick inside a probe is
// skipped). ctx is SIGTERM: no new probe, level or resource starts after it, and waits are
// abandoned. The error is non-nil when the last probe could not run (Secret, kubeconfig,
// credentials) or a resource could not be scaled in it; "no decision" is not an error.
func Run(ctx context.Context, deps Deps, opts Options, log logrus.FieldLogger) (Summary, error) {
	if err := errors.Join(opts.validate(), deps.validate()); err != nil {
		return Summary{Namespace: opts.Namespace}, err
	}
	if deps.PollInterval <= 0 {
		deps.PollInterval = time.Second
	}
	r := &runner{deps: deps, opts: opts, log: log,
		sum: Summary{Namespace: opts.Namespace, DryRun: opts.DryRun, Results: map[Result]int{}}}

	r.log.WithFields(logrus.Fields{
		"namespace": opts.Namespace, "kubeconfig_secret": opts.KubeconfigSecretName,
		"probe_timeout": opts.ProbeTimeout.String(), "node_monitor_grace": opts.NodeMonitorGrace.String(),
		"node_lease_failure_fraction": opts.NodeLeaseFailureFraction, "lease_expiry_buffer_fraction": opts.LeaseExpiryBufferFraction,
		"resources": len(opts.Resources), "dry_run": opts.DryRun, "schedule": opts.ScheduleSpec, "run_duration": opts.RunDuration.String(),
	}).Info("Probe run starting.")

	lastErr := r.probe(ctx)
	if opts.Schedule != nil && ctx.Err() == nil {
		stop, cancel := context.WithTimeout(ctx, opts.RunDuration)
		defer cancel()
		timer := time.NewTimer(time.Until(r.nextProbe()))
		defer timer.Stop()
		for stop.Err() == nil {
			select {
			case <-stop.Done():
			case <-timer.C:
				lastErr = r.probe(ctx)
				// After the probe: ticks that fell inside it are skipped, not queued.
				timer.Reset(time.Until(r.nextProbe()))
			}
		}
	}

	why := "done"
	switch {
	case ctx.Err() != nil:
		why = "asked to stop (SIGTERM or context cancelled)"
	case opts.Schedule != nil:
		why = "RUN_DURATION elapsed"
	}
	line := r.log.WithFields(logrus.Fields{"namespace": opts.Namespace, "probes": r.sum.Probes, "result": string(r.sum.Last), "stop_reason": why})
	if lastErr != nil {
		line.WithField("error", lastErr.Error()).Errorf("Probe run finished (%s) with an error: %s", why, r.sum)
	} else {
		line.Infof("Probe run finished (%s): %s", why, r.sum)
	}
	return r.sum, lastErr
}

// nextProbe is the schedule's next tick; after a throttled probe (429), the ticks within the
// back-off are skipped too, so a throttled API server is not asked again at full rate.
func (r *runner) nextProbe() time.Time {
	now := time.Now()
	next := r.opts.Schedule.Next(now)
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
	r.sum.Probes++
	log := r.log.WithFields(logrus.Fields{"namespace": r.opts.Namespace, "probe": r.sum.Probes})
	res, reason, err := r.probeOnce(ctx, log)
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

func (r *runner) probeOnce(ctx context.Context, log logrus.FieldLogger) (Result, string, error) {
	noDecision := func(res Result, pe *probeError) (Result, string, error) {
		fields := logrus.Fields{"action": string(ActionNone), "result": string(res), "reason": pe.Error()}
		if pe.kind == errBroken {
			log.WithFields(fields).Errorf("No scaling decision, the probe could not run: %v. Nothing was scaled.", pe)
			return res, pe.Error(), pe
		}
		log.WithFields(fields).Warnf("No scaling decision: %v. Nothing was scaled.", pe)
		return res, pe.Error(), nil
	}

	secretCtx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
	kc, pe := readKubeconfig(secretCtx, r.deps.Seed, r.opts.Namespace, r.opts.KubeconfigSecretName)
	cancel()
	if pe != nil {
		return noDecision(ResultError, pe)
	}
	shoot, err := r.deps.NewShootClient(kc, r.opts.ProbeTimeout)
	clear(kc)
	if err != nil {
		return noDecision(ResultError, broken("kubeconfig in Secret %s/%s (key %q): %s", r.opts.Namespace, r.opts.KubeconfigSecretName, KubeconfigKey, redact(err.Error())))
	}
	if pe := probeAPIServer(ctx, shoot, r.opts.ProbeTimeout); pe != nil {
		return noDecision(resultFor(pe), pe)
	}
	leases, nodes, pe := listLeaseInput(ctx, shoot, r.opts.ProbeTimeout)
	if pe != nil {
		return noDecision(resultFor(pe), pe)
	}
	machines, pe := listMachines(ctx, r.deps.Dynamic, r.opts.Namespace, r.opts.ProbeTimeout)
	if pe != nil {
		return noDecision(resultFor(pe), pe)
	}
	d := Decide(LeaseInput{
		Leases: leases, Nodes: nodes, Now: r.deps.now(),
		Filter:                    CandidateFilter{Machines: machines, NodeConditions: r.opts.NodeConditions},
		NodeMonitorGrace:          r.opts.NodeMonitorGrace,
		LeaseExpiryBufferFraction: r.opts.LeaseExpiryBufferFraction,
		NodeLeaseFailureFraction:  r.opts.NodeLeaseFailureFraction,
	})
	excluded := 0
	for _, n := range d.Excluded {
		excluded += n
	}
	fields := logrus.Fields{"action": string(d.Action), "reason": d.Reason, "candidates": d.Candidates, "expired": d.Expired,
		"excluded": excluded, "excluded_by_reason": FormatExclusions(d.Excluded), "machine_rule": machines != nil,
		"node_monitor_grace": r.opts.NodeMonitorGrace.String(), "dry_run": r.opts.DryRun}
	if d.Action == ActionNone {
		log.WithFields(fields).WithField("result", string(ResultSkipped)).Infof("No scaling decision: %s.", d.Reason)
		return ResultSkipped, d.Reason, nil
	}
	log.WithFields(fields).Infof("Decision: %s: %s.", d.Action, d.Reason)
	if ctx.Err() != nil {
		log.WithField("action", string(OutcomeNotStarted)).Info("The run is stopping: nothing is scaled.")
		for range r.opts.Resources {
			r.sum.add(OutcomeNotStarted)
		}
		return resultForDecision(d.Action, false), d.Reason, nil
	}

	s := &scaler{deps: r.deps, namespace: r.opts.Namespace, dryRun: r.opts.DryRun, direction: d.Action,
		why: d.Reason, log: r.log.WithField("probe", r.sum.Probes), poll: r.deps.PollInterval}
	results := s.scaleAll(ctx, r.opts.Resources)
	var failed []string
	changed := false
	for _, res := range results {
		r.sum.add(res.outcome)
		if res.outcome.failure() {
			failed = append(failed, fmt.Sprintf("%s (%s)", res.res.Ref, res.outcome))
		}
		switch res.outcome {
		case OutcomeScaledUp, OutcomeWouldScaleUp, OutcomeAnnotationsRemoved, OutcomeFailed, OutcomeMissing, OutcomeInterrupted:
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

func resultFor(pe *probeError) Result {
	switch {
	case pe.kind == errBroken:
		return ResultError
	case pe.throttled:
		return ResultThrottled
	}
	return ResultAPIUnreachable
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
