package probe

import (
	"io"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
)

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
