package coordinator

import (
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/coordinator/roles"
)

// proberLeases are what the prober needs to know to stand aside for dependency-watchdog's
// prober (prober.standAsideForDependencyWatchdog): where that Lease is when the config names
// no namespace (dependency-watchdog's own default, garden; in the `dependency-watchdog prober`
// command, the namespace of the Lease it elects through, which is dependency-watchdog's), the
// Lease this coordinator elects through (never stood aside for: in that command it is the very
// Lease), and what the prober's Events are about (that Lease; nil without leader election).
func proberLeases(o Options, lookup func(string) (string, bool)) (dwdNamespace string, own *prober.LeaseRef, self *corev1.ObjectReference) {
	if o.Role == roles.Prober {
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

// standAsideSummary is --check-config's sentence on prober.standAsideForDependencyWatchdog.
func standAsideSummary(o Options, p *prober.Config) string {
	dwdNS, own, _ := proberLeases(o, os.LookupEnv)
	ref, on := p.StandAsideLease(dwdNS)
	switch {
	case !on:
		return "Does not stand aside for dependency-watchdog's prober (standAsideForDependencyWatchdog.enabled: false)."
	case own != nil && *own == ref:
		return fmt.Sprintf("Elects through dependency-watchdog's prober Lease %s itself, in its place.", ref)
	}
	return fmt.Sprintf("Probes nothing while dependency-watchdog's prober holds its Lease %s (renewed within its leaseDurationSeconds).", ref)
}
