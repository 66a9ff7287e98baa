//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/depwatch/depwatch/jobs"
)

// podRef is a pod the test made, by name and UID.
type podRef struct {
	ns, name string
	uid      types.UID
}

func refOf(p *corev1.Pod) podRef { return podRef{p.Namespace, p.Name, p.UID} }

// TestSecurityWeederTouchesOnlyPodsInItsNamespaceMatchingItsSelectors: a weeder Job exactly as
// the coordinator builds it (jobs.Weeder + the local config's jobTemplate, service account
// depwatch-weeder with its cluster-wide delete right) watches namespace A with two OR-ed
// selectors for 20 s. It deletes the two crash-looping pods that match a selector in A, and
// nothing else: crash-looping decoys in A that match no selector, a healthy pod that matches
// one, and crash-looping pods in namespace B that match the selectors all keep their UIDs and
// get no Event, although they keep crashing (and so keep being reported to the watch) for the
// whole run.
func TestSecurityWeederTouchesOnlyPodsInItsNamespaceMatchingItsSelectors(t *testing.T) {
	parallel(t)
	ensureCoordinator(t)
	nsA := newNamespace(t, "sec-scope")
	nsB := newNamespace(t, "sec-scope-other")

	targets := []podRef{
		refOf(crashingPod(t, nsA, "target-app", map[string]string{"app": "target"})),
		refOf(crashingPod(t, nsA, "target-tier", map[string]string{"tier": "target"})),
	}
	decoys := []podRef{
		refOf(crashingPod(t, nsA, "decoy-other-label", map[string]string{"app": "decoy"})),
		refOf(crashingPod(t, nsA, "decoy-no-label", nil)),
		refOf(sleepingPod(t, nsA, "healthy-target", map[string]string{"app": "target"})),
		refOf(crashingPod(t, nsB, "other-ns-app", map[string]string{"app": "target"})),
		refOf(crashingPod(t, nsB, "other-ns-tier", map[string]string{"tier": "target"})),
	}
	for _, p := range append(append([]podRef(nil), targets...), decoys...) {
		if p.name == "healthy-target" {
			waitPodRunning(t, p.ns, p.name)
		} else {
			waitCrashLoopBackOff(t, p.ns, p.name)
		}
	}

	// A weeder reaps only while its service is Ready (START_WHEN_READY), as on a return.
	createReadyService(t, nsA, "sec-scope")
	spec, err := jobs.Weeder(jobs.WeederSpec{
		Namespace: nsA, Service: "sec-scope",
		Selectors: []metav1.LabelSelector{
			{MatchLabels: map[string]string{"app": "target"}},
			{MatchLabels: map[string]string{"tier": "target"}},
		},
		WatchDuration: 20 * time.Second, Trigger: jobs.TriggerManual, TriggerTime: time.Now(),
		// The scope is tested, not the back-off: BackOffFloor is left 0 (off). With the
		// weeder's default BACKOFF_FLOOR a target whose kubelet restart happens to be due
		// within 2 s of the Job's look is left to the kubelet (a "backoff-skipped" line),
		// crashes again and is deleted on its next round, or not before the run ends,
		// whichever the load decides. Off, every target is deleted once, on the Job's first
		// look.
	})
	if err != nil {
		t.Fatal(err)
	}
	job := createDepwatchJob(t, localJobTemplate(t), spec)
	if got := waitJobFinished(t, depwatchNS, job, 2*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("weeder Job %s finished %s, want Complete", job, got)
	}

	for _, p := range targets {
		if podExists(t, p.ns, p.name, p.uid) {
			t.Errorf("target %s/%s (crash-looping, matches a selector, in NAMESPACE) was not deleted", p.ns, p.name)
		}
	}
	for _, p := range decoys {
		if !podExists(t, p.ns, p.name, p.uid) {
			t.Errorf("decoy %s/%s was deleted: it is outside NAMESPACE or its selectors (or not crash-looping)", p.ns, p.name)
		}
		for _, reason := range []string{"Reaped", "ReapSkipped"} {
			if ev := eventsFor(t, p.ns, p.name)[reason]; len(ev) > 0 {
				t.Errorf("decoy %s/%s got a %s Event: %s", p.ns, p.name, reason, ev[0].Message)
			}
		}
	}
	logs := jobLogs(t, depwatchNS, job)
	acted := 0
	for _, l := range parseLogLines(logs) {
		if l.str("pod") == "" || l.str("action") == "" {
			continue
		}
		acted++
		if l.str("namespace") != nsA || (l.str("pod") != "target-app" && l.str("pod") != "target-tier") {
			t.Errorf("the weeder acted on a pod that is not a target: %v", l)
		}
	}
	if acted != len(targets) {
		t.Errorf("the weeder's log has %d pod actions, want %d (one per target):\n%s", acted, len(targets), logs)
	}
}

// TestSecurityReapDryRunInWatchModeChangesNothingAndRecordsNoEvent: the reap example with
// DRY_RUN=true and WATCH=true over three crash-looping pods for 15 s reports each of them once
// as dry-run, and changes nothing: same UIDs, not one Event from the reaper in the namespace.
func TestSecurityReapDryRunInWatchModeChangesNothingAndRecordsNoEvent(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, "sec-dryrun")
	var pods []podRef
	for _, name := range []string{"crasher-1", "crasher-2", "crasher-3"} {
		pods = append(pods, refOf(crashingPod(t, ns, name, map[string]string{"app": "crasher"})))
	}
	for _, p := range pods {
		waitCrashLoopBackOff(t, ns, p.name)
	}
	suffix := applyExample(t, ns, reapExample, map[string]string{
		"NAMESPACE": ns, "CONTAINER_STATUSES": "CrashLoopBackOff", "LABEL_SELECTORS": `["app=crasher"]`,
		"WATCH": "true", "RUN_DURATION": "15s", "DRY_RUN": "true",
	})
	job := reapJobName + suffix
	if got := waitJobFinished(t, ns, job, 2*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("job %s finished %s, want Complete", job, got)
	}
	lines := parseLogLines(jobLogs(t, ns, job))
	for _, p := range pods {
		if !podExists(t, ns, p.name, p.uid) {
			t.Errorf("pod %s was deleted by a dry run", p.name)
		}
		n := 0
		for _, l := range lines {
			if l.str("pod") == p.name && l.str("action") == "dry-run" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("pod %s: %d dry-run lines, want 1 (a UID is reported once per run)", p.name, n)
		}
	}
	events, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Source.Component == "depwatch-reaper" || e.Reason == "Reaped" || e.Reason == "ReapSkipped" {
			t.Errorf("a dry run recorded Event %s on %s: %s", e.Reason, e.InvolvedObject.Name, e.Message)
		}
	}
	if msg := terminationMessage(t, ns, job); !strings.HasPrefix(msg, "dry run, nothing changed:") || !strings.Contains(msg, "would-reap=3") {
		t.Errorf("termination message %q, want a dry-run summary with would-reap=3", msg)
	}
}

// TestSecurityReapMaxPodsHoldsWhileCandidatesArriveConcurrently: MAX_PODS is per run and per
// cycle, and within a run every path to a pod shares it: the cycle's list and the WATCH
// informer (one watch for both OR-ed selectors, beside the cycle's list). A run with MAX_PODS=2, two
// selectors and one cycle (SCHEDULE @every 1h) over five crash-looping candidates deletes
// exactly two; two more candidates that start crash-looping while it runs reach it through
// the watch, are logged as waiting for the next cycle, and survive, as do the other three.
func TestSecurityReapMaxPodsHoldsWhileCandidatesArriveConcurrently(t *testing.T) {
	parallelLong(t, 60*time.Second)
	ns := newNamespace(t, "sec-maxpods")
	var first []podRef
	for i, name := range []string{"crasher-1", "crasher-2", "crasher-3", "crasher-4", "crasher-5"} {
		labels := map[string]string{"app": "crasher"}
		if i >= 3 {
			labels = map[string]string{"tier": "crasher"}
		}
		first = append(first, refOf(crashingPod(t, ns, name, labels)))
	}
	for _, p := range first {
		waitCrashLoopBackOff(t, ns, p.name)
	}
	suffix := applyExample(t, ns, reapExample, map[string]string{
		"NAMESPACE": ns, "CONTAINER_STATUSES": "CrashLoopBackOff", "LABEL_SELECTORS": `["app=crasher","tier=crasher"]`,
		"WATCH": "true", "MAX_PODS": "2", "SCHEDULE": "@every 1h", "RUN_DURATION": "50s",
	})
	job := reapJobName + suffix

	gone := func() int {
		n := 0
		for _, p := range first {
			if !podExists(t, ns, p.name, p.uid) {
				n++
			}
		}
		return n
	}
	waitFor(t, 60*time.Second, "the run's first cycle to delete two pods", func() (bool, error) { return gone() >= 2, nil })
	late := []podRef{
		refOf(crashingPod(t, ns, "late-app", map[string]string{"app": "crasher"})),
		refOf(crashingPod(t, ns, "late-tier", map[string]string{"tier": "crasher"})),
	}
	for _, p := range late {
		waitCrashLoopBackOff(t, ns, p.name)
	}
	j, err := kube.BatchV1().Jobs(ns).Get(context.Background(), job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if jobs.Finished(j) {
		t.Fatalf("the run ended before the late pods were crash-looping: nothing proven (raise RUN_DURATION)")
	}
	if got := waitJobFinished(t, ns, job, 2*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("job %s finished %s, want Complete", job, got)
	}

	if n := gone(); n != 2 {
		t.Errorf("%d of the first five candidates were deleted, want exactly MAX_PODS=2", n)
	}
	for _, p := range late {
		if !podExists(t, ns, p.name, p.uid) {
			t.Errorf("late candidate %s was deleted after the run had used its MAX_PODS", p.name)
		}
	}
	reaped := 0
	for _, p := range append(append([]podRef(nil), first...), late...) {
		reaped += len(eventsFor(t, ns, p.name)["Reaped"])
	}
	if reaped != 2 {
		t.Errorf("%d Reaped Events, want 2", reaped)
	}
	logs := jobLogs(t, ns, job)
	for _, p := range late {
		if !strings.Contains(logs, "MAX_PODS=2 reached: pod "+ns+"/"+p.name+" matches but waits for the next cycle") {
			t.Errorf("the log does not show late pod %s reaching the run through the watch and being held back by MAX_PODS:\n%s", p.name, logs)
		}
	}
	if msg := terminationMessage(t, ns, job); !strings.Contains(msg, " reaped=2 ") {
		t.Errorf("termination message %q, want reaped=2", msg)
	}
}
