package probe

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
)

// The variables of a probe run: the settings table (Usage, defaults), LoadOptions and
// JobSettings.Env all use these names, so the writer and the reader cannot disagree.
const (
	envNamespace           = "NAMESPACE"
	envNamespaces          = "NAMESPACES"
	envNamespaceSettings   = "NAMESPACE_SETTINGS"
	envNamespacesConfigMap = "NAMESPACES_CONFIGMAP"
	envConcurrency         = "PROBE_CONCURRENCY"
	envJitter              = "BACKOFF_JITTER_FACTOR"
	envKubeconfigSecret    = "KUBECONFIG_SECRET_NAME"
	envProbeTimeout        = "PROBE_TIMEOUT"
	envNodeMonitorGrace    = "KCM_NODE_MONITOR_GRACE_DURATION"
	envLeaseFailure        = "NODE_LEASE_FAILURE_FRACTION"
	envLeaseExpiryBuffer   = "LEASE_EXPIRY_BUFFER_FRACTION"
	envDependentResources  = "DEPENDENT_RESOURCES"
	envNodeConditions      = "NODE_CONDITIONS"
	envDryRun              = "DRY_RUN"
	envSchedule            = "SCHEDULE"
	envRunDuration         = "RUN_DURATION"
)

// JobEnvNames are the variables JobSettings.Env can write, in the settings table's order: all
// of a probe Job's environment that is its run's own. The admission policy that keeps the
// coordinator to launching depwatch's Jobs admits no other name in a probe Job
// (manifests/admission/jobs.yaml; a test keeps the two equal).
func JobEnvNames() []string {
	names := make([]string, 0, len(settings))
	for _, s := range settings {
		names = append(names, s.Name)
	}
	return names
}

// everyPrefix starts the SCHEDULE of a run that probes every Interval.
const everyPrefix = "@every "

// JobSettings are a probe run's settings as plain values, what the coordinator puts into a
// probe Job. Env writes them; LoadOptions reads them back into the Options they mean, which
// the round-trip test proves for generated values.
type JobSettings struct {
	// Namespace (NAMESPACE) or Namespaces (NAMESPACES, a shard): set one.
	Namespace  string
	Namespaces []string
	// NamespaceSettings (NAMESPACE_SETTINGS): a namespace's own settings over the Job-wide
	// ones; namespaces with nothing to say are left out.
	NamespaceSettings map[string]NamespaceSettings
	// Membership (NAMESPACES_CONFIGMAP), "<namespace>/<name>": the ConfigMap the run follows
	// for its namespaces (a shard's, written by the coordinator); "" = the list is fixed.
	Membership  string
	Concurrency int     // PROBE_CONCURRENCY, written when > 0
	Jitter      float64 // BACKOFF_JITTER_FACTOR, written when > 0

	KubeconfigSecretName      string        // KUBECONFIG_SECRET_NAME
	ProbeTimeout              time.Duration // PROBE_TIMEOUT
	NodeMonitorGrace          time.Duration // KCM_NODE_MONITOR_GRACE_DURATION
	NodeLeaseFailureFraction  float64       // NODE_LEASE_FAILURE_FRACTION
	LeaseExpiryBufferFraction float64       // LEASE_EXPIRY_BUFFER_FRACTION
	// DependentResources is dependentResourceInfos as JSON (DEPENDENT_RESOURCES), written as
	// it is: the coordinator's compact form of its config.
	DependentResources string
	DryRun             bool // DRY_RUN, always written
	// NodeConditions (NODE_CONDITIONS): worker pool → unhealthy node conditions; nil = the
	// defaults for every pool.
	NodeConditions map[string][]string
	// RunDuration > 0: probe every Interval (SCHEDULE "@every <Interval>") for RunDuration
	// (RUN_DURATION); 0: probe once, neither written.
	RunDuration time.Duration
	Interval    time.Duration
	// Client: KUBE_API_QPS and KUBE_API_BURST, each written when set.
	Client apilimit.Limit
}

// Env is the environment that LoadOptions reads back as s.
func (s JobSettings) Env() []corev1.EnvVar {
	var w envconf.Writer
	if s.Namespace != "" {
		w.Set(envNamespace, s.Namespace)
	}
	if len(s.Namespaces) > 0 {
		w.Set(envNamespaces, NamespacesEnv(s.Namespaces))
	}
	if v := NamespaceSettingsEnv(s.NamespaceSettings); v != "" {
		w.Set(envNamespaceSettings, v)
	}
	if s.Membership != "" {
		w.Set(envNamespacesConfigMap, s.Membership)
	}
	if s.Concurrency > 0 {
		w.Set(envConcurrency, envconf.FormatInt(s.Concurrency))
	}
	if s.Jitter > 0 {
		w.Set(envJitter, envconf.FormatFloat(s.Jitter))
	}
	w.Set(envKubeconfigSecret, s.KubeconfigSecretName)
	w.Set(envProbeTimeout, envconf.FormatDuration(s.ProbeTimeout))
	w.Set(envNodeMonitorGrace, envconf.FormatDuration(s.NodeMonitorGrace))
	w.Set(envLeaseFailure, envconf.FormatFloat(s.NodeLeaseFailureFraction))
	w.Set(envLeaseExpiryBuffer, envconf.FormatFloat(s.LeaseExpiryBufferFraction))
	w.Set(envDependentResources, s.DependentResources)
	w.Set(envDryRun, envconf.FormatBool(s.DryRun))
	if len(s.NodeConditions) > 0 {
		w.Set(envNodeConditions, NodeConditionsEnv(s.NodeConditions))
	}
	if s.RunDuration > 0 {
		w.Set(envSchedule, everyPrefix+envconf.FormatDuration(s.Interval))
		w.Set(envRunDuration, envconf.FormatDuration(s.RunDuration))
	}
	writeClientLimit(&w, s.Client)
	return w.Env()
}

// NodeConditionsEnv is the value of NODE_CONDITIONS for m; ParseNodeConditions reads it back.
func NodeConditionsEnv(m map[string][]string) string {
	b, _ := json.Marshal(m) // strings only: cannot fail; keys sorted
	return string(b)
}
