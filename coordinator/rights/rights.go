// Package rights asks once, at start, what this process's service account may do among the
// things depwatch's own install grants and gardenlet's dependency-watchdog RBAC does not
// (Check), and decides what follows from it then: what carries the runs out (ChooseExecutor)
// and where Events are written (InNamespace).
package rights

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/jobs"
)

// Rights are what this process's service account may do among the things depwatch's own
// install grants and a Gardener seed's dependency-watchdog RBAC does not, asked once at start
// with SelfSubjectAccessReviews, so that each choice they decide is made and said then, never
// found by a request that fails.
type Rights struct {
	CreateJobs bool // batch jobs: create, in the Jobs' namespace (the Job executor)
	Events     bool // events: create, in every namespace (Events on Services, pods, dependents)
	Namespaces bool // namespaces: list and watch (is a service's namespace going away)
	Services   bool // services: get (is a Service that went down being deleted)
	Slices     bool // discovery.k8s.io endpointslices: list and watch
	Endpoints  bool // endpoints: list and watch (dependency-watchdog's weeder before EndpointSlices)
	// Workloads: apps deployments, statefulsets and daemonsets: list and watch (the
	// depends-on annotation); each is asked, and all three must be granted.
	Workloads bool
	// What the runs themselves need, for the in-process executor (a Job has its own service
	// account): the weeder's and the probe's.
	DeletePods     bool // pods: delete, in every namespace
	ScaleWorkloads bool // apps deployments/scale: patch, in every namespace
	ReadSecrets    bool // secrets: get, in every namespace (the probe's kubeconfig Secrets)
	// ScaleTargets: configmaps: list, create and update, in the Jobs' namespace (the probe admission
	// policy's parameters, jobs.ScaleTargets). Not granted under gardenlet's RBAC: the
	// parameters are not written there.
	ScaleTargets bool
	// Unknown names the reviews that could not be made; each counts as not granted.
	Unknown []string
	asked   int
}

// Unreachable: not one review could be made (the API server is out of reach).
func (r Rights) Unreachable() bool { return r.asked > 0 && len(r.Unknown) == r.asked }

// All is what depwatch's own install grants the coordinator and its runs: what a
// coordinator assumes when it asks nothing (tests, embedding).
func All() Rights {
	return Rights{CreateJobs: true, Events: true, Namespaces: true, Services: true, Slices: true, Endpoints: true, Workloads: true,
		DeletePods: true, ScaleWorkloads: true, ReadSecrets: true, ScaleTargets: true}
}

// review is one question: may this service account do verbs on resource in namespace ("":
// every namespace)? A denial takes granted away; more than one review may answer for one
// right (Workloads), which all of them must grant.
type review struct {
	group, resource, namespace string
	verbs                      []string
	granted                    *bool
}

// Check asks the API server, one SelfSubjectAccessReview per verb, concurrently, what
// this service account may do (Rights). jobNamespace is where Jobs would be created. A review
// that cannot be made counts as denied, and is named in Unknown.
func Check(ctx context.Context, client kubernetes.Interface, jobNamespace string) Rights {
	out := All() // each right granted until a review denies it
	reviews := []review{
		{"batch", "jobs", jobNamespace, []string{"create"}, &out.CreateJobs},
		{"", "events", "", []string{"create"}, &out.Events},
		{"", "namespaces", "", []string{"list", "watch"}, &out.Namespaces},
		{"", "services", "", []string{"get"}, &out.Services},
		{"discovery.k8s.io", "endpointslices", "", []string{"list", "watch"}, &out.Slices},
		{"", "endpoints", "", []string{"list", "watch"}, &out.Endpoints},
		{"", "pods", "", []string{"delete"}, &out.DeletePods},
		{"apps", "deployments/scale", "", []string{"patch"}, &out.ScaleWorkloads},
		{"", "secrets", "", []string{"get"}, &out.ReadSecrets},
		{"", "configmaps", jobNamespace, []string{"list", "create", "update"}, &out.ScaleTargets},
	}
	for _, res := range []string{"deployments", "statefulsets", "daemonsets"} {
		reviews = append(reviews, review{"apps", res, "", []string{"list", "watch"}, &out.Workloads})
	}
	out.asked = len(reviews)
	ok, errs := make([]bool, len(reviews)), make([]error, len(reviews))
	var wg sync.WaitGroup
	for i, rv := range reviews {
		wg.Go(func() { ok[i], errs[i] = allowed(ctx, client, rv) })
	}
	wg.Wait()
	for i, rv := range reviews {
		*rv.granted = *rv.granted && ok[i]
		if errs[i] != nil {
			out.Unknown = append(out.Unknown, fmt.Sprintf("%s: %v", rv.describe(), errs[i]))
		}
	}
	return out
}

// allowed: every verb of rv is allowed.
func allowed(ctx context.Context, client kubernetes.Interface, rv review) (bool, error) {
	resource, sub, _ := strings.Cut(rv.resource, "/")
	for _, verb := range rv.verbs {
		res, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: rv.namespace, Verb: verb, Group: rv.group, Resource: resource, Subresource: sub,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking the API server: %w", err)
		}
		if !res.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}

func (rv review) describe() string {
	where := "every namespace"
	if rv.namespace != "" {
		where = "namespace " + rv.namespace
	}
	res := rv.resource
	if rv.group != "" {
		res = rv.group + " " + res
	}
	return fmt.Sprintf("%s %s in %s", strings.Join(rv.verbs, ", "), res, where)
}

// ExecutorChoice is --executor: where the coordinator's runs go.
type ExecutorChoice string

const (
	ExecutorChoiceJob       ExecutorChoice = "job"
	ExecutorChoiceInProcess ExecutorChoice = "in-process"
	// ExecutorChoiceAuto: Jobs where this service account may create them, else in-process.
	// dependency-watchdog's commands always choose so.
	ExecutorChoiceAuto ExecutorChoice = "auto"
)

// UnmarshalText reads --executor: job, in-process or auto.
func (c *ExecutorChoice) UnmarshalText(text []byte) error {
	switch v := ExecutorChoice(text); v {
	case ExecutorChoiceJob, ExecutorChoiceInProcess, ExecutorChoiceAuto:
		*c = v
		return nil
	}
	return errors.New("must be job, in-process or auto")
}

// MarshalText is --executor's value.
func (c ExecutorChoice) MarshalText() ([]byte, error) { return []byte(c), nil }

// ChooseExecutor decides, once at start, what carries the runs out, and says why: the
// coordinator follows --executor (auto: Jobs where this service account may create them);
// dependency-watchdog's commands, which gardenlet starts under RBAC that grants no Jobs, run
// in-process unless the SelfSubjectAccessReview showed the Job rights depwatch's own install
// grants. jobNamespace is where Jobs would be created.
func ChooseExecutor(role roles.Role, choice ExecutorChoice, canCreateJobs bool, jobNamespace string) (jobs.ExecutorKind, string) {
	byRights, may := jobs.ExecutorInProcess, "may not"
	if canCreateJobs {
		byRights, may = jobs.ExecutorJob, "may"
	}
	rights := fmt.Sprintf("this service account %s create Jobs in namespace %s", may, jobNamespace)
	switch {
	case role != roles.Coordinator:
		rbac := map[bool]string{true: "depwatch's own RBAC", false: "as under gardenlet's RBAC"}[canCreateJobs]
		return byRights, "dependency-watchdog's " + string(role) + " command, and " + rights + " (" + rbac + ")"
	case choice == ExecutorChoiceInProcess:
		return jobs.ExecutorInProcess, "--executor=in-process"
	case choice == ExecutorChoiceAuto:
		return byRights, "--executor=auto, and " + rights
	}
	return jobs.ExecutorJob, "--executor=job (the default)"
}

// InNamespace is a recorder that writes only the Events of objects in namespace, where a
// service account that may not create Events elsewhere (gardenlet's dependency-watchdog
// RBAC: Events in garden, for the Lease) may create them; the others are dropped, so no
// request is refused. What they would have said is in the coordinator's log lines.
func InNamespace(r record.EventRecorder, namespace string) record.EventRecorder {
	return namespacedRecorder{r: r, namespace: namespace}
}

type namespacedRecorder struct {
	r         record.EventRecorder
	namespace string
}

func (n namespacedRecorder) allowed(obj runtime.Object) bool {
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		return ref.Namespace == n.namespace
	}
	m, err := meta.Accessor(obj)
	return err == nil && m.GetNamespace() == n.namespace
}

func (n namespacedRecorder) Event(obj runtime.Object, eventType, reason, message string) {
	if n.allowed(obj) {
		n.r.Event(obj, eventType, reason, message)
	}
}

func (n namespacedRecorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	if n.allowed(obj) {
		n.r.Eventf(obj, eventType, reason, format, args...)
	}
}

func (n namespacedRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventType, reason, format string, args ...any) {
	if n.allowed(obj) {
		n.r.AnnotatedEventf(obj, annotations, eventType, reason, format, args...)
	}
}
