package reaper

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/internal/envconf"
)

// podStatusesRule (POD_STATUSES) matches on the pod's status.reason, e.g. Evicted or
// NodeLost.
type podStatusesRule struct {
	reasons []string
}

func loadPodStatusesRule(e *envconf.Reader) Rule {
	reasons, ok := list(e, "POD_STATUSES", emptyRefused)
	if !ok {
		return nil
	}
	return podStatusesRule{reasons: reasons}
}

func (podStatusesRule) Name() string { return "POD_STATUSES" }

func (r podStatusesRule) Decide(pod *corev1.Pod, _ time.Time) (bool, string) {
	if slices.Contains(r.reasons, pod.Status.Reason) {
		return true, fmt.Sprintf("pod status reason is %s", pod.Status.Reason)
	}
	return false, ""
}
