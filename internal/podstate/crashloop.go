// Package podstate owns what depwatch reads of a pod and of a service's EndpointSlices to
// decide: "a pod is crash-looping" (CrashLoopBackOff), the slim copy of a pod that keeps just
// what that test reads (Slim, Transform), and "a service is Ready" (ReadyWhen over ServiceSlices, one event at a time). The reaper
// and the coordinator's weeder both ask these, so the weeder's catch-up and the weeder Job it
// starts agree on which pods count and when a service is back; and a field the crash-loop
// test starts to read is kept in the one slim pod both caches hold (TestSlimKeepsCrashLoop).
package podstate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// ReasonCrashLoopBackOff is the waiting reason the kubelet gives a container it holds back
// after repeated crashes.
const ReasonCrashLoopBackOff = "CrashLoopBackOff"

// CrashLoopBackOff tells whether any init or regular container of the pod is in crash-loop
// back-off, and says which in words. Ephemeral containers are not looked at: the kubelet never
// restarts them, so they are never in back-off.
//
// It is not enough to look for the waiting reason CrashLoopBackOff: since v1.3x the kubelet
// re-syncs a pod in back-off only when the back-off ends (or every syncFrequency, 1m by
// default), so for most of each back-off window the status still shows the container as
// terminated. A terminated container that the pod's restart policy will restart is therefore
// waiting out a back-off too, but only once it has been restarted at least once: the kubelet
// restarts a container's first exit at once, without a back-off, so a terminated container
// with restartCount 0 (a fresh pod's first exit, even a clean "Completed") is not crash-looping.
func CrashLoopBackOff(pod *corev1.Pod) (string, bool) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return "", false
	}
	groups := []struct {
		kind     string
		init     bool
		statuses []corev1.ContainerStatus
	}{
		{"init container", true, pod.Status.InitContainerStatuses},
		{"container", false, pod.Status.ContainerStatuses},
	}
	for _, g := range groups {
		for i := range g.statuses {
			cs := &g.statuses[i]
			if w := cs.State.Waiting; w != nil && w.Reason == ReasonCrashLoopBackOff {
				return fmt.Sprintf("%s %q is waiting with reason CrashLoopBackOff", g.kind, cs.Name), true
			}
			t := cs.State.Terminated
			if t == nil || cs.RestartCount < 1 || !willRestart(pod, cs.Name, g.init, t.ExitCode) {
				continue
			}
			return fmt.Sprintf("%s %q is in CrashLoopBackOff: it exited with code %d (%s) and waits for its back-off to end (restarts: %d)",
				g.kind, cs.Name, t.ExitCode, t.Reason, cs.RestartCount), true
		}
	}
	return "", false
}

// willRestart tells whether the kubelet restarts a terminated container (after a back-off),
// from the pod's and the container's restart policies.
func willRestart(pod *corev1.Pod, name string, init bool, exitCode int32) bool {
	var policy *corev1.ContainerRestartPolicy
	containers := pod.Spec.Containers
	if init {
		containers = pod.Spec.InitContainers
	}
	for i := range containers {
		if containers[i].Name == name {
			policy = containers[i].RestartPolicy
		}
	}
	if policy != nil && *policy == corev1.ContainerRestartPolicyAlways {
		return true // a sidecar, or a container that overrides the pod's policy
	}
	if init {
		// A failed init container is retried unless the pod never restarts; one that
		// succeeded is done.
		return exitCode != 0 && pod.Spec.RestartPolicy != corev1.RestartPolicyNever
	}
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	default: // Always, and unset (the API server defaults it to Always)
		return true
	}
}
