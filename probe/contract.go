package probe

import (
	"encoding/json"
	"io"
	"math"
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
	// set writes name only when the setting says something (when); the rest is always written.
	set := func(name, value string, when bool) {
		if when {
			w.Set(name, value)
		}
	}
	set(envNamespace, s.Namespace, s.Namespace != "")
	set(envNamespaces, NamespacesEnv(s.Namespaces), len(s.Namespaces) > 0)
	nsSettings := NamespaceSettingsEnv(s.NamespaceSettings)
	set(envNamespaceSettings, nsSettings, nsSettings != "")
	set(envNamespacesConfigMap, s.Membership, s.Membership != "")
	set(envConcurrency, envconf.FormatInt(s.Concurrency), s.Concurrency > 0)
	set(envJitter, envconf.FormatFloat(s.Jitter), s.Jitter > 0)
	w.Set(envKubeconfigSecret, s.KubeconfigSecretName)
	w.Set(envProbeTimeout, envconf.FormatDuration(s.ProbeTimeout))
	w.Set(envNodeMonitorGrace, envconf.FormatDuration(s.NodeMonitorGrace))
	w.Set(envLeaseFailure, envconf.FormatFloat(s.NodeLeaseFailureFraction))
	w.Set(envLeaseExpiryBuffer, envconf.FormatFloat(s.LeaseExpiryBufferFraction))
	w.Set(envDependentResources, s.DependentResources)
	w.Set(envDryRun, envconf.FormatBool(s.DryRun))
	set(envNodeConditions, NodeConditionsEnv(s.NodeConditions), len(s.NodeConditions) > 0)
	set(envSchedule, everyPrefix+envconf.FormatDuration(s.Interval), s.RunDuration > 0)
	set(envRunDuration, envconf.FormatDuration(s.RunDuration), s.RunDuration > 0)
	s.Client.Write(&w, envKubeAPIQPS, envKubeAPIBurst)
	return w.Env()
}

// NodeConditionsEnv is the value of NODE_CONDITIONS for m; ParseNodeConditions reads it back.
func NodeConditionsEnv(m map[string][]string) string {
	b, _ := json.Marshal(m) // strings only: cannot fail; keys sorted
	return string(b)
}

// Defaults of a run, and of the coordinator's prober section (coordinator/prober), which
// writes them into every probe Job.
const (
	DefaultProbeTimeout              = 30 * time.Second
	DefaultNodeLeaseFailureFraction  = 0.6
	DefaultLeaseExpiryBufferFraction = 0.75
	DefaultProbeConcurrency          = 10
)

// settings are the environment variables of `depwatch probe`: the single source for the
// reader (defaults, what an empty value means; newEnv) and Usage, so the help text cannot
// drift from the parser.
// The order is the order of Usage and of the problems LoadOptions reports.
var settings = []envconf.Var{
	{Name: envNamespace, Desc: "the control-plane namespace: holds the kubeconfig Secret and the dependents to scale (one namespace; set this or NAMESPACES)"},
	{Name: envNamespaces, Desc: "comma-separated control-plane namespaces, probed concurrently, each on its own (a shard of the coordinator's; set this or NAMESPACE)"},
	{Name: envNamespacesConfigMap, Empty: envconf.EmptyUnset, Desc: "<namespace>/<name> of a ConfigMap whose NAMESPACES and NAMESPACE_SETTINGS keys the run follows while it runs (with NAMESPACES and SCHEDULE): a namespace added there is probed from its notBefore on, one removed gets no further probe or scaling (the coordinator's shards)"},
	{Name: envNamespaceSettings, Empty: envconf.EmptyUnset, Desc: "JSON object of namespace → {\"nodeMonitorGrace\": Go duration, \"nodeConditions\": {pool: [conditions]}, \"notBefore\": RFC 3339 time of its first probe}, each field optional: a namespace's own settings over the Job-wide ones"},
	{Name: envConcurrency, Default: envconf.FormatInt(DefaultProbeConcurrency), Desc: "at most this many namespaces are probed (or scaled) at the same moment, an integer > 0; each probe is bounded by PROBE_TIMEOUT, so a hanging control plane holds one slot, never the others"},
	{Name: envJitter, Default: "0", Desc: "with SCHEDULE: each namespace waits its interval × (1 + this × random) between probes, and its first probe of a multi-namespace run is spread over the same fraction of the interval, in [0,1)"},
	{Name: envKubeconfigSecret, Required: true, Desc: "Secret in NAMESPACE whose key `kubeconfig` reaches the control plane's API server (dependency-watchdog's kubeConfigSecretName)"},
	{Name: envProbeTimeout, Default: envconf.FormatDuration(DefaultProbeTimeout), Desc: "bound of the API-server probe and of the lease probe, a Go duration > 0"},
	{Name: envNodeMonitorGrace, Required: true, Desc: "kube-controller-manager's --node-monitor-grace-period, a Go duration of at least 10s (kubelets renew their leases every 10s), e.g. 40s"},
	{Name: envLeaseFailure, Default: envconf.FormatFloat(DefaultNodeLeaseFailureFraction), Desc: "scale down when expired/total node leases >= this fraction, in (0,1]"},
	{Name: envLeaseExpiryBuffer, Default: envconf.FormatFloat(DefaultLeaseExpiryBufferFraction), Desc: "a lease has expired when now > renewTime + this fraction x KCM_NODE_MONITOR_GRACE_DURATION, in (0,1]"},
	{Name: envDependentResources, Required: true, Desc: "JSON list of dependency-watchdog's dependentResourceInfos: [{\"ref\":{\"kind\",\"name\",\"apiVersion\"},\"optional\":bool,\"scaleUp\":{\"level\",\"initialDelay\",\"timeout\"},\"scaleDown\":{...}}]; initialDelay defaults to 0s, timeout to 30s, an absent scaleUp or scaleDown (or level) to level 0"},
	{Name: envNodeConditions, Empty: envconf.EmptyUnset, Desc: "JSON object of worker pool → node condition types that, when True, leave the pool's nodes out of the lease count (the shoot's machineControllerManager.nodeConditions); unset or empty: every pool uses KernelDeadlock, ReadonlyFilesystem, DiskPressure, NetworkUnavailable"},
	{Name: envDryRun, Default: "false", Desc: "probe and decide, log what would be scaled; change nothing, record no Events"},
	{Name: envSchedule, Empty: envconf.EmptyUnset, Desc: "cron spec (optional seconds field; descriptors such as @every 10s): probe now, then on this schedule until RUN_DURATION; probes never overlap; unset or empty = a single probe"},
	{Name: envRunDuration, Empty: envconf.EmptyUnset, Desc: "with SCHEDULE: stop starting probes after this Go duration (> 0; a probe that is scaling is finished, one still reading is abandoned: nothing was changed yet); only valid with SCHEDULE"},
	{Name: envKubeAPIQPS, Default: envconf.FormatFloat(DefaultClientLimit.QPS), Desc: "client-side rate limit of the run's requests to this cluster (Secrets, the dependents' scale and annotations, Events), requests a second, > 0; each shoot's own client has its own"},
	{Name: envKubeAPIBurst, Default: envconf.FormatInt(DefaultClientLimit.Burst), Desc: "requests sent at once before KUBE_API_QPS applies, an integer >= 1"},
}

// Usage writes every setting with its default and a one-line description.
func Usage(w io.Writer) {
	envconf.Usage(w, settings, "\nA variable that is set must hold a valid value: an empty value is an error, except SCHEDULE, RUN_DURATION, NODE_CONDITIONS, NAMESPACE_SETTINGS (empty = unset).")
}

// newEnv is the reader of probe's variables (the settings table): an empty value is refused
// unless the table says it means unset, spaces around a boolean are ignored, and a problem
// quotes at most maxShown bytes of a value.
func newEnv(lookup func(string) (string, bool)) *envconf.Reader {
	return &envconf.Reader{Lookup: lookup, Vars: settings, Empty: envconf.EmptyRefused, TrimBools: true, MaxShown: maxShown}
}

// maxShown bounds how much of a value a problem quotes (DEPENDENT_RESOURCES can be long).
const maxShown = 200

func shorten(s string) string { return envconf.Shorten(s, maxShown) }

// positiveDuration parses a Go duration > 0 (ok=false when unset or bad).
func positiveDuration(e *envconf.Reader, name, v string) (time.Duration, bool) {
	d, err := envconf.Duration(v)
	switch {
	case err != nil:
		e.Fail(name, v, "must be a Go duration such as 30s, 1m or 1h30m")
		return 0, false
	case d <= 0:
		e.Fail(name, v, "must be greater than 0")
		return 0, false
	}
	return d, true
}

// fraction reads a number in (0,1] (0 when unset or bad). NaN and infinities are rejected explicitly: NaN compares
// false against everything and would silently disable the decision.
func fraction(e *envconf.Reader, name string) float64 {
	v, ok := e.Get(name)
	if !ok {
		return 0
	}
	f, ok := envconf.Float(v)
	if !ok || f <= 0 || f > 1 {
		e.Fail(name, v, "must be a number greater than 0 and at most 1")
		return 0
	}
	return f
}

// The client-side rate limit of the run's requests to the cluster it runs in (Secrets, the
// dependents' scale and annotations, Events), as a Job's pod has it; the shoots' own clients
// keep theirs. A run the coordinator carries out in its own process does not read it: its
// requests share the process's one budget (coordinator/inprocess).
const (
	envKubeAPIQPS   = "KUBE_API_QPS"
	envKubeAPIBurst = "KUBE_API_BURST"
)

// DefaultClientLimit is the run's limit where KUBE_API_* are unset: client-go's default.
var DefaultClientLimit = apilimit.Default

// A probe reads two objects of the cluster it runs in, the kubeconfig Secret (the typed
// client) and the Machines (the dynamic client), each client with a bucket of the run's
// limit of its own. At client-go's default, 5 a second, one pod probes at most 5 namespaces
// a second: 50 every 10 s, no more, so a larger shard would probe each namespace less often
// than every probeInterval. A shard's Job is sized to its namespaces instead.
const (
	// shardQPSPerNamespace is in requests per probeInterval per namespace and client: one,
	// doubled for the jitter (an interval may be shorter) and a scaling's patches and Events.
	shardQPSPerNamespace = 2
	// shardBurstPerNamespace: every namespace's first probe may come at once.
	shardBurstPerNamespace = 1
)

// ShardClientLimit is the limit of a shard's Job that probes up to namespaces namespaces every
// interval (0: each once): per namespace × namespaces, never below DefaultClientLimit.
func ShardClientLimit(namespaces int, interval time.Duration) apilimit.Limit {
	perSecond := float64(namespaces) // probed once each: within about a second
	if interval > 0 {
		perSecond = float64(shardQPSPerNamespace*namespaces) / interval.Seconds()
	}
	return apilimit.Limit{
		QPS:   max(DefaultClientLimit.QPS, math.Ceil(perSecond)),
		Burst: max(DefaultClientLimit.Burst, shardBurstPerNamespace*namespaces),
	}
}
