package reaper

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// match is a pod every rule agreed on, with every rule's reason.
type match struct {
	pod     *corev1.Pod
	reasons []string
}

// podFilter holds the checks a pod must pass before the rules are asked. The namespace, node
// and label parts are also applied server-side; checking them again costs little and keeps a
// stale informer event or a lenient API (such as the fake clientset) from widening the run.
type podFilter struct {
	namespace  string
	nodeName   string
	selectors  []labels.Selector // OR-ed
	annotation *annotationFilter
}

// admits reports whether the pod is a candidate. Terminating pods are never candidates: they
// are already going, and deleting them again would only cut their grace period short.
func (f podFilter) admits(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	if f.namespace != "" && pod.Namespace != f.namespace {
		return false
	}
	if f.nodeName != "" && pod.Spec.NodeName != f.nodeName {
		return false
	}
	if !f.annotation.admits(pod) {
		return false
	}
	return matchesAny(f.selectors, pod)
}

// matchesAny reports whether any of the OR-ed selectors matches the pod's labels.
func matchesAny(selectors []labels.Selector, pod *corev1.Pod) bool {
	return slices.ContainsFunc(selectors, func(s labels.Selector) bool { return s.Matches(labels.Set(pod.Labels)) })
}

// selector evaluates one pod: filters, then rules. It is what a cycle and the watch share.
type selector struct {
	filter podFilter
	rules  []Rule
	// done holds the UIDs already acted on; they are never acted on twice.
	done map[types.UID]int
}

// evaluate returns the match for a pod, or ok=false.
func (s *selector) evaluate(pod *corev1.Pod, now time.Time) (match, bool) {
	if _, seen := s.done[pod.UID]; seen || !s.filter.admits(pod) {
		return match{}, false
	}
	ok, reasons := decide(pod, s.rules, now)
	if !ok {
		return match{}, false
	}
	return match{pod: pod, reasons: reasons}, true
}

// quota is MAX_PODS: it counts pods actually reaped (or, in a dry run, that would have been),
// so a failed delete or a PodDisruptionBudget refusal leaves room for the next candidate.
type quota struct {
	max  int // 0 = unlimited
	used int
}

func (q *quota) full() bool { return q.max > 0 && q.used >= q.max }
func (q *quota) take()      { q.used++ }
