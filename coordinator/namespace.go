package coordinator

import (
	"cmp"
	"os"
	"strings"

	"github.com/depwatch/depwatch/jobs"
)

// DefaultNamespace is depwatch's own install's namespace, the coordinator's home when the
// process does not know its own.
const DefaultNamespace = "depwatch"

const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// HomeNamespace is the one namespace rule of a process, under every command: where its runs
// go (their Jobs, or in-process the namespace their Job names carry) when jobTemplate names
// none, and where its Lease lives when --leader-election-namespace names none. It is the
// process's own namespace (POD_NAMESPACE from the downward API, else the service account's
// namespace file, which gardener-resource-manager projects with the token where gardenlet
// turns automounting off), else the command's default (homeNamespace).
func HomeNamespace(role Role, lookup func(string) (string, bool)) string {
	pod, _ := lookup("POD_NAMESPACE")
	var sa string
	if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		sa = string(b)
	}
	return homeNamespace(role, pod, sa)
}

// homeNamespace decides HomeNamespace from what the process knows: the pod's namespace, else
// the service account's, else the command's default: dependency-watchdog's
// (DWDLeaseNamespace, garden, where gardenlet runs it) under its weeder and prober commands,
// depwatch's (DefaultNamespace) under the coordinator.
func homeNamespace(role Role, podNamespace, serviceAccountNamespace string) string {
	if ns := cmp.Or(strings.TrimSpace(podNamespace), strings.TrimSpace(serviceAccountNamespace)); ns != "" {
		return ns
	}
	if role == RoleCoordinator {
		return DefaultNamespace
	}
	return DWDLeaseNamespace
}

// LeaseNamespace is where the Lease lives: --leader-election-namespace, else HomeNamespace.
func (o Options) LeaseNamespace(lookup func(string) (string, bool)) string {
	return cmp.Or(o.LeaderElectionNamespace, HomeNamespace(o.Role, lookup))
}

// RunNamespace is where the runs go: jobTemplate.namespace, else HomeNamespace.
func RunNamespace(role Role, t jobs.Template, lookup func(string) (string, bool)) string {
	return cmp.Or(t.Namespace, HomeNamespace(role, lookup))
}
