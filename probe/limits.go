package probe

import (
	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
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

// loadClientLimit reads KUBE_API_QPS and KUBE_API_BURST as they are set (unset stays zero, so
// a Job's environment reads back as written; the run applies DefaultClientLimit).
func loadClientLimit(e *envconf.Reader) apilimit.Limit {
	return apilimit.Read(e, envKubeAPIQPS, envKubeAPIBurst)
}

func writeClientLimit(w *envconf.Writer, l apilimit.Limit) {
	l.Write(w, envKubeAPIQPS, envKubeAPIBurst)
}
