package reaper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// oneShot runs a reaper with the given env as a one-shot run (REAP_AT_START: the first cycle
// runs at start and always completes; RUN_DURATION is tiny so nothing follows it).
func oneShot(t *testing.T, client *fake.Clientset, env map[string]string) (Summary, *logtest.Hook, error) {
	t.Helper()
	o := mustOptions(t, env)
	o.RunDuration = time.Nanosecond
	o.ReapAtStart = true
	log, hook := quietLogger()
	s, err := Run(context.Background(), client, o, log)
	return s, hook, err
}

func podObjects(pods ...*corev1.Pod) []runtime.Object {
	out := make([]runtime.Object, len(pods))
	for i, p := range pods {
		out[i] = p
	}
	return out
}

func podExists(t *testing.T, client *fake.Clientset, ns, name string) bool {
	t.Helper()
	_, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("get pod %s/%s: %v", ns, name, err)
	}
	return err == nil
}

func eventsFor(t *testing.T, client *fake.Clientset, ns string) []corev1.Event {
	t.Helper()
	l, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// reapLines returns the per-pod log lines (those with an action field).
func reapLines(hook *logtest.Hook) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, e := range hook.AllEntries() {
		if a, ok := e.Data["action"]; ok {
			fields := map[string]any{"msg": e.Message, "level": e.Level.String()}
			for k, v := range e.Data {
				fields[k] = v
			}
			out[fmt.Sprintf("%s/%s", e.Data["namespace"], e.Data["pod"])] = fields
			_ = a
		}
	}
	return out
}

func TestRunDeletesMatchingPodsWithEventAndLogLine(t *testing.T) {
	client := fake.NewClientset(podObjects(
		newPod("a", "crashing", crashLooping),
		newPod("a", "healthy"),
		newPod("b", "init-crashing", initWaiting("init", "CrashLoopBackOff")),
	)...)
	s, hook, err := oneShot(t, client, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if s.Seen != 3 || s.Matched != 2 || s.Reaped != 2 || s.Errors != 0 || s.Cycles != 1 {
		t.Errorf("summary = %+v", s)
	}
	if podExists(t, client, "a", "crashing") || podExists(t, client, "b", "init-crashing") || !podExists(t, client, "a", "healthy") {
		t.Errorf("wrong pods deleted")
	}
	evs := eventsFor(t, client, "a")
	if len(evs) != 1 {
		t.Fatalf("events in a = %d, want 1", len(evs))
	}
	ev := evs[0]
	if ev.Reason != ReasonReaped || ev.Source.Component != "depwatch-reaper" || ev.InvolvedObject.Name != "crashing" || ev.InvolvedObject.UID != "a/crashing" || ev.Type != corev1.EventTypeNormal {
		t.Errorf("event = %+v", ev)
	}
	line := reapLines(hook)["b/init-crashing"]
	if line["action"] != "deleted" || line["namespace"] != "b" || line["pod"] != "init-crashing" {
		t.Errorf("log line = %v", line)
	}
	if r, _ := line["reasons"].([]string); len(r) != 1 || r[0] != `init container "init" is waiting with reason CrashLoopBackOff` {
		t.Errorf("reasons = %#v", line["reasons"])
	}
	if msg := line["msg"].(string); msg != "reaping pod" {
		t.Errorf("message = %q, want pod-reaper's %q", msg, "reaping pod")
	}
	if d := line["detail"].(string); d != `Deleted pod b/init-crashing because init container "init" is waiting with reason CrashLoopBackOff.` {
		t.Errorf("detail = %q", d)
	}
}

func TestRunDeleteUsesGracePeriodAndUIDPrecondition(t *testing.T) {
	client := fake.NewClientset(newPod("a", "p", crashLooping))
	var got metav1.DeleteOptions
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		got = a.(k8stesting.DeleteAction).GetDeleteOptions()
		return false, nil, nil
	})
	if _, _, err := oneShot(t, client, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "GRACE_PERIOD": "15s"}); err != nil {
		t.Fatal(err)
	}
	if got.GracePeriodSeconds == nil || *got.GracePeriodSeconds != 15 {
		t.Errorf("GracePeriodSeconds = %v, want 15", got.GracePeriodSeconds)
	}
	if got.Preconditions == nil || got.Preconditions.UID == nil || *got.Preconditions.UID != "a/p" {
		t.Errorf("Preconditions = %+v, want the pod's UID", got.Preconditions)
	}
}

func TestRunEvictUsesPolicyV1Eviction(t *testing.T) {
	client := fake.NewClientset(newPod("a", "p", crashLooping))
	var eviction *policyv1.Eviction
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" {
			eviction, _ = a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		}
		return false, nil, nil
	})
	s, hook, err := oneShot(t, client, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "EVICT": "true", "GRACE_PERIOD": "5s"})
	if err != nil {
		t.Fatal(err)
	}
	if eviction == nil {
		t.Fatal("no policy/v1 Eviction was created")
	}
	if eviction.Name != "p" || eviction.Namespace != "a" || *eviction.DeleteOptions.GracePeriodSeconds != 5 || *eviction.DeleteOptions.Preconditions.UID != "a/p" {
		t.Errorf("eviction = %+v", eviction)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("EVICT=true must not delete: %v", a)
		}
	}
	if s.Reaped != 1 || reapLines(hook)["a/p"]["action"] != "evicted" {
		t.Errorf("summary = %+v, lines = %v", s, reapLines(hook))
	}
}

// TestRunEvictionRefusedBy429IsSkipped: a PodDisruptionBudget refusal is no error and no reap.
func TestRunEvictionRefusedBy429IsSkipped(t *testing.T) {
	refusals := map[string]error{
		"NewTooManyRequests": apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0),
		"StatusError 429": &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 429, Reason: metav1.StatusReasonTooManyRequests,
			Message: "Cannot evict pod as it would violate the pod's disruption budget.",
		}},
	}
	for name, refusal := range refusals {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(newPod("a", "p", crashLooping))
			client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() == "eviction" {
					return true, nil, refusal
				}
				return false, nil, nil
			})
			s, hook, err := oneShot(t, client, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "EVICT": "true"})
			if err != nil {
				t.Fatal(err)
			}
			if s.Skipped != 1 || s.Reaped != 0 || s.Errors != 0 {
				t.Errorf("summary = %+v, want 1 skipped", s)
			}
			line := reapLines(hook)["a/p"]
			if line["action"] != "skipped" || line["msg"] != "unable to delete pod" || !strings.Contains(line["detail"].(string), "disruption budget") {
				t.Errorf("log line = %v", line)
			}
			evs := eventsFor(t, client, "a")
			if len(evs) != 1 || evs[0].Reason != ReasonReapSkipped || evs[0].Type != corev1.EventTypeWarning {
				t.Errorf("events = %+v, want one ReapSkipped", evs)
			}
		})
	}
}

// TestRunMaxPodsCountsOnlyPodsActuallyReaped: failed and vanished pods leave room in the quota.
func TestRunMaxPodsCountsOnlyPodsActuallyReaped(t *testing.T) {
	client := fake.NewClientset(podObjects(
		newPod("a", "p1", crashLooping, startedAgo(5*time.Hour)),
		newPod("a", "p2", crashLooping, startedAgo(4*time.Hour)),
		newPod("a", "p3", crashLooping, startedAgo(3*time.Hour)),
		newPod("a", "p4", crashLooping, startedAgo(2*time.Hour)),
		newPod("a", "p5", crashLooping, startedAgo(1*time.Hour)),
	)...)
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.(k8stesting.DeleteAction).GetName() {
		case "p1":
			return true, nil, apierrors.NewInternalError(errors.New("etcd is sad"))
		case "p2":
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p2")
		}
		return false, nil, nil
	})
	s, hook, err := oneShot(t, client, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "MAX_PODS": "2", "POD_SORTING_STRATEGY": "oldest-first"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Reaped != 2 || s.Errors != 1 || s.Gone != 1 || s.Matched != 5 {
		t.Errorf("summary = %+v, want reaped 2 (p3, p4), 1 error (p1), 1 gone (p2)", s)
	}
	if podExists(t, client, "a", "p3") || podExists(t, client, "a", "p4") || !podExists(t, client, "a", "p5") {
		t.Errorf("want p3 and p4 deleted, p5 kept")
	}
	lines := reapLines(hook)
	// pod-reaper's texts and level (warning) for a pod it could not delete and for the pod
	// left to the next cycle by MAX_PODS.
	if lines["a/p1"]["action"] != "failed" || lines["a/p1"]["level"] != "warning" || lines["a/p1"]["msg"] != "unable to delete pod" || lines["a/p2"]["action"] != "gone" {
		t.Errorf("lines = %v", lines)
	}
	if p5 := lines["a/p5"]; p5["msg"] != "pod would be reaped but maxPods is exceeded" || p5["maxPods"] != 2 || p5["reapedPods"] != 2 {
		t.Errorf("p5's line = %v, want pod-reaper's maxPods line", p5)
	}
}

func TestRunDryRunChangesNothingUnderTheSameCap(t *testing.T) {
	client := fake.NewClientset(podObjects(
		newPod("a", "p1", crashLooping), newPod("a", "p2", crashLooping), newPod("a", "p3", crashLooping),
	)...)
	s, hook, err := oneShot(t, client, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "DRY_RUN": "true", "MAX_PODS": "2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "list" {
			t.Errorf("dry run made a change: %v", a)
		}
	}
	if s.Reaped != 2 || !s.DryRun || !strings.Contains(s.String(), "would-reap=2") {
		t.Errorf("summary = %+v (%s)", s, s)
	}
	lines := reapLines(hook)
	if lines["a/p1"]["action"] != "dry-run" || lines["a/p1"]["msg"] != "pod would be reaped but pod-reaper is in dry-run mode" ||
		!strings.HasPrefix(lines["a/p1"]["detail"].(string), "Dry run: would delete pod a/p1 because") {
		t.Errorf("lines = %v", lines)
	}
}

// TestRunOneShotCompletesFirstCycleDespiteShortRunDuration: RUN_DURATION=1s is a one-shot
// run even when the cycle takes longer.
func TestRunOneShotCompletesFirstCycleDespiteShortRunDuration(t *testing.T) {
	client := fake.NewClientset(podObjects(
		newPod("a", "p1", crashLooping), newPod("a", "p2", crashLooping), newPod("a", "p3", crashLooping),
	)...)
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		time.Sleep(5 * time.Millisecond) // each delete outlasts RUN_DURATION
		return false, nil, nil
	})
	o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "RUN_DURATION": "1ms", "REAP_AT_START": "true"})
	log, hook := quietLogger()
	s, err := Run(context.Background(), client, o, log)
	if err != nil || s.Reaped != 3 || s.Cycles != 1 {
		t.Fatalf("Run = %+v, %v; want all 3 reaped in one cycle", s, err)
	}
	last := hook.LastEntry()
	if last.Data["stop_reason"] != "RUN_DURATION elapsed" || !strings.Contains(last.Message, s.String()) {
		t.Errorf("last log line = %q %v, want the summary", last.Message, last.Data)
	}
}

// TestRunDurationStopsALaterCycleBetweenTwoPods: only the first cycle at start outlives
// RUN_DURATION; a cycle on a later tick stops between two pods when the run's window ends,
// finishing the pod in hand, and the run ends with RUN_DURATION as its reason.
func TestRunDurationStopsALaterCycleBetweenTwoPods(t *testing.T) {
	client := fake.NewClientset(podObjects(
		newPod("a", "p1", crashLooping), newPod("a", "p2", crashLooping), newPod("a", "p3", crashLooping),
	)...)
	start := time.Now()
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		time.Sleep(time.Until(start.Add(3100 * time.Millisecond))) // the first delete outlasts RUN_DURATION
		return false, nil, nil
	})
	// RUN_DURATION leaves the first tick (within a second of the start) two seconds of slack on
	// a loaded machine; the test's outcome depends on the order of tick, window end and delete,
	// not on how long any of them takes.
	o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "SCHEDULE": "@every 1s", "RUN_DURATION": "3s"})
	log, hook := quietLogger()
	s, err := Run(context.Background(), client, o, log)
	if err != nil || s.Cycles != 1 || s.Matched != 3 || s.Reaped != 1 {
		t.Fatalf("Run = %+v, %v; want one cycle (the first tick) that reaped the pod in hand and left two", s, err)
	}
	stopped := false
	for _, e := range hook.AllEntries() {
		stopped = stopped || strings.Contains(e.Message, "Stopping between pods: 2 matched pods left alone.")
	}
	if !stopped {
		t.Error("no line says the cycle stopped between pods")
	}
	if last := hook.LastEntry(); last.Data["stop_reason"] != "RUN_DURATION elapsed" {
		t.Errorf("last line = %q %v, want the summary with RUN_DURATION as its reason", last.Message, last.Data)
	}
}

// TestRunCancelFinishesPodInHand: SIGTERM (a cancelled ctx) during a delete lets that delete
// finish, touches no further pod, and returns the summary without error.
func TestRunCancelFinishesPodInHand(t *testing.T) {
	client := fake.NewClientset(podObjects(
		newPod("a", "p1", crashLooping, startedAgo(3*time.Hour)),
		newPod("a", "p2", crashLooping, startedAgo(2*time.Hour)),
		newPod("a", "p3", crashLooping, startedAgo(1*time.Hour)),
	)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel() // SIGTERM arrives while the first delete is in flight
		return false, nil, nil
	})
	o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "POD_SORTING_STRATEGY": "oldest-first", "REAP_AT_START": "true"})
	log, hook := quietLogger()
	done := make(chan struct{})
	var s Summary
	var err error
	go func() { s, err = Run(ctx, client, o, log); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if err != nil || s.Reaped != 1 || s.Matched != 3 {
		t.Fatalf("Run = %+v, %v; want exactly the pod in hand reaped", s, err)
	}
	if podExists(t, client, "a", "p1") || !podExists(t, client, "a", "p2") || !podExists(t, client, "a", "p3") {
		t.Error("want p1 deleted (in hand), p2 and p3 left alone")
	}
	if len(eventsFor(t, client, "a")) != 1 {
		t.Error("the pod in hand must still get its Event")
	}
	if hook.LastEntry().Data["stop_reason"] != "asked to stop (SIGTERM or context cancelled)" {
		t.Errorf("last line = %v", hook.LastEntry().Data)
	}
}

func TestRunListFailureIsAnError(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no RBAC"))
	})
	s, _, err := oneShot(t, client, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff"})
	if err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("err = %v, want the wrapped Forbidden", err)
	}
	if s.FailedCycles != 1 || s.Cycles != 0 {
		t.Errorf("summary = %+v", s)
	}
}

func TestRunRejectsOptionsNotFromLoadOptions(t *testing.T) {
	log, _ := quietLogger()
	_, err := Run(context.Background(), fake.NewClientset(), Options{}, log)
	var cfg *envconf.ConfigError
	if !errors.As(err, &cfg) {
		t.Fatalf("err = %v, want *envconf.ConfigError", err)
	}
}

// TestRunListsWithServerSideSelectorsAndPagination: label and field selectors go to the API
// server, with a page limit, and Continue tokens are followed.
func TestRunListsWithServerSideSelectorsAndPagination(t *testing.T) {
	client := fake.NewClientset()
	var lists []metav1.ListOptions
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lo := a.(k8stesting.ListActionImpl).ListOptions
		lists = append(lists, lo)
		if a.GetNamespace() != "a" {
			t.Errorf("listed namespace %q, want NAMESPACE a", a.GetNamespace())
		}
		l := &corev1.PodList{}
		if lo.Continue == "" {
			l.Continue = "page2"
			l.Items = []corev1.Pod{*newPod("a", "p1", phase(corev1.PodFailed), withLabel("app", "x"), func(p *corev1.Pod) { p.Spec.NodeName = "n1" })}
		} else {
			l.Items = []corev1.Pod{*newPod("a", "p2", phase(corev1.PodFailed), withLabel("app", "x"), func(p *corev1.Pod) { p.Spec.NodeName = "n1" })}
		}
		return true, l, nil
	})
	s, _, err := oneShot(t, client, map[string]string{"POD_STATUS_PHASES": "Failed", "NODE_NAME": "n1", "LABEL_SELECTOR": "app=x", "NAMESPACE": "a", "DRY_RUN": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if len(lists) != 2 || lists[1].Continue != "page2" {
		t.Fatalf("lists = %+v, want 2 pages", lists)
	}
	lo := lists[0]
	if lo.Limit != pageSize || lo.LabelSelector != "app=x" || !strings.Contains(lo.FieldSelector, "spec.nodeName=n1") || !strings.Contains(lo.FieldSelector, "status.phase!=Running") {
		t.Errorf("list options = %+v", lo)
	}
	if s.Seen != 2 || s.Reaped != 2 {
		t.Errorf("summary = %+v", s)
	}
}

// TestRunLabelSelectorsAreORedAndEachPodJudgedOnce: overlapping selectors list a pod twice, but
// it is seen and reaped once.
func TestRunLabelSelectorsAreORedAndEachPodJudgedOnce(t *testing.T) {
	client := fake.NewClientset(podObjects(
		newPod("a", "both", crashLooping, withLabel("app", "a"), withLabel("tier", "web")),
		newPod("a", "web", crashLooping, withLabel("tier", "web")),
		newPod("a", "other", crashLooping, withLabel("app", "z")),
	)...)
	s, _, err := oneShot(t, client, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "LABEL_SELECTORS": `["app=a","tier=web"]`})
	if err != nil {
		t.Fatal(err)
	}
	if s.Seen != 2 || s.Reaped != 2 || !podExists(t, client, "a", "other") {
		t.Errorf("summary = %+v; want both and web reaped once each, other kept", s)
	}
}

// TestRunCyclesFollowTheSchedule: with REAP_AT_START the first cycle at start, the next on the
// schedule, until RUN_DURATION.
func TestRunCyclesFollowTheSchedule(t *testing.T) {
	client := fake.NewClientset(newPod("a", "p", crashLooping))
	o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "SCHEDULE": "@every 1s", "RUN_DURATION": "1500ms", "DRY_RUN": "true", "REAP_AT_START": "true"})
	log, _ := quietLogger()
	start := time.Now()
	s, err := Run(context.Background(), client, o, log)
	took := time.Since(start)
	// @every rounds its ticks to whole seconds, so 1.5s holds the start cycle and one or two ticks.
	if err != nil || s.Cycles < 2 || s.Cycles > 3 {
		t.Fatalf("Run = %+v, %v; want the start cycle plus 1-2 ticks", s, err)
	}
	if took < 1500*time.Millisecond || took > 2*time.Second {
		t.Errorf("run took %v, want RUN_DURATION (1.5s)", took)
	}
	if s.Reaped != 1 || s.Matched != 1 {
		t.Errorf("summary = %+v: a dry-run pod is reported once per UID, not every cycle", s)
	}
}

// TestRunEventFailureIsOnlyAWarning: the pod was reaped; a missing Event must not hide that.
func TestRunEventFailureIsOnlyAWarning(t *testing.T) {
	client := fake.NewClientset(newPod("a", "p", crashLooping))
	client.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", errors.New("no RBAC"))
	})
	s, hook, err := oneShot(t, client, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff"})
	if err != nil || s.Reaped != 1 || s.Errors != 0 {
		t.Fatalf("Run = %+v, %v", s, err)
	}
	warned := false
	for _, e := range hook.AllEntries() {
		warned = warned || (e.Level.String() == "warning" && strings.Contains(e.Message, "Could not record the Reaped Event"))
	}
	if !warned {
		t.Error("no warning about the failed Event")
	}
}

func TestSummaryString(t *testing.T) {
	s := Summary{Cycles: 2, Seen: 10, Matched: 3, Reaped: 2, Skipped: 1}
	if got, want := s.String(), "cycles=2 failed-cycles=0 seen=10 matched=3 reaped=2 skipped=1 gone=0 errors=0 deferred=0 backoff-skipped=0 backoff-saved=0s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	s.DryRun = true
	if got := s.String(); !strings.HasPrefix(got, "dry run, nothing changed: ") || !strings.Contains(got, "would-reap=2") {
		t.Errorf("dry-run String() = %q", got)
	}
}

// TestRunFirstCycleWaitsForTheScheduleFirstTick is pod-reaper's contract: without
// REAP_AT_START (or WATCH, or START_WHEN_READY) nothing is listed or reaped before SCHEDULE's
// first tick, for a cron spec and for @every alike; a RUN_DURATION that ends first reaps nothing.
func TestRunFirstCycleWaitsForTheScheduleFirstTick(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		wantCycles int
	}{
		{"cron spec whose first tick is far away: nothing at start", map[string]string{"SCHEDULE": "0 0 1 1 *", "RUN_DURATION": "300ms"}, 0},
		{"@every 1m (the default): nothing in the first minute", map[string]string{"RUN_DURATION": "300ms"}, 0},
		// @every rounds its ticks down to whole seconds: the first tick is within 1s of start,
		// the second may or may not fall inside 1.5s; the point is that none was at start.
		{"@every 1s: the first cycle is at the first tick", map[string]string{"SCHEDULE": "@every 1s", "RUN_DURATION": "1500ms"}, -1},
		{"REAP_AT_START: one cycle at start", map[string]string{"SCHEDULE": "0 0 1 1 *", "RUN_DURATION": "300ms", "REAP_AT_START": "true"}, 1},
		{"WATCH implies a cycle at start", map[string]string{"SCHEDULE": "0 0 1 1 *", "RUN_DURATION": "300ms", "WATCH": "true"}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(newPod("a", "p", crashLooping))
			tc.env["CONTAINER_STATUSES"] = "CrashLoopBackOff"
			o := mustOptions(t, tc.env)
			log, hook := quietLogger()
			s, err := Run(context.Background(), client, o, log)
			okCycles := s.Cycles == tc.wantCycles || (tc.wantCycles < 0 && s.Cycles >= 1 && s.Cycles <= 2)
			if err != nil || !okCycles {
				t.Fatalf("Run = %+v, %v; want %d cycles (-1: one or two ticks)", s, err, tc.wantCycles)
			}
			lists := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "list" && a.GetResource().Resource == "pods" && tc.env["WATCH"] == "" {
					lists++
				}
			}
			if tc.wantCycles == 0 {
				if lists != 0 || s.Reaped != 0 || !podExists(t, client, "a", "p") {
					t.Errorf("listed %d times, reaped %d: want nothing before the first tick", lists, s.Reaped)
				}
				if first := hook.AllEntries()[0]; first.Data["first_cycle_at"] == nil {
					t.Errorf("start line %q does not say when the first cycle runs", first.Message)
				}
			}
		})
	}
}
