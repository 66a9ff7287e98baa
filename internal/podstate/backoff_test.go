package podstate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// loopingPod is a pod of one container "app" with the given state, last termination and
// restart count.
func loopingPod(state, last corev1.ContainerState, restarts int32) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "app", State: state, LastTerminationState: last, RestartCount: restarts,
	}}}}
}

func waiting(msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonCrashLoopBackOff, Message: msg}}
}

func finished(at time.Time, code int32) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", FinishedAt: metav1.NewTime(at)}}
}

// TestPodBackOff: when the kubelet restarts a crash-looping pod by itself, and how much of
// that a restart now saves.
func TestPodBackOff(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	none := corev1.ContainerState{}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		looping   bool
		known     bool
		remaining time.Duration
	}{
		{"waiting with a parsable message", loopingPod(waiting("back-off 40s restarting failed container=app pod=a_ns(u)"), finished(now.Add(-10*time.Second), 1), 3), true, true, 30 * time.Second},
		{"capped at five minutes", loopingPod(waiting("back-off 5m0s restarting failed container=app pod=a_ns(u)"), finished(now.Add(-time.Minute), 1), 9), true, true, 4 * time.Minute},
		{"already due", loopingPod(waiting("back-off 10s restarting failed container=app pod=a_ns(u)"), finished(now.Add(-time.Minute), 1), 2), true, true, 0},
		{"unparsable message: unknown", loopingPod(waiting("back off for a while"), finished(now.Add(-time.Second), 1), 3), true, false, 0},
		{"waiting without a last finish: unknown", loopingPod(waiting("back-off 20s restarting failed container=app pod=a_ns(u)"), none, 3), true, false, 0},
		{"terminated: from the restart count", loopingPod(finished(now.Add(-5*time.Second), 1), none, 3), true, true, 35 * time.Second},
		{"terminated, restart count capped", loopingPod(finished(now.Add(-time.Minute), 1), none, 30), true, true, 4 * time.Minute},
		{"first exit: not crash-looping", loopingPod(finished(now, 1), none, 0), false, false, 0},
		{"running: not crash-looping", loopingPod(corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, none, 4), false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, looping := PodBackOff(tt.pod)
			if looping != tt.looping || b.Known != tt.known {
				t.Fatalf("PodBackOff = %+v, looping %v; want looping %v, known %v", b, looping, tt.looping, tt.known)
			}
			if !tt.known {
				if looping && b.Why == "" {
					t.Errorf("an unknown back-off says nothing of why")
				}
				return
			}
			if got := b.Remaining(now); got != tt.remaining {
				t.Errorf("Remaining = %s, want %s", got, tt.remaining)
			}
		})
	}
}

// TestPodBackOffTakesTheLastContainer: a pod is Ready only when its last crash-looping
// container is restarted.
func TestPodBackOffTakesTheLastContainer(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	pod := loopingPod(finished(now, 1), corev1.ContainerState{}, 1) // 10s ahead
	pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
		Name: "side", State: waiting("back-off 1m20s restarting failed container=side pod=a_ns(u)"),
		LastTerminationState: finished(now.Add(-20*time.Second), 2), RestartCount: 4,
	})
	b, _ := PodBackOff(pod)
	if got := b.Remaining(now); got != time.Minute {
		t.Fatalf("Remaining = %s, want 1m0s (the side container's)", got)
	}
}

func TestKubeletBackOff(t *testing.T) {
	for restarts, want := range map[int32]time.Duration{0: 0, 1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 5: 160 * time.Second, 6: 5 * time.Minute, 1 << 30: 5 * time.Minute} {
		if got := KubeletBackOff(restarts); got != want {
			t.Errorf("KubeletBackOff(%d) = %s, want %s", restarts, got, want)
		}
	}
}
