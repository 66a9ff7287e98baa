package reaper

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// match is a pod every rule agreed on, with every rule's reason.
type match struct {
	pod     *corev1.Pod
	reasons []string
}

// admits reports whether the pod is a candidate, before the rules are asked. Terminating pods
// are never candidates: they are already going, and deleting them again would only cut their
// grace period short. The namespace, node and label checks are also applied server-side;
// checking them again costs little and keeps a stale informer event or a lenient API (such as
// the fake clientset) from widening the run.
func (o Options) admits(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	if o.Namespace != "" && pod.Namespace != o.Namespace {
		return false
	}
	if o.NodeName != "" && pod.Spec.NodeName != o.NodeName {
		return false
	}
	if !o.annotation.admits(pod) {
		return false
	}
	return matchesAny(o.Selectors, pod)
}

// matchesAny reports whether any of the OR-ed selectors matches the pod's labels.
func matchesAny(selectors []labels.Selector, pod *corev1.Pod) bool {
	return slices.ContainsFunc(selectors, func(s labels.Selector) bool { return s.Matches(labels.Set(pod.Labels)) })
}

// evaluate returns the match for a pod, or ok=false: the filters (admits), then the rules. It
// is what a cycle and the watch share.
func (o Options) evaluate(pod *corev1.Pod, now time.Time) (match, bool) {
	if !o.admits(pod) {
		return match{}, false
	}
	ok, reasons := decide(pod, o.Rules, now)
	if !ok {
		return match{}, false
	}
	return match{pod: pod, reasons: reasons}, true
}

// SortingStrategy is POD_SORTING_STRATEGY: the order in which matched pods are reaped. It
// matters when MAX_PODS caps a cycle, or when a run stops part-way through.
type SortingStrategy string

const (
	// SortListOrder is the default (POD_SORTING_STRATEGY unset): pod-reaper then keeps the
	// API's list order, which is by namespace and name; depwatch sorts so, explicitly, because
	// several OR-ed selectors are listed one after another.
	SortListOrder       SortingStrategy = ""
	SortRandom          SortingStrategy = "random"
	SortOldestFirst     SortingStrategy = "oldest-first"
	SortYoungestFirst   SortingStrategy = "youngest-first"
	SortPodDeletionCost SortingStrategy = "pod-deletion-cost"
)

func (s SortingStrategy) String() string {
	if s == SortListOrder {
		return "namespace-and-name"
	}
	return string(s)
}

var sortingStrategies = []SortingStrategy{SortRandom, SortOldestFirst, SortYoungestFirst, SortPodDeletionCost}

// podDeletionCostAnnotation is the ReplicaSet controller's own hint of which pod is cheapest to
// lose; honouring it keeps depwatch's choice consistent with a scale-down's.
const podDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// sortMatches orders matches in place. Ties (and the age orders' pods without a start time,
// which go last) fall back to namespace/name so the order is deterministic and testable.
// shuffle is only used by SortRandom; nil means math/rand/v2.
func sortMatches(ms []match, s SortingStrategy, shuffle func(n int, swap func(i, j int))) {
	switch s {
	case SortOldestFirst:
		slices.SortFunc(ms, func(a, b match) int { return byStartTime(a, b, false) })
	case SortYoungestFirst:
		slices.SortFunc(ms, func(a, b match) int { return byStartTime(a, b, true) })
	case SortPodDeletionCost:
		slices.SortFunc(ms, func(a, b match) int {
			return cmp.Or(cmp.Compare(deletionCost(a.pod), deletionCost(b.pod)), byName(a, b))
		})
	case SortRandom:
		if shuffle == nil {
			shuffle = rand.Shuffle
		}
		shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	default: // SortListOrder
		slices.SortFunc(ms, byName)
	}
}

// byStartTime compares by status.startTime; pods without one have not started, so they are
// neither old nor young and go last in both orders.
func byStartTime(a, b match, youngestFirst bool) int {
	at, bt := a.pod.Status.StartTime, b.pod.Status.StartTime
	switch {
	case at == nil && bt == nil:
		return byName(a, b)
	case at == nil:
		return 1
	case bt == nil:
		return -1
	}
	c := at.Time.Compare(bt.Time)
	if youngestFirst {
		c = -c
	}
	return cmp.Or(c, byName(a, b))
}

func byName(a, b match) int {
	return cmp.Or(cmp.Compare(a.pod.Namespace, b.pod.Namespace), cmp.Compare(a.pod.Name, b.pod.Name))
}

// deletionCost reads the pod-deletion-cost annotation; missing or unparsable means 0, as for
// the ReplicaSet controller.
func deletionCost(pod *corev1.Pod) int64 {
	if n, err := strconv.ParseInt(pod.Annotations[podDeletionCostAnnotation], 10, 32); err == nil {
		return n
	}
	return 0
}
