package reaper

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/depwatch/depwatch/internal/podstate"
)

// ReasonCrashLoopBackOff is CONTAINER_STATUSES' value that asks for podstate.CrashLoopBackOff,
// the kubelet's waiting reason for a container it holds back after repeated crashes.
const ReasonCrashLoopBackOff = podstate.ReasonCrashLoopBackOff

// containerStatusesRule (CONTAINER_STATUSES) matches a pod when any regular or init container
// is waiting or terminated with one of the listed reasons, as pod-reaper reads it. Init
// containers count because a pod stuck in an init container's CrashLoopBackOff is just as stuck
// (dependency-watchdog ignores them; depwatch does not). Ephemeral containers do not count,
// as in pod-reaper: a `kubectl debug` container that exited with Error must not get the pod it
// debugged killed. CrashLoopBackOff also matches a container the kubelet still reports as
// terminated while it waits out the back-off (see podstate.CrashLoopBackOff).
type containerStatusesRule struct {
	reasons []string
}

func loadContainerStatusesRule(e *envconf.Reader, name string) Rule {
	reasons, ok := list(e, name, emptyMatchesNothing)
	if !ok {
		return nil
	}
	return containerStatusesRule{reasons: reasons}
}

func (containerStatusesRule) Name() string { return envContainerStatuses }

func (r containerStatusesRule) Decide(pod *corev1.Pod, _ time.Time) (bool, string) {
	if slices.Contains(r.reasons, ReasonCrashLoopBackOff) {
		if reason, ok := podstate.CrashLoopBackOff(pod); ok {
			return true, reason
		}
	}
	groups := []struct {
		kind     string
		statuses []corev1.ContainerStatus
	}{
		{"init container", pod.Status.InitContainerStatuses},
		{"container", pod.Status.ContainerStatuses},
	}
	for _, g := range groups {
		for i := range g.statuses {
			cs := &g.statuses[i]
			if w := cs.State.Waiting; w != nil && slices.Contains(r.reasons, w.Reason) {
				return true, fmt.Sprintf("%s %q is waiting with reason %s", g.kind, cs.Name, w.Reason)
			}
			if t := cs.State.Terminated; t != nil && slices.Contains(r.reasons, t.Reason) {
				return true, fmt.Sprintf("%s %q terminated with reason %s", g.kind, cs.Name, t.Reason)
			}
		}
	}
	return false, ""
}
