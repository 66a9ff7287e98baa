package podstate

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func exited(code int32) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}
}

func TestCrashLoopBackOffRecognisesBackOffTheKubeletStillReportsAsTerminatedButNotAFirstExit(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	now := metav1.NewTime(time.Now())
	tests := []struct {
		name       string
		policy     corev1.RestartPolicy
		init       bool
		sidecar    bool
		state      corev1.ContainerState
		deleting   bool
		restarts   int32
		phase      corev1.PodPhase
		want       bool
		wantReason string
	}{
		{name: "waiting with reason CrashLoopBackOff", state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, want: true, wantReason: "waiting with reason CrashLoopBackOff"},
		{name: "terminated under restart policy Always waits for its back-off", policy: corev1.RestartPolicyAlways, state: exited(1), want: true, wantReason: "exited with code 1"},
		{name: "terminated with code 0 under Always is restarted too", policy: corev1.RestartPolicyAlways, state: exited(0), want: true},
		{name: "terminated under unset policy (defaults to Always)", state: exited(1), want: true},
		{name: "failed under OnFailure is restarted", policy: corev1.RestartPolicyOnFailure, state: exited(2), want: true},
		{name: "succeeded under OnFailure is done", policy: corev1.RestartPolicyOnFailure, state: exited(0), want: false},
		{name: "terminated under Never is never restarted", policy: corev1.RestartPolicyNever, state: exited(1), want: false},
		{name: "failed init container is retried", policy: corev1.RestartPolicyAlways, init: true, state: exited(1), want: true, wantReason: "init container"},
		{name: "succeeded init container is done", policy: corev1.RestartPolicyAlways, init: true, state: exited(0), want: false},
		{name: "failed init container under Never is not retried", policy: corev1.RestartPolicyNever, init: true, state: exited(1), want: false},
		{name: "sidecar init container that exited is restarted", policy: corev1.RestartPolicyNever, init: true, sidecar: true, state: exited(0), want: true},
		{name: "running container is not crash-looping", state: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, want: false},
		{name: "waiting for another reason is not crash-looping", state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}, want: false},
		{name: "pod being deleted is left alone", state: exited(1), deleting: true, want: false},
		{name: "failed pod is finished, not crash-looping", state: exited(1), phase: corev1.PodFailed, want: false},
		{name: "first exit (restartCount 0) is restarted without back-off", policy: corev1.RestartPolicyAlways, state: exited(1), restarts: -1, want: false},
		{name: "first clean exit Completed (restartCount 0) is not crash-looping", policy: corev1.RestartPolicyAlways, state: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}, restarts: -1, want: false},
		{name: "first exit of an init container (restartCount 0) is not crash-looping", policy: corev1.RestartPolicyAlways, init: true, state: exited(1), restarts: -1, want: false},
		{name: "exit after one restart is in back-off", policy: corev1.RestartPolicyAlways, state: exited(1), restarts: 1, want: true},
		{name: "waiting CrashLoopBackOff counts whatever the restart count", state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, restarts: -1, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := corev1.Container{Name: "app"}
			if tc.sidecar {
				c.RestartPolicy = &always
			}
			restarts := int32(3) // a container well into its crash loop, unless the case says otherwise
			switch {
			case tc.restarts < 0:
				restarts = 0
			case tc.restarts > 0:
				restarts = tc.restarts
			}
			status := []corev1.ContainerStatus{{Name: "app", State: tc.state, RestartCount: restarts}}
			pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: tc.policy}, Status: corev1.PodStatus{Phase: tc.phase}}
			if tc.init {
				pod.Spec.InitContainers = []corev1.Container{c}
				pod.Spec.Containers = []corev1.Container{{Name: "main"}}
				pod.Status.InitContainerStatuses = status
			} else {
				pod.Spec.Containers = []corev1.Container{c}
				pod.Status.ContainerStatuses = status
			}
			if tc.deleting {
				pod.DeletionTimestamp = &now
			}
			reason, got := CrashLoopBackOff(pod)
			if got != tc.want {
				t.Fatalf("CrashLoopBackOff = %v (%q), want %v", got, reason, tc.want)
			}
			if !strings.Contains(reason, tc.wantReason) {
				t.Errorf("reason %q does not say %q", reason, tc.wantReason)
			}
		})
	}
}
