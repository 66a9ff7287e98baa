// Package roles is which half of the coordinator's work a process does (Role: both, or
// dependency-watchdog's weeder or prober command) and what follows from it alone: the Leases
// dependency-watchdog's commands elect through, the process's home namespace, where its
// runs go and its Lease lives unless a setting names another, and the template its runs'
// Jobs are made from (ResolveTemplate, InProcessTemplate).
package roles

import (
	"cmp"
	"os"
	"strings"

	"github.com/depwatch/depwatch/jobs"
)

// Role is which half of the coordinator's work a process does.
type Role string

const (
	// Coordinator: both halves (`depwatch coordinator`).
	Coordinator Role = ""
	// Weeder: dependency-watchdog's weeder command; --config-file is its weeder ConfigMap.
	Weeder Role = "weeder"
	// Prober: dependency-watchdog's prober command; --config-file is its prober ConfigMap.
	Prober Role = "prober"
)

// Command is the subcommand that runs the role, as it names itself in its messages.
func (r Role) Command() string {
	if r == Coordinator {
		return "coordinator"
	}
	return string(r)
}

// The Leases dependency-watchdog's commands elect through; gardenlet's Roles grant these.
const (
	WeederLeaseName = "dwd-weeder-leader-election"
	ProberLeaseName = "dwd-prober-leader-election"
	// DWDLeaseNamespace is dependency-watchdog's --leader-election-namespace default, taken
	// when the process does not know its own namespace.
	DWDLeaseNamespace = "garden"
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
	if role == Coordinator {
		return DefaultNamespace
	}
	return DWDLeaseNamespace
}

// RunNamespace is where the runs go: jobTemplate.namespace, else HomeNamespace.
func RunNamespace(role Role, t jobs.Template, lookup func(string) (string, bool)) string {
	return cmp.Or(t.Namespace, HomeNamespace(role, lookup))
}
