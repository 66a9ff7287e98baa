package probe

import (
	"math"
	"time"

	"github.com/depwatch/depwatch/internal/apilimit"
)

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
