package jobs

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/depwatch/depwatch/probe"
	corev1 "k8s.io/api/core/v1"
)

// TriggerSchedule: a probe Job launched because its namespace's probeInterval came round.
const TriggerSchedule = "schedule"

// Labels and annotations of a probe Job that covers a shard of namespaces.
const (
	// LabelProbePrefix + <namespace> = "true" marks every namespace the Job probes, on the Job
	// and its pods: `kubectl logs -l depwatch.io/kind=probe,probe.depwatch.io/<namespace>`.
	LabelProbePrefix = "probe.depwatch.io/"
	// AnnotationNamespaces lists the namespaces the Job probes, comma-separated, in order.
	AnnotationNamespaces = "depwatch.io/namespaces"
)

// ProbeLabel is the label that marks a probe Job (and its pods) as probing namespace ns.
func ProbeLabel(ns string) string { return LabelProbePrefix + ns }

// ProbeSpec describes a probe run (`depwatch probe`) for one control-plane namespace, or for
// a shard of them: the run's own settings (probe.JobSettings, whose Env writes the probe's
// environment) and what only the Job needs. The coordinator fills it from the config's
// prober section. Set either JobSettings.Namespace (the Job's target is the namespace) or
// Shard and JobSettings.Namespaces (the target, label depwatch.io/namespace and
// de-duplication, is the shard's name, and every namespace gets its label ProbeLabel(ns)).
// Probe writes JobSettings.Membership from MembershipIn, and Concurrency for a shard only.
type ProbeSpec struct {
	probe.JobSettings
	Shard string
	// MembershipIn, for a shard's Job that runs on a schedule, is the namespace of the shard's
	// membership ConfigMap (MembershipName, in the Jobs' namespace): the Job follows it while
	// it runs (NAMESPACES_CONFIGMAP). "" = the Job probes Namespaces and nothing else.
	MembershipIn string
	// ScaleChain is the longest a probe's scaling can take: the sum over the levels of the
	// largest initialDelay + timeout in the level, for the slower direction. It goes into
	// activeDeadlineSeconds, so a Job is never killed by its deadline in the middle of a
	// level it was allowed to finish.
	ScaleChain  time.Duration
	TriggerTime time.Time
}

// Probe turns a ProbeSpec into a Spec: `depwatch probe` with its environment, labels
// depwatch.io/kind=probe and depwatch.io/namespace (the namespace, or the shard), one
// ProbeLabel per namespace of a shard, and the KeepActive policy (never two Jobs of one
// target at once: a launch while one is active creates nothing).
// activeDeadlineSeconds covers RUN_DURATION + three probe timeouts (Secret, API server,
// leases) + the scale chain, plus the template's deadline margin.
func Probe(p ProbeSpec) (Spec, error) {
	target := p.target()
	if err := p.check(target); err != nil {
		return Spec{}, err
	}
	run := p.JobSettings
	run.Membership, run.Concurrency = "", 0 // a single namespace needs no more than one slot
	var labels map[string]string
	membership := ""
	if p.MembershipIn != "" {
		membership = MembershipName(p.Shard)
		run.Membership = probe.MembershipRef(p.MembershipIn, membership)
	}
	if p.Shard != "" {
		run.Concurrency = p.Concurrency
		// Sized for as many namespaces as the Job may probe at once: a Job that follows its
		// membership gets the namespaces that join while it runs.
		run.Client = probe.ShardClientLimit(max(len(p.Namespaces), p.Concurrency), p.Interval)
		labels = map[string]string{}
		for _, ns := range p.Namespaces {
			labels[ProbeLabel(ns)] = "true"
		}
	}
	return Spec{
		Kind:        KindProbe,
		Namespace:   target,
		ExtraLabels: labels,
		Namespaces:  p.Namespaces,
		Membership:  membership,
		Trigger:     TriggerSchedule,
		TriggerTime: p.TriggerTime,
		RunDuration: p.RunDuration + 3*p.ProbeTimeout + p.ScaleChain,
		Env:         run.Env(),
		Args:        []string{"probe"},
		OnActive:    KeepActive,
	}, nil
}

// target is what the Job is for: the namespace, or the shard.
func (p ProbeSpec) target() string {
	if p.Shard != "" {
		return p.Shard
	}
	return p.Namespace
}

// check refuses a spec no probe Job can run with, naming the target.
func (p ProbeSpec) check(target string) error {
	switch {
	case p.Namespace == "" && (p.Shard == "" || len(p.Namespaces) == 0):
		return fmt.Errorf("probe: a namespace, or a shard and its namespaces, is required")
	case p.Namespace != "" && (p.Shard != "" || len(p.Namespaces) > 0):
		return fmt.Errorf("probe %s: set a namespace or a shard with namespaces, not both", p.Namespace)
	case p.Concurrency < 0 || !(p.Jitter >= 0 && p.Jitter < 1):
		return fmt.Errorf("probe %s: concurrency must not be negative and jitter must be in [0,1)", target)
	case p.KubeconfigSecretName == "":
		return fmt.Errorf("probe %s: the kubeconfig Secret name is required", target)
	case p.ProbeTimeout <= 0 || p.NodeMonitorGrace <= 0:
		return fmt.Errorf("probe %s: probe timeout and node monitor grace must be positive", target)
	case !(p.NodeLeaseFailureFraction > 0 && p.NodeLeaseFailureFraction <= 1) || !(p.LeaseExpiryBufferFraction > 0 && p.LeaseExpiryBufferFraction <= 1):
		return fmt.Errorf("probe %s: fractions must be in (0,1]", target)
	case p.DependentResources == "":
		return fmt.Errorf("probe %s: dependent resources are required", target)
	case p.RunDuration < 0 || p.ScaleChain < 0:
		return fmt.Errorf("probe %s: durations must not be negative", target)
	case p.RunDuration > 0 && p.Interval <= 0:
		return fmt.Errorf("probe %s: a run duration needs a positive interval", target)
	case p.MembershipIn != "" && (p.Shard == "" || p.RunDuration <= 0):
		return fmt.Errorf("probe %s: only a shard's Job with a run duration follows a membership", target)
	}
	return nil
}

// ExcessHistory returns the finished runs to stop so that at most successful Complete and
// failed Failed runs remain (like a CronJob's history limits): the oldest go first, by
// the time they ended. Active runs, and runs going already, are never returned.
func ExcessHistory(list []Run, successful, failed int) []Run {
	var done, bad []Run
	for _, r := range list {
		switch {
		case r.Going || r.Ended.IsZero():
		case r.Failed:
			bad = append(bad, r)
		default:
			done = append(done, r)
		}
	}
	return append(oldestBeyond(done, successful), oldestBeyond(bad, failed)...)
}

func oldestBeyond(list []Run, keep int) []Run {
	if len(list) <= max(keep, 0) {
		return nil
	}
	slices.SortStableFunc(list, func(a, b Run) int { return cmp.Or(a.Ended.Compare(b.Ended), strings.Compare(a.Name, b.Name)) })
	return list[:len(list)-max(keep, 0)]
}

func finishedAt(j *batchv1.Job) time.Time {
	if j.Status.CompletionTime != nil {
		return j.Status.CompletionTime.Time
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return j.CreationTimestamp.Time
}

func conditionTrue(j *batchv1.Job, t batchv1.JobConditionType) bool {
	return slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool { return c.Type == t && c.Status == corev1.ConditionTrue })
}
