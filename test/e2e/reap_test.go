//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var reapExample = []string{"reaper-rbac.yaml", "reap-job.yaml"}

const reapJobName = "reap-crashloop-once"

func TestReapJobFromExampleDeletesCrashLoopingPodAndSparesHealthyOne(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, "reap")
	crasher := crashingPod(t, ns, "crasher", map[string]string{"app": "crasher"})
	bystander := sleepingPod(t, ns, "bystander", map[string]string{"app": "bystander"})
	waitCrashLoopBackOffAhead(t, ns, "crasher", reapJobStart)
	waitPodRunning(t, ns, "bystander")

	suffix := applyExample(t, ns, reapExample, map[string]string{
		"NAMESPACE": ns, "CONTAINER_STATUSES": "CrashLoopBackOff", "RUN_DURATION": "1s", "REAP_AT_START": "true",
	})
	job := reapJobName + suffix
	if got := waitJobFinished(t, ns, job, 2*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("job %s finished %s, want Complete", job, got)
	}

	logs := jobLogs(t, ns, job)
	line, ok := findLine(parseLogLines(logs), map[string]string{"namespace": ns, "pod": "crasher", "action": "deleted"})
	if !ok {
		t.Fatalf("kubectl logs job/%s has no line naming namespace %s, pod crasher, action deleted:\n%s", job, ns, logs)
	}
	if !strings.Contains(reasonsOf(line), "crashloopbackoff") {
		t.Errorf("the reaped pod's log line gives no CrashLoopBackOff reason: %v", line)
	}
	if podExists(t, ns, "crasher", crasher.UID) {
		t.Errorf("pod crasher is still there after the reap Job completed")
	}
	if !podExists(t, ns, "bystander", bystander.UID) {
		t.Errorf("the healthy pod bystander was deleted; only crash-looping pods match the rule")
	}
	if len(eventsFor(t, ns, "crasher")["Reaped"]) == 0 {
		t.Errorf("no Reaped event was recorded on pod crasher")
	}
	if msg := terminationMessage(t, ns, job); !strings.Contains(strings.ToLower(msg), "reaped") {
		t.Errorf("the Job pod's termination message carries no summary: %q", msg)
	}
}

func TestReapJobWithEvictSkipsPodProtectedByDisruptionBudget(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, "evict")
	crasher := crashingPod(t, ns, "crasher", map[string]string{"app": "crasher"})
	// minAvailable (not maxUnavailable) works for a bare pod: the disruption controller needs
	// no owning controller's scale to compute it.
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "crasher", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "crasher"}},
		},
	}
	if _, err := kube.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the PodDisruptionBudget: %v", err)
	}
	waitCrashLoopBackOffAhead(t, ns, "crasher", reapJobStart)
	// The eviction API only answers from the budget's status, so wait until the disruption
	// controller has looked at it.
	waitFor(t, time.Minute, "the PodDisruptionBudget's status", func() (bool, error) {
		got, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), "crasher", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.ObservedGeneration == got.Generation && got.Status.ExpectedPods == 1, nil
	})

	suffix := applyExample(t, ns, reapExample, map[string]string{
		"NAMESPACE": ns, "CONTAINER_STATUSES": "CrashLoopBackOff", "RUN_DURATION": "1s", "REAP_AT_START": "true", "EVICT": "true",
	})
	job := reapJobName + suffix
	if got := waitJobFinished(t, ns, job, 2*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("job %s finished %s, want Complete (a refused eviction is not a failure)", job, got)
	}
	logs := jobLogs(t, ns, job)
	line, ok := findLine(parseLogLines(logs), map[string]string{"namespace": ns, "pod": "crasher", "action": "skipped"})
	if !ok {
		t.Fatalf("kubectl logs job/%s has no 'skipped' line for pod crasher:\n%s", job, logs)
	}
	if text := strings.ToLower(strings.Join([]string{line.str("msg"), line.str("error"), line.str("skipReason")}, " ")); !strings.Contains(text, "429") && !strings.Contains(text, "disruption budget") {
		t.Errorf("the skipped line does not say the eviction was refused (429 / disruption budget): %v", line)
	}
	if !podExists(t, ns, "crasher", crasher.UID) {
		t.Errorf("pod crasher was removed although its disruption budget forbids evicting it")
	}
	if len(eventsFor(t, ns, "crasher")["ReapSkipped"]) == 0 {
		t.Errorf("no ReapSkipped event was recorded on pod crasher")
	}
}

func TestReapJobInDryRunDeletesNothingAndSaysWhatItWouldDo(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, "dryrun")
	crasher := crashingPod(t, ns, "crasher", map[string]string{"app": "crasher"})
	waitCrashLoopBackOffAhead(t, ns, "crasher", reapJobStart)

	suffix := applyExample(t, ns, reapExample, map[string]string{
		"NAMESPACE": ns, "CONTAINER_STATUSES": "CrashLoopBackOff", "RUN_DURATION": "1s", "REAP_AT_START": "true", "DRY_RUN": "true",
	})
	job := reapJobName + suffix
	if got := waitJobFinished(t, ns, job, 2*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("job %s finished %s, want Complete", job, got)
	}
	logs := jobLogs(t, ns, job)
	if _, ok := findLine(parseLogLines(logs), map[string]string{"namespace": ns, "pod": "crasher", "action": "dry-run"}); !ok {
		t.Fatalf("kubectl logs job/%s does not say it would have reaped pod crasher:\n%s", job, logs)
	}
	if !podExists(t, ns, "crasher", crasher.UID) {
		t.Errorf("pod crasher was deleted in a dry run")
	}
}

func TestReapJobWithBadConfigurationExitsTwoWithClearErrorAndTouchesNothing(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, "badcfg")
	crasher := crashingPod(t, ns, "crasher", map[string]string{"app": "crasher"})
	waitCrashLoopBackOff(t, ns, "crasher")

	suffix := applyExample(t, ns, reapExample, map[string]string{
		"NAMESPACE": ns, "CONTAINER_STATUSES": "CrashLoopBackOff", "RUN_DURATION": "1s", "REAP_AT_START": "true",
		"MAX_PODS": "lots", "CHAOS_CHANCE": "1.5",
	})
	job := reapJobName + suffix
	if got := waitJobFinished(t, ns, job, 2*time.Minute); got != batchv1.JobFailed {
		t.Fatalf("job %s finished %s, want Failed (invalid configuration)", job, got)
	}
	pod := jobPod(t, ns, job)
	if n := len(pod.Status.ContainerStatuses); n != 1 || pod.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("job pod %s has no terminated container: %+v", pod.Name, pod.Status.ContainerStatuses)
	}
	if code := pod.Status.ContainerStatuses[0].State.Terminated.ExitCode; code != 2 {
		t.Errorf("job pod exited %d, want 2 for invalid configuration", code)
	}
	logs := jobLogs(t, ns, job)
	for _, want := range []string{`MAX_PODS="lots"`, `CHAOS_CHANCE="1.5"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("kubectl logs job/%s does not name %s:\n%s", job, want, logs)
		}
	}
	if strings.Contains(logs, "goroutine ") || strings.Contains(logs, "panic") {
		t.Errorf("kubectl logs job/%s shows a stack trace:\n%s", job, logs)
	}
	if !podExists(t, ns, "crasher", crasher.UID) {
		t.Errorf("pod crasher was deleted by a run with invalid configuration")
	}
}

// terminationMessage is what `kubectl describe` shows as the Job pod's termination message.
func terminationMessage(t *testing.T, ns, job string) string {
	t.Helper()
	return podTerminationMessage(jobPod(t, ns, job))
}
