// Package roles is which half of the coordinator's work a process does (Role: both, or
// dependency-watchdog's weeder or prober command) and what follows from it alone: the Leases
// dependency-watchdog's commands elect through, the process's home namespace, where its
// runs go and its Lease lives unless a setting names another, and the template its runs'
// Jobs are made from (ResolveTemplate, InProcessTemplate).
package roles

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

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

// ErrImageRequired: the config names no Job image and the coordinator has no pod to copy it from.
var ErrImageRequired = errors.New("jobTemplate.image: required when the coordinator does not run in a pod (POD_NAME and POD_NAMESPACE unset)")

// ResolveTemplate fills what the config's jobTemplate leaves open: the namespace (the
// process's home, HomeNamespace) and the image and pull policy (those of the coordinator's
// own container, read from its pod named by POD_NAME, so one kustomize `images:` entry sets
// both). Outside a pod the image must be in the config.
func ResolveTemplate(ctx context.Context, client kubernetes.Interface, role Role, t jobs.Template, lookup func(string) (string, bool)) (jobs.Template, error) {
	t.Namespace = RunNamespace(role, t, lookup)
	if t.Image != "" {
		return t, nil
	}
	pod, _ := lookup("POD_NAME")
	ns, _ := lookup("POD_NAMESPACE")
	if pod == "" || ns == "" {
		return t, ErrImageRequired
	}
	p, err := client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return t, fmt.Errorf("reading the coordinator's own pod %s/%s for the Job image (or set jobTemplate.image): %w", ns, pod, err)
	}
	if len(p.Spec.Containers) == 0 {
		return t, fmt.Errorf("the coordinator's pod %s/%s has no container (set jobTemplate.image)", ns, pod)
	}
	// The container named coordinator, else the first.
	c := p.Spec.Containers[max(0, slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == "coordinator" }))]
	t.Image = c.Image
	if t.ImagePullPolicy == "" {
		t.ImagePullPolicy = c.ImagePullPolicy
	}
	return t, nil
}

// InProcessImage is the image a run's Job object names when the in-process executor carries
// it out: no pod is made from it.
const InProcessImage = "in-process"

// InProcessTemplate fills what the config's jobTemplate leaves open for the in-process
// executor: the namespace (the process's home, HomeNamespace), and an image no pod is made
// from. The runs' Job objects are built from it, so their names, labels and annotations are
// a Job's.
func InProcessTemplate(role Role, t jobs.Template, lookup func(string) (string, bool)) jobs.Template {
	t.Namespace = RunNamespace(role, t, lookup)
	if t.Image == "" {
		t.Image = InProcessImage
	}
	return t
}
