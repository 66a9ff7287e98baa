package coordinator

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/coordinator/prober"
)

// proberLeases are what the prober needs to know to stand aside for dependency-watchdog's
// prober (prober.standAsideForDependencyWatchdog): where that Lease is when the config names
// no namespace (dependency-watchdog's own default, garden; in the `dependency-watchdog prober`
// command, the namespace of the Lease it elects through, which is dependency-watchdog's), the
// Lease this coordinator elects through (never stood aside for: in that command it is the very
// Lease), and what the prober's Events are about (that Lease; nil without leader election).
func proberLeases(o Options, lookup func(string) (string, bool)) (dwdNamespace string, own *prober.LeaseRef, self *corev1.ObjectReference) {
	if o.Role == RoleProber {
		dwdNamespace = leaseNamespace(o)
	}
	if !o.EnableLeaderElection {
		pod, _ := lookup("POD_NAME")
		ns, _ := lookup("POD_NAMESPACE")
		if pod != "" && ns != "" {
			self = &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: pod}
		}
		return dwdNamespace, nil, self
	}
	own = &prober.LeaseRef{Namespace: leaseNamespace(o), Name: o.Lease()}
	self = &corev1.ObjectReference{Kind: "Lease", APIVersion: "coordination.k8s.io/v1", Namespace: own.Namespace, Name: own.Name}
	return dwdNamespace, own, self
}
