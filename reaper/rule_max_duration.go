package reaper

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/internal/envconf"
)

// maxDurationRule (MAX_DURATION) matches pods running longer than the duration, measured from
// status.startTime (when the kubelet accepted the pod). Pods without a start time have not
// started and never match.
type maxDurationRule struct {
	max time.Duration
}

func loadMaxDurationRule(e *envconf.Reader) Rule {
	d, ok := duration(e, "MAX_DURATION")
	if !ok {
		return nil
	}
	return maxDurationRule{max: d}
}

func (maxDurationRule) Name() string { return "MAX_DURATION" }

func (r maxDurationRule) Decide(pod *corev1.Pod, now time.Time) (bool, string) {
	if pod.Status.StartTime == nil {
		return false, ""
	}
	age := now.Sub(pod.Status.StartTime.Time)
	if age <= r.max {
		return false, ""
	}
	return true, fmt.Sprintf("pod has been running for %s, longer than MAX_DURATION %s", age.Round(time.Second), r.max)
}
