package podstate

import (
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's crash-loop back-off: 10s after a container's second exit, doubling with each
// restart, capped at 5m (pkg/kubelet/kuberuntime, v1.36). The waiting message states the
// current one: "back-off 40s restarting failed container=app pod=...".
const (
	kubeletInitialBackOff = 10 * time.Second
	KubeletMaxBackOff     = 5 * time.Minute
)

var backOffMessage = regexp.MustCompile(`^back-off (\S+) restarting`)

// BackOff is when the kubelet restarts a crash-looping pod by itself, as its status tells.
type BackOff struct {
	// Known: the status said (a parsable waiting message, or a terminated container with a
	// restart count and a finish time). Not known: an older or newer kubelet's message
	// depwatch cannot read; Why says which container and what it said.
	Known bool
	Why   string
	// RestartAt is the latest moment one of the pod's crash-looping containers is restarted
	// by the kubelet: the pod cannot be Ready before.
	RestartAt time.Time
}

// Remaining is how much of the back-off is left at now (0 when it is due); a restart now
// saves about that much. Meaningless when the back-off is not Known.
func (b BackOff) Remaining(now time.Time) time.Duration {
	return max(b.RestartAt.Sub(now), 0)
}

// PodBackOff reads a crash-looping pod's back-off: for every container CrashLoopBackOff counts
// (a waiting one, or a terminated one the kubelet restarts), its last finish plus its back-off,
// and the latest of those. A waiting container's back-off is its message's; a terminated
// one's follows from its restart count (the kubelet's schedule, an upper bound: a kubelet with
// a shorter back-off restarts it sooner). ok is false when the pod is not crash-looping.
func PodBackOff(pod *corev1.Pod) (b BackOff, ok bool) {
	if _, looping := CrashLoopBackOff(pod); !looping {
		return BackOff{}, false
	}
	b.Known = true
	groups := []struct {
		init     bool
		statuses []corev1.ContainerStatus
	}{{true, pod.Status.InitContainerStatuses}, {false, pod.Status.ContainerStatuses}}
	for _, g := range groups {
		for i := range g.statuses {
			cs := &g.statuses[i]
			at, counts, why := containerRestartAt(pod, cs, g.init)
			switch {
			case !counts:
			case why != "":
				return BackOff{Why: why}, true
			case at.After(b.RestartAt):
				b.RestartAt = at
			}
		}
	}
	return b, true
}

// containerRestartAt is one container's restart by the kubelet: counts says whether it is in
// back-off at all, why (when not "") why its restart time cannot be known.
func containerRestartAt(pod *corev1.Pod, cs *corev1.ContainerStatus, init bool) (at time.Time, counts bool, why string) {
	if w := cs.State.Waiting; w != nil && w.Reason == ReasonCrashLoopBackOff {
		last := cs.LastTerminationState.Terminated
		d, parsed := ParseBackOffMessage(w.Message)
		switch {
		case !parsed:
			return time.Time{}, true, "container " + cs.Name + ` is waiting with a message depwatch cannot read: "` + w.Message + `"`
		case last == nil || last.FinishedAt.IsZero():
			return time.Time{}, true, "container " + cs.Name + " is waiting without a last finish time"
		}
		return last.FinishedAt.Add(d), true, ""
	}
	t := cs.State.Terminated
	if t == nil || cs.RestartCount < 1 || !willRestart(pod, cs.Name, init, t.ExitCode) {
		return time.Time{}, false, ""
	}
	if t.FinishedAt.IsZero() {
		return time.Time{}, true, "container " + cs.Name + " has terminated without a finish time"
	}
	return t.FinishedAt.Add(KubeletBackOff(cs.RestartCount)), true, ""
}

// ParseBackOffMessage reads the back-off of a CrashLoopBackOff waiting message ("back-off 40s
// restarting failed container=..."); ok is false for any other shape.
func ParseBackOffMessage(msg string) (time.Duration, bool) {
	m := backOffMessage.FindStringSubmatch(msg)
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(m[1])
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// KubeletBackOff is the kubelet's back-off before restarting a container restarted
// restarts times already: 10s for the first, doubling, at most KubeletMaxBackOff.
func KubeletBackOff(restarts int32) time.Duration {
	if restarts < 1 {
		return 0
	}
	d := kubeletInitialBackOff
	for i := int32(1); i < restarts && d < KubeletMaxBackOff; i++ {
		d *= 2
	}
	return min(d, KubeletMaxBackOff)
}
