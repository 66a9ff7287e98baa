package jobs

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// TriggerSchedule: a probe Job launched because its namespace's probeInterval came round.
const TriggerSchedule = "schedule"

// ProbeSpec describes a probe run (`depwatch probe`) for one control-plane namespace. The
// coordinator fills it from the config's prober section; every field maps to one variable of
// the probe's environment (see probe.Usage).
type ProbeSpec struct {
	Namespace            string        // NAMESPACE
	KubeconfigSecretName string        // KUBECONFIG_SECRET_NAME
	ProbeTimeout         time.Duration // PROBE_TIMEOUT
	NodeMonitorGrace     time.Duration // KCM_NODE_MONITOR_GRACE_DURATION
	// NodeLeaseFailureFraction and LeaseExpiryBufferFraction, in (0,1].
	NodeLeaseFailureFraction  float64
	LeaseExpiryBufferFraction float64
	// DependentResources is dependentResourceInfos as JSON (DEPENDENT_RESOURCES), validated
	// by the caller with probe.ParseDependentResources.
	DependentResources string
	// ScaleChain is the longest a probe's scaling can take: the sum over the levels of the
	// largest initialDelay + timeout in the level, for the slower direction. It goes into
	// activeDeadlineSeconds, so a Job is never killed by its deadline in the middle of a
	// level it was allowed to finish.
	ScaleChain time.Duration
	DryRun     bool
	// NodeConditions is the shoot's worker pool → unhealthy node conditions as JSON
	// (NODE_CONDITIONS); "" = every pool uses the defaults.
	NodeConditions string
	// RunDuration 0: the Job probes once. > 0: the Job probes every Interval (SCHEDULE
	// "@every <Interval>") for RunDuration (RUN_DURATION): fewer Jobs and pods, one pod
	// always running per namespace.
	RunDuration time.Duration
	Interval    time.Duration
	TriggerTime time.Time
}

// Probe turns a ProbeSpec into a Spec: `depwatch probe` with its environment, labels
// depwatch.io/kind=probe and depwatch.io/namespace, and the KeepActive policy (never two
// probes of one namespace at once: a launch while one is active creates nothing).
// activeDeadlineSeconds covers RUN_DURATION + three probe timeouts (Secret, API server,
// leases) + the scale chain, plus the template's deadline margin.
func Probe(p ProbeSpec) (Spec, error) {
	switch {
	case p.Namespace == "":
		return Spec{}, fmt.Errorf("probe: namespace is required")
	case p.KubeconfigSecretName == "":
		return Spec{}, fmt.Errorf("probe %s: the kubeconfig Secret name is required", p.Namespace)
	case p.ProbeTimeout <= 0 || p.NodeMonitorGrace <= 0:
		return Spec{}, fmt.Errorf("probe %s: probe timeout and node monitor grace must be positive", p.Namespace)
	case !(p.NodeLeaseFailureFraction > 0 && p.NodeLeaseFailureFraction <= 1) || !(p.LeaseExpiryBufferFraction > 0 && p.LeaseExpiryBufferFraction <= 1):
		return Spec{}, fmt.Errorf("probe %s: fractions must be in (0,1]", p.Namespace)
	case p.DependentResources == "":
		return Spec{}, fmt.Errorf("probe %s: dependent resources are required", p.Namespace)
	case p.RunDuration < 0 || p.ScaleChain < 0:
		return Spec{}, fmt.Errorf("probe %s: durations must not be negative", p.Namespace)
	case p.RunDuration > 0 && p.Interval <= 0:
		return Spec{}, fmt.Errorf("probe %s: a run duration needs a positive interval", p.Namespace)
	}
	env := []corev1.EnvVar{
		{Name: "NAMESPACE", Value: p.Namespace},
		{Name: "KUBECONFIG_SECRET_NAME", Value: p.KubeconfigSecretName},
		{Name: "PROBE_TIMEOUT", Value: p.ProbeTimeout.String()},
		{Name: "KCM_NODE_MONITOR_GRACE_DURATION", Value: p.NodeMonitorGrace.String()},
		{Name: "NODE_LEASE_FAILURE_FRACTION", Value: fmtFraction(p.NodeLeaseFailureFraction)},
		{Name: "LEASE_EXPIRY_BUFFER_FRACTION", Value: fmtFraction(p.LeaseExpiryBufferFraction)},
		{Name: "DEPENDENT_RESOURCES", Value: p.DependentResources},
		{Name: "DRY_RUN", Value: strconv.FormatBool(p.DryRun)},
	}
	if p.NodeConditions != "" {
		env = append(env, corev1.EnvVar{Name: "NODE_CONDITIONS", Value: p.NodeConditions})
	}
	if p.RunDuration > 0 {
		env = append(env,
			corev1.EnvVar{Name: "SCHEDULE", Value: "@every " + p.Interval.String()},
			corev1.EnvVar{Name: "RUN_DURATION", Value: p.RunDuration.String()})
	}
	return Spec{
		Kind:        KindProbe,
		Namespace:   p.Namespace,
		Trigger:     TriggerSchedule,
		TriggerTime: p.TriggerTime,
		RunDuration: p.RunDuration + 3*p.ProbeTimeout + p.ScaleChain,
		Env:         env,
		Args:        []string{"probe"},
		OnActive:    KeepActive,
	}, nil
}

func fmtFraction(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// ExcessHistory returns the finished Jobs to delete so that at most successful Complete and
// failed Failed Jobs remain (like a CronJob's history limits): the oldest go first, by
// completion (or creation) time. Active Jobs are never returned.
func ExcessHistory(list []*batchv1.Job, successful, failed int) []*batchv1.Job {
	var done, bad []*batchv1.Job
	for _, j := range list {
		if j.DeletionTimestamp != nil {
			continue
		}
		switch {
		case conditionTrue(j, batchv1.JobComplete):
			done = append(done, j)
		case conditionTrue(j, batchv1.JobFailed):
			bad = append(bad, j)
		}
	}
	return append(oldestBeyond(done, successful), oldestBeyond(bad, failed)...)
}

func oldestBeyond(list []*batchv1.Job, keep int) []*batchv1.Job {
	if keep < 0 {
		keep = 0
	}
	if len(list) <= keep {
		return nil
	}
	sort.SliceStable(list, func(a, b int) bool {
		ta, tb := finishedAt(list[a]), finishedAt(list[b])
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return list[a].Name < list[b].Name
	})
	return list[:len(list)-keep]
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
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
