package reaper

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/internal/envconf"
)

// maxUnreadyRule (MAX_UNREADY) matches pods whose Ready condition has not been True for longer
// than the duration, measured from the condition's lastTransitionTime. Pods without a Ready
// condition (not scheduled yet) or without a transition time never match: there is nothing to
// measure from.
type maxUnreadyRule struct {
	max time.Duration
}

func loadMaxUnreadyRule(e *envconf.Reader) Rule {
	d, ok := duration(e, "MAX_UNREADY")
	if !ok {
		return nil
	}
	return maxUnreadyRule{max: d}
}

func (maxUnreadyRule) Name() string { return "MAX_UNREADY" }

func (r maxUnreadyRule) Decide(pod *corev1.Pod, now time.Time) (bool, string) {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != corev1.PodReady {
			continue
		}
		if c.Status == corev1.ConditionTrue || c.LastTransitionTime.IsZero() {
			return false, ""
		}
		unready := now.Sub(c.LastTransitionTime.Time)
		if unready <= r.max {
			return false, ""
		}
		return true, fmt.Sprintf("pod has not been ready for %s, longer than MAX_UNREADY %s", unready.Round(time.Second), r.max)
	}
	return false, ""
}
