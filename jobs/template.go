package jobs

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// Template is the installation's say in how Jobs look: the `jobTemplate` section of the
// coordinator's config file. Everything is optional except the image (which the coordinator
// takes from its own pod when the config leaves it empty).
type Template struct {
	// Namespace the Jobs are created in; default: the coordinator's own namespace.
	Namespace string `json:"namespace,omitempty"`
	// Image of the depwatch binary (entrypoint /depwatch); default: the coordinator's image.
	Image           string            `json:"image,omitempty"`
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// ImagePullSecrets of the Jobs' pods, for an image in a private registry: Secrets in
	// the Jobs' namespace. The chart fills it from its imagePullSecrets value.
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// ServiceAccounts per Job kind; defaults: weeder → depwatch-weeder, probe → depwatch-probe,
	// reap → depwatch-reaper.
	ServiceAccounts map[Kind]string `json:"serviceAccounts,omitempty"`
	// Resources of the Job's container; default: requests cpu 10m, memory 48Mi; limit memory 128Mi
	// (measured: a lone weeder about 29 MiB RSS, a probe shard 35-41, a storm's batch of 500
	// about 50, docs/benchmarks.md; the limit leaves room for a larger cluster's caches).
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Placement of the Jobs' pods, as in a pod spec. The chart fills each from its value of
	// the same name (the coordinator's placement) unless the config sets it here.
	NodeSelector      map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations       []corev1.Toleration `json:"tolerations,omitempty"`
	Affinity          *corev1.Affinity    `json:"affinity,omitempty"`
	PriorityClassName string              `json:"priorityClassName,omitempty"`
	// HostNetwork for clusters where pods reach the API server only from the host network.
	HostNetwork bool `json:"hostNetwork,omitempty"`
	// Env is added to every Job's container after the kind's own variables, which it cannot
	// override (e.g. LOG_FORMAT, LOG_LEVEL, KUBERNETES_SERVICE_HOST).
	Env []corev1.EnvVar `json:"env,omitempty"`
	// TTLSecondsAfterFinished: how long a finished Job stays for `kubectl logs` (default 3600).
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// BackoffLimit: pod retries of a Job (default 2).
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// DeadlineMargin is added to a run's duration for activeDeadlineSeconds (default 2m).
	DeadlineMargin *metav1.Duration `json:"deadlineMargin,omitempty"`
	// Labels and Annotations added to Jobs and their pods (depwatch's own keys win).
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ServiceAccountFor returns the service account Jobs of kind k run as: the template's, else
// depwatch-weeder, depwatch-probe, or depwatch-reaper for every other kind.
func (t Template) ServiceAccountFor(k Kind) string {
	return cmp.Or(t.ServiceAccounts[k], map[Kind]string{KindWeeder: "depwatch-weeder", KindProbe: "depwatch-probe"}[k], "depwatch-reaper")
}

// Validate reports the first invalid field, named by its path under prefix (e.g. "jobTemplate").
// The image may be empty here: the coordinator fills it from its own pod.
func (t Template) Validate(prefix string) []error {
	var errs []error
	f := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: "+format, append([]any{prefix, field}, a...)...))
	}
	if t.Namespace != "" {
		for _, m := range validation.IsDNS1123Label(t.Namespace) {
			f("namespace", "%q: %s", t.Namespace, m)
		}
	}
	switch t.ImagePullPolicy {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		f("imagePullPolicy", "%q: must be Always, IfNotPresent or Never", t.ImagePullPolicy)
	}
	for k, sa := range t.ServiceAccounts {
		switch k {
		case KindWeeder, KindProbe, KindReap:
		default:
			f("serviceAccounts", "unknown Job kind %q: must be weeder, probe or reap", k)
		}
		for _, m := range validation.IsDNS1123Subdomain(sa) {
			f("serviceAccounts."+string(k), "%q: %s", sa, m)
		}
	}
	for i, s := range t.ImagePullSecrets {
		field := fmt.Sprintf("imagePullSecrets[%d].name", i)
		if s.Name == "" {
			f(field, "required: the name of a Secret of type kubernetes.io/dockerconfigjson in the Jobs' namespace")
			continue
		}
		for _, m := range validation.IsDNS1123Subdomain(s.Name) {
			f(field, "%q: %s", s.Name, m)
		}
	}
	errs = append(errs, validateAffinity(t.Affinity, prefix+".affinity")...)
	if t.TTLSecondsAfterFinished != nil && *t.TTLSecondsAfterFinished < 0 {
		f("ttlSecondsAfterFinished", "%d: must not be negative", *t.TTLSecondsAfterFinished)
	}
	if t.BackoffLimit != nil && (*t.BackoffLimit < 0 || *t.BackoffLimit > MaxBackoffLimit) {
		f("backoffLimit", "%d: must be between 0 and %d (the admission policy admits no Job that retries more)", *t.BackoffLimit, MaxBackoffLimit)
	}
	if t.DeadlineMargin != nil && t.DeadlineMargin.Duration < 0 {
		f("deadlineMargin", "%s: must not be negative", t.DeadlineMargin.Duration)
	}
	if t.DeadlineMargin != nil && t.DeadlineMargin.Duration > MaxDeadlineMargin {
		f("deadlineMargin", "%s: must be at most %s", t.DeadlineMargin.Duration, MaxDeadlineMargin)
	}
	for i, e := range t.Env {
		if e.Name == "" {
			f(fmt.Sprintf("env[%d].name", i), "must not be empty")
		}
		if e.ValueFrom != nil {
			f(fmt.Sprintf("env[%d].valueFrom", i), "%s: not allowed: a Job's variables are literal values (the admission policy admits no Secret, ConfigMap or field reference)", e.Name)
		}
	}
	for k, v := range t.Labels {
		for _, m := range validation.IsQualifiedName(k) {
			f("labels", "key %q: %s", k, m)
		}
		for _, m := range validation.IsValidLabelValue(v) {
			f("labels."+k, "%q: %s", v, m)
		}
	}
	return errs
}

// MaxBackoffLimit bounds BackoffLimit: Kubernetes' own default, and what the admission policy
// admits (manifests/admission/jobs.yaml).
const MaxBackoffLimit = 6

// MaxDeadlineMargin bounds DeadlineMargin: Build adds it to a run's duration, and a huge
// margin would overflow the sum into a negative, clamped-to-1s deadline.
const MaxDeadlineMargin = 365 * 24 * time.Hour

func (t Template) deadlineMargin() time.Duration {
	if t.DeadlineMargin != nil {
		return t.DeadlineMargin.Duration
	}
	return DefaultDeadlineMargin
}

func defaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("10m"),
			corev1.ResourceMemory: resource.MustParse("48Mi"),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("128Mi"),
		},
	}
}

// Build turns a Spec and the Template into the Job to create in namespace t.Namespace (which
// the caller has resolved). It is pure: the same inputs give the same Job.
func Build(t Template, s Spec) (*batchv1.Job, error) {
	if err := buildable(t, s); err != nil {
		return nil, err
	}
	// The template's labels under the kind's extra ones under depwatch's own, which the
	// coordinator's selectors rely on.
	labels, annotations := merged(t.Labels, s.ExtraLabels, s.Labels()), jobAnnotations(t, s)
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        s.Name(),
			Namespace:   t.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To(ptr.Deref(t.BackoffLimit, DefaultBackoffLimit)),
			ActiveDeadlineSeconds:   ptr.To(activeDeadlineSeconds(t, s)),
			TTLSecondsAfterFinished: ptr.To(ptr.Deref(t.TTLSecondsAfterFinished, DefaultTTL)),
			PodFailurePolicy:        failOnBadConfig(string(s.Kind)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels), Annotations: maps.Clone(annotations)},
				Spec:       podSpec(t, s),
			},
		},
	}, nil
}

func buildable(t Template, s Spec) error {
	switch {
	case t.Image == "":
		return fmt.Errorf("jobTemplate.image: required (no image to run %s Jobs with)", s.Kind)
	case t.Namespace == "":
		return fmt.Errorf("jobTemplate.namespace: required (where to create %s Jobs)", s.Kind)
	case s.Kind == "" || (s.Namespace == "" && len(s.Batch) == 0):
		return fmt.Errorf("job spec: kind and namespace are required")
	}
	return nil
}

// jobAnnotations are the template's annotations under the facts.
func jobAnnotations(t Template, s Spec) map[string]string {
	annotations := merged(t.Annotations)
	// The facts are the coordinator's to write: a template's annotation must not make a
	// Job look armed, or cover another target.
	maps.DeleteFunc(annotations, func(k, _ string) bool { return slices.Contains(factKeys, k) })
	maps.Copy(annotations, s.facts().annotations())
	return annotations
}

// merged is a new map of the entries of ms, a later map's winning.
func merged(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// activeDeadlineSeconds is the run's duration plus the template's margin, rounded up to a
// whole second and at least one (the API refuses zero).
func activeDeadlineSeconds(t Template, s Spec) int64 {
	return max(int64((s.RunDuration+t.deadlineMargin()+time.Second-1)/time.Second), 1)
}

// failOnBadConfig fails the Job at once on exit code 2, invalid configuration: retrying
// cannot fix it.
func failOnBadConfig(container string) *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action: batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: ptr.To(container),
			Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
			Values:        []int32{ExitBadConfig},
		},
	}}}
}

func podSpec(t Template, s Spec) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		ServiceAccountName:            t.ServiceAccountFor(s.Kind),
		AutomountServiceAccountToken:  ptr.To(true),
		ImagePullSecrets:              slices.Clone(t.ImagePullSecrets),
		NodeSelector:                  maps.Clone(t.NodeSelector),
		Tolerations:                   slices.Clone(t.Tolerations),
		Affinity:                      t.Affinity.DeepCopy(),
		PriorityClassName:             t.PriorityClassName,
		HostNetwork:                   t.HostNetwork,
		TerminationGracePeriodSeconds: ptr.To(int64(30)),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To(DefaultUID),
			RunAsGroup:     ptr.To(DefaultUID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{runContainer(t, s)},
	}
}

func runContainer(t Template, s Spec) corev1.Container {
	resources := defaultResources()
	if t.Resources != nil {
		resources = *t.Resources.DeepCopy()
	}
	return corev1.Container{
		Name:                     string(s.Kind),
		Image:                    t.Image,
		ImagePullPolicy:          cmp.Or(t.ImagePullPolicy, corev1.PullIfNotPresent),
		Args:                     append([]string(nil), s.Args...),
		Env:                      containerEnv(t, s),
		Resources:                resources,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// containerEnv is the kind's own variables, first and authoritative, then the template's
// extras minus those that would override one of them.
func containerEnv(t Template, s Spec) []corev1.EnvVar {
	env := append([]corev1.EnvVar(nil), s.Env...)
	for _, e := range t.Env {
		if !slices.ContainsFunc(s.Env, func(o corev1.EnvVar) bool { return o.Name == e.Name }) {
			env = append(env, e)
		}
	}
	return env
}
