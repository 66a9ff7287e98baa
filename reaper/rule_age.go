package reaper

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/internal/envconf"
)

// ageRule is MAX_DURATION or MAX_UNREADY: it matches pods whose clock has run for longer than
// the duration. The two differ only in when the clock starts (since); a pod whose clock has
// not started never matches: there is nothing to measure from.
type ageRule struct {
	name  string
	max   time.Duration
	since func(*corev1.Pod) (time.Time, bool)
	state string // what the clock measures, in the reason: "has been running"
}

func loadAgeRule(name, state string, since func(*corev1.Pod) (time.Time, bool)) ruleLoader {
	return func(e *envconf.Reader) Rule {
		d, ok := duration(e, name)
		if !ok {
			return nil
		}
		return ageRule{name: name, max: d, since: since, state: state}
	}
}

func (r ageRule) Name() string { return r.name }

func (r ageRule) Decide(pod *corev1.Pod, now time.Time) (bool, string) {
	from, ok := r.since(pod)
	if !ok {
		return false, ""
	}
	age := now.Sub(from)
	if age <= r.max {
		return false, ""
	}
	return true, fmt.Sprintf("pod %s for %s, longer than %s %s", r.state, age.Round(time.Second), r.name, r.max)
}

// runningSince (MAX_DURATION) is status.startTime (when the kubelet accepted the pod). Pods
// without a start time have not started.
func runningSince(pod *corev1.Pod) (time.Time, bool) {
	if pod.Status.StartTime == nil {
		return time.Time{}, false
	}
	return pod.Status.StartTime.Time, true
}

// unreadySince (MAX_UNREADY) is the Ready condition's lastTransitionTime while it is not True.
// Pods without a Ready condition (not scheduled yet) or without a transition time have no
// start to measure from.
func unreadySince(pod *corev1.Pod) (time.Time, bool) {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != corev1.PodReady {
			continue
		}
		if c.Status == corev1.ConditionTrue || c.LastTransitionTime.IsZero() {
			return time.Time{}, false
		}
		return c.LastTransitionTime.Time, true
	}
	return time.Time{}, false
}
