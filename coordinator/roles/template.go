package roles

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/depwatch/depwatch/jobs"
)

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
