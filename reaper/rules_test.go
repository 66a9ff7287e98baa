package reaper

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRulesDecideWithReason: every rule's match, miss, and the reason a person reads.
func TestRulesDecideWithReason(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		pod        *corev1.Pod
		wantMatch  bool
		wantReason string
	}{
		{"container waiting", map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff"},
			newPod("ns", "p", crashLooping), true, `container "app" is waiting with reason CrashLoopBackOff`},
		{"container terminated", map[string]string{"CONTAINER_STATUSES": "OOMKilled,Error"},
			newPod("ns", "p", terminated("db", "OOMKilled")), true, `container "db" terminated with reason OOMKilled`},
		{"init container waiting", map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff"},
			newPod("ns", "p", initWaiting("migrate", "CrashLoopBackOff")), true, `init container "migrate" is waiting with reason CrashLoopBackOff`},
		{"an ephemeral container's status never gets the pod it debugs reaped (pod-reaper)", map[string]string{"CONTAINER_STATUSES": "ImagePullBackOff,Error"},
			newPod("ns", "p", func(p *corev1.Pod) {
				p.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{
					{Name: "debug", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}},
					{Name: "debug2", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}},
				}
			}), false, ""},
		{"container healthy", map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff"},
			newPod("ns", "p", waiting("app", "ContainerCreating")), false, ""},
		{"container statuses are case-sensitive like the kubelet's", map[string]string{"CONTAINER_STATUSES": "crashloopbackoff"},
			newPod("ns", "p", crashLooping), false, ""},
		{"pod status reason", map[string]string{"POD_STATUSES": "Evicted"},
			newPod("ns", "p", func(p *corev1.Pod) { p.Status.Reason = "Evicted" }), true, "pod status reason is Evicted"},
		{"pod status reason miss", map[string]string{"POD_STATUSES": "Evicted"},
			newPod("ns", "p"), false, ""},
		{"phase", map[string]string{"POD_STATUS_PHASES": "Failed,Succeeded"},
			newPod("ns", "p", phase(corev1.PodSucceeded)), true, "pod phase is Succeeded"},
		{"phase miss", map[string]string{"POD_STATUS_PHASES": "Failed"},
			newPod("ns", "p"), false, ""},
		{"max duration", map[string]string{"MAX_DURATION": "1h"},
			newPod("ns", "p", startedAgo(90*time.Minute)), true, "pod has been running for 1h30m0s, longer than MAX_DURATION 1h0m0s"},
		{"max duration not yet", map[string]string{"MAX_DURATION": "1h"},
			newPod("ns", "p", startedAgo(time.Hour)), false, ""},
		{"max duration without start time", map[string]string{"MAX_DURATION": "0s"},
			newPod("ns", "p"), false, ""},
		{"max unready", map[string]string{"MAX_UNREADY": "10m"},
			newPod("ns", "p", unreadyFor(15*time.Minute)), true, "pod has not been ready for 15m0s, longer than MAX_UNREADY 10m0s"},
		{"max unready not yet", map[string]string{"MAX_UNREADY": "10m"},
			newPod("ns", "p", unreadyFor(5*time.Minute)), false, ""},
		{"max unready but ready", map[string]string{"MAX_UNREADY": "10m"},
			newPod("ns", "p", func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
			}), false, ""},
		{"max unready unknown status counts as not ready", map[string]string{"MAX_UNREADY": "1m"},
			newPod("ns", "p", func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
			}), true, "pod has not been ready for 1h0m0s, longer than MAX_UNREADY 1m0s"},
		{"max unready without Ready condition", map[string]string{"MAX_UNREADY": "0s"},
			newPod("ns", "p"), false, ""},
		{"chaos always", map[string]string{"CHAOS_CHANCE": "1"}, newPod("ns", "p"), true, ""},
		{"chaos never", map[string]string{"CHAOS_CHANCE": "0"}, newPod("ns", "p"), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := mustOptions(t, tt.env)
			r := o.Rules[0]
			match, reason := r.Decide(tt.pod, t0)
			if match != tt.wantMatch {
				t.Fatalf("%s.Decide = %v (%q), want %v", r.Name(), match, reason, tt.wantMatch)
			}
			if tt.wantReason != "" && reason != tt.wantReason {
				t.Errorf("reason = %q, want %q", reason, tt.wantReason)
			}
			if match && reason == "" {
				t.Errorf("a match must come with a reason")
			}
		})
	}
}

func TestChaosRuleUsesTheRoll(t *testing.T) {
	r := chaosRule{chance: 0.3, roll: func() float64 { return 0.1 }}
	if ok, reason := r.Decide(newPod("ns", "p"), t0); !ok || reason != "chaos chance 0.3 was hit (rolled 0.100)" {
		t.Errorf("Decide = %v %q", ok, reason)
	}
	r.roll = func() float64 { return 0.3 }
	if ok, _ := r.Decide(newPod("ns", "p"), t0); ok {
		t.Errorf("a roll equal to the chance must miss (chance 0 never matches)")
	}
}

// TestDecideIsAnAndOfAllRules: a pod is reaped only when every rule agrees, with all reasons.
func TestDecideIsAnAndOfAllRules(t *testing.T) {
	o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "MAX_DURATION": "1h"})
	tests := []struct {
		name    string
		pod     *corev1.Pod
		want    bool
		reasons int
	}{
		{"both", newPod("ns", "p", crashLooping, startedAgo(2*time.Hour)), true, 2},
		{"only crash-looping", newPod("ns", "p", crashLooping, startedAgo(time.Minute)), false, 0},
		{"only old", newPod("ns", "p", startedAgo(2*time.Hour)), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reasons := decide(tt.pod, o.Rules, t0)
			if got != tt.want || len(reasons) != tt.reasons {
				t.Errorf("decide = %v %q, want %v with %d reasons", got, reasons, tt.want, tt.reasons)
			}
		})
	}
	if ok, _ := decide(newPod("ns", "p", crashLooping), nil, t0); ok {
		t.Errorf("no rules must reap nothing")
	}
}

func TestContainerStatusesRuleMatchesCrashLoopBackOffDuringTheTerminatedPartOfTheBackOff(t *testing.T) {
	pod := &corev1.Pod{
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}, RestartCount: 2}}},
	}
	if ok, reason := (containerStatusesRule{reasons: []string{"CrashLoopBackOff"}}).Decide(pod, time.Now()); !ok {
		t.Errorf("CONTAINER_STATUSES=CrashLoopBackOff did not match a container terminated between restarts (%q)", reason)
	}
	if ok, _ := (containerStatusesRule{reasons: []string{"OOMKilled"}}).Decide(pod, time.Now()); ok {
		t.Errorf("CONTAINER_STATUSES=OOMKilled matched a container that exited with Error")
	}
}
