//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// depwatch reap as a drop-in for pod-reaper: what a pod-reaper manifest does, depwatch does,
// on a real kubelet.

// A cron SCHEDULE reaps at its first tick, never at start (pod-reaper's contract): a Job whose
// RUN_DURATION ends long before the first tick lists and reaps nothing, even with a
// crash-looping pod right there.
func TestReapCronScheduleWhoseFirstTickIsMinutesAwayReapsNothingAtStart(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, "cronstart")
	crasher := crashingPod(t, ns, "crasher", map[string]string{"app": "crasher"})
	waitCrashLoopBackOff(t, ns, "crasher")

	// Minute field ten minutes ahead: the first tick is at least nine minutes away.
	minute := time.Now().Add(10 * time.Minute).Minute()
	suffix := applyExample(t, ns, reapExample, map[string]string{
		"NAMESPACE": ns, "CONTAINER_STATUSES": "CrashLoopBackOff", "RUN_DURATION": "15s",
		"SCHEDULE": fmt.Sprintf("%d * * * *", minute),
	})
	job := reapJobName + suffix
	if got := waitJobFinished(t, ns, job, 2*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("job %s finished %s, want Complete", job, got)
	}
	logs := jobLogs(t, ns, job)
	lines := parseLogLines(logs)
	if _, ok := findLine(lines, map[string]string{"msg": "reaping pod"}); ok {
		t.Errorf("the run reaped at start although its schedule's first tick is minutes away:\n%s", logs)
	}
	start, ok := findLine(lines, map[string]string{"schedule": fmt.Sprintf("%d * * * *", minute)})
	if !ok || start.str("first_cycle_at") == "" {
		t.Errorf("no start line saying when the first cycle runs:\n%s", logs)
	}
	if !podExists(t, ns, "crasher", crasher.UID) {
		t.Errorf("pod crasher was reaped before the schedule's first tick")
	}
	if msg := terminationMessage(t, ns, job); !strings.Contains(msg, "cycles=0") {
		t.Errorf("termination message %q does not say no cycle ran", msg)
	}
}

// A fresh pod's first exit is restarted by the kubelet at once, without a back-off: it is not
// CrashLoopBackOff and a weeder-style run (WATCH, CONTAINER_STATUSES=CrashLoopBackOff) leaves
// it alone, while a pod that really crash-loops, in the same run, is reaped.
func TestReapLeavesAFreshPodsFirstExitAlone(t *testing.T) {
	parallelLong(t, 55*time.Second)
	ns := newNamespace(t, "firstexit")
	suffix := applyExample(t, ns, reapExample, map[string]string{
		"NAMESPACE": ns, "CONTAINER_STATUSES": "CrashLoopBackOff", "WATCH": "true", "RUN_DURATION": "45s",
		"LABEL_SELECTOR": "role=watched",
	})
	job := reapJobName + suffix
	waitFor(t, 90*time.Second, "the reap Job watching pods", func() (bool, error) {
		out, err := kubectl(t, "-n", ns, "logs", "job/"+job)
		return err == nil && strings.Contains(out, "Watching pods"), nil
	})

	// Follow the pod's statuses as the reaper's informer sees them, to know that the first
	// exit (terminated, restartCount 0) was really published.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "once").String()})
	if err != nil {
		t.Fatal(err)
	}
	var sawFirstExit atomic.Bool
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.State.Terminated != nil && cs.RestartCount == 0 {
					sawFirstExit.Store(true)
				}
			}
		}
	}()

	once := createOncePod(t, ns, "once", map[string]string{"role": "watched"})
	crasher := crashingPod(t, ns, "crasher", map[string]string{"role": "watched"})
	waitFor(t, 90*time.Second, "pod once restarted after its first exit and running", func() (bool, error) {
		pod, err := kube.CoreV1().Pods(ns).Get(context.Background(), "once", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.RestartCount >= 1 && cs.State.Running != nil {
				return true, nil
			}
		}
		return false, nil
	})
	if got := waitJobFinished(t, ns, job, 2*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("job %s finished %s, want Complete", job, got)
	}
	logs := jobLogs(t, ns, job)
	lines := parseLogLines(logs)
	if !sawFirstExit.Load() {
		t.Logf("the kubelet never published pod once's first exit (terminated, restartCount 0); the run still had to leave it alone")
	}
	if l, ok := findLine(lines, map[string]string{"msg": "reaping pod", "pod": "once"}); ok || !podExists(t, ns, "once", once.UID) {
		t.Errorf("pod once was reaped for its first exit (%v):\n%s", l, logs)
	}
	if _, ok := findLine(lines, map[string]string{"msg": "reaping pod", "pod": "crasher", "action": "deleted"}); !ok || podExists(t, ns, "crasher", crasher.UID) {
		t.Errorf("the crash-looping pod crasher was not reaped by the same run:\n%s", logs)
	}
}

// createOncePod creates a bare pod whose container exits 0 the first time and runs after its
// restart (a marker on an emptyDir survives the restart).
func createOncePod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &zero,
			Volumes:                       []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{
				Name: "app", Image: testappImage, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"/testapp", "once", "/data/exited"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
		},
	}
	created, err := kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return created
}

// A pod-reaper environment with trailing commas, spaces around commas and an empty
// EXCLUDE_LABEL_VALUES runs (exit 0) with pod-reaper's meaning: the empty exclusion value keeps
// a pod whose label is set to "", and the log is pod-reaper's Fluentd format.
func TestReapRunsAPodReaperEnvWithTrailingCommasAndEmptyValues(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, "prenv")
	crasher := crashingPod(t, ns, "crasher", map[string]string{"app": "crasher"})
	kept := crashingPod(t, ns, "kept", map[string]string{"app": "crasher", "keep": ""})
	other := crashingPod(t, ns, "other", map[string]string{"app": "other"})
	waitCrashLoopBackOff(t, ns, "kept")
	waitCrashLoopBackOff(t, ns, "other")
	waitCrashLoopBackOffAhead(t, ns, "crasher", reapJobStart) // the one cycle must find it waiting

	suffix := applyExample(t, ns, reapExample, map[string]string{
		"NAMESPACE": ns, "RUN_DURATION": "1s", "REAP_AT_START": "true",
		"CONTAINER_STATUSES":   "CrashLoopBackOff,",
		"REQUIRE_LABEL_KEY":    "app",
		"REQUIRE_LABEL_VALUES": "crasher, nothing,",
		"EXCLUDE_LABEL_KEY":    "keep",
		"EXCLUDE_LABEL_VALUES": "",
		"LOG_FORMAT":           "Fluentd",
	})
	job := reapJobName + suffix
	if got := waitJobFinished(t, ns, job, 2*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("job %s finished %s, want Complete:\n%s", job, got, jobLogs(t, ns, job))
	}
	logs := jobLogs(t, ns, job)
	lines := parseLogLines(logs)
	if _, ok := findLine(lines, map[string]string{"message": "reaping pod", "severity": "info", "pod": "crasher", "namespace": ns}); !ok {
		t.Errorf("no Fluentd line {message: reaping pod, severity: info, pod: crasher}:\n%s", logs)
	}
	if _, ok := findLine(lines, map[string]string{"severity": "warn"}); !ok {
		t.Errorf("no warning (severity warn) about the odd values:\n%s", logs)
	}
	for _, l := range lines {
		if _, ok := l["level"]; ok {
			t.Errorf("a Fluentd line has logrus's level key: %v", l)
			break
		}
	}
	if podExists(t, ns, "crasher", crasher.UID) {
		t.Errorf("pod crasher (app=crasher, crash-looping) was not reaped")
	}
	if !podExists(t, ns, "kept", kept.UID) {
		t.Errorf("pod kept (label keep=\"\") was reaped: an empty EXCLUDE_LABEL_VALUES excludes the empty value, as in pod-reaper")
	}
	if !podExists(t, ns, "other", other.UID) {
		t.Errorf("pod other (app=other) was reaped: REQUIRE_LABEL_VALUES does not list it")
	}
}

// A service that flaps while its weeder runs (Ready, down, Ready): the second return gets a
// full RUN_DURATION from that return. A dependent that is selectable only after the first
// return's window would have ended, but inside the second's, is reaped. Every moment is
// derived from the window: the pod crash-loops from the start under a label the weeder does
// not select and gets the selected one once the first window is over, so what is proven is
// which window was open then, not how fast a pod starts on a busy machine.
func TestWeederFlappingServiceSecondReturnGetsAFullRunDuration(t *testing.T) {
	parallelLong(t, 4*time.Minute)
	// Two minutes: the flap between the returns is a scale-down and a scale-up with a pod's
	// start in it, which took over 40 s on a machine running make test; the second return
	// must come inside the first window.
	const window = 2 * time.Minute
	ns := newNamespace(t, "flapwin")
	p := startPair(t, ns, "flapsvc")
	p.waitServiceReady(true, time.Minute)
	p.scaleUpstream(0)
	p.waitServiceReady(false, time.Minute)

	// reaper-rbac.yaml as shipped grants what START_WHEN_READY reads (EndpointSlices): nothing
	// is added here, so the example is proven sufficient.
	suffix := applyExample(t, ns, reapExample, map[string]string{
		"NAMESPACE": ns, "START_WHEN_READY": "flapsvc", "MAX_WAIT": "3m", "WATCH": "true",
		"CONTAINER_STATUSES": "CrashLoopBackOff", "LABEL_SELECTOR": "app=late", "RUN_DURATION": window.String(),
	})
	job := reapJobName + suffix
	late := crashingPod(t, ns, "late", map[string]string{"app": "not-yet"})
	waitFor(t, 90*time.Second, "the weeder armed", func() (bool, error) {
		out, err := kubectl(t, "-n", ns, "logs", "job/"+job)
		return err == nil && strings.Contains(out, "Reaper armed at"), nil
	})

	p.scaleUpstream(1)
	firstReturn := p.waitServiceReady(true, time.Minute) // the gate opened a moment before
	time.Sleep(10 * time.Second)
	p.scaleUpstream(0)
	p.waitServiceReady(false, time.Minute)
	time.Sleep(10 * time.Second)
	secondReturnBefore := time.Now()
	p.scaleUpstream(1)
	p.waitServiceReady(true, time.Minute)
	// The second return must fall inside the first window (with room for the moment the gate
	// opened before firstReturn was seen), or there is no running window for it to renew.
	if secondReturnBefore.After(firstReturn.Add(window - 10*time.Second)) {
		t.Fatalf("the flap took %s of the %s window: the second return came too late to renew the first window (the test's own steps were slow; not a product failure)",
			secondReturnBefore.Sub(firstReturn).Round(time.Second), window)
	}

	// Once the first window is over (and well inside the second: the second return came at
	// least 20 s after the first), the crash-looping pod becomes selectable.
	waitCrashLoopBackOff(t, ns, "late")
	time.Sleep(time.Until(firstReturn.Add(window + 3*time.Second)))
	if !podExists(t, ns, "late", late.UID) {
		t.Fatalf("pod late was deleted while the weeder did not select it")
	}
	if _, err := kube.CoreV1().Pods(ns).Patch(context.Background(), "late", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"late"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling pod late app=late: %v", err)
	}
	// The run ends with the second window; a pod it reaped, it reaped inside that window.
	if got := waitJobFinished(t, ns, job, time.Until(secondReturnBefore.Add(window))+2*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("job %s finished %s, want Complete", job, got)
	}
	if podExists(t, ns, "late", late.UID) {
		t.Errorf("pod late, crash-looping and selected after the first window had ended, was not reaped in the second window")
	}
	logs := jobLogs(t, ns, job)
	if !strings.Contains(logs, "fresh RUN_DURATION") {
		t.Errorf("the weeder's log does not say the return started a fresh RUN_DURATION:\n%s", logs)
	}
	if _, ok := findLine(parseLogLines(logs), map[string]string{"msg": "reaping pod", "pod": "late", "action": "deleted"}); !ok {
		t.Errorf("no `reaping pod` line for pod late:\n%s", logs)
	}
}
