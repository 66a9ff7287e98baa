package probe

import (
	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
)

// The client-side rate limit of the run's requests to the cluster it runs in (Secrets, the
// dependents' scale and annotations, Events); the shoots' own clients keep theirs.
const (
	envKubeAPIQPS   = "KUBE_API_QPS"
	envKubeAPIBurst = "KUBE_API_BURST"
)

// DefaultClientLimit is the run's limit where KUBE_API_* are unset: client-go's default.
var DefaultClientLimit = apilimit.Default

// loadClientLimit reads KUBE_API_QPS and KUBE_API_BURST as they are set (unset stays zero, so
// a Job's environment reads back as written; the run applies DefaultClientLimit).
func loadClientLimit(e *env) apilimit.Limit {
	return apilimit.Read(&e.Reader, envKubeAPIQPS, envKubeAPIBurst)
}

func writeClientLimit(w *envconf.Writer, l apilimit.Limit) {
	l.Write(w, envKubeAPIQPS, envKubeAPIBurst)
}

// The limit's rows join the settings table here, so that this concern stays in one file.
func init() {
	settings = append(settings,
		setting{name: envKubeAPIQPS, def: envconf.FormatFloat(DefaultClientLimit.QPS), desc: "client-side rate limit of the run's requests to this cluster (Secrets, the dependents' scale and annotations, Events), requests a second, > 0; each shoot's own client has its own"},
		setting{name: envKubeAPIBurst, def: envconf.FormatInt(DefaultClientLimit.Burst), desc: "requests sent at once before KUBE_API_QPS applies, an integer >= 1"},
	)
}
