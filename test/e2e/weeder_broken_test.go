//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/reaper"
)

// A fault: a dependent that keeps crash-looping after recovery (it is broken for
// another reason) is restarted by the weeder at most at the bounded rate REAP_COOLDOWN sets,
// and the weeder stops at watchDuration.
//
// The Job is the weeder the coordinator would launch (jobs.Weeder + jobs.Build with the local
// overlay's jobTemplate, unarmed, as on a return), with a short watchDuration and cooldown, for
// a service name the coordinator does not watch, so nothing else acts on it. The workload is a
// 2-replica Deployment whose container always exits 1.
func TestWeederRestartsAForeverCrashLoopingDependentAtMostAtTheBoundedRate(t *testing.T) {
	parallelLong(t, 90*time.Second)
	const (
		replicas      = 2
		watchDuration = 80 * time.Second
		cooldown      = 25 * time.Second
		// Per controller: at most 1 + floor(watchDuration / cooldown) rounds, each pod at most
		// once per round.
		rounds = 1 + int(watchDuration/cooldown)
		bound  = replicas * rounds
	)
	ensureCoordinator(t) // installs the depwatch namespace and the depwatch-weeder RBAC
	ns := newNamespace(t, "broken")
	brokenDeployment(t, ns, "broken", replicas)
	originals := waitDeploymentCrashLooping(t, ns, "broken", replicas)

	// The weeder follows its service (it reaps only while the service is Ready): a Ready
	// service whose dependent is broken for a reason of its own.
	createReadyService(t, ns, "broken-svc")
	const savedCount = "depwatch_coordinator_weeder_backoff_saved_seconds_count"
	countBefore := lab.metric(t, savedCount)
	job := createWeederJob(t, ns, "broken-svc", watchDuration, cooldown, []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "broken"}}})
	t.Logf("weeder Job %s/%s: watchDuration %s, REAP_COOLDOWN %s, bound %d rounds × %d replicas = %d deletions",
		depwatchNS, job, watchDuration, cooldown, rounds, replicas, bound)

	if got := waitJobFinished(t, depwatchNS, job, watchDuration+3*time.Minute); got != batchv1.JobComplete {
		t.Fatalf("weeder Job %s finished %s, want Complete", job, got)
	}
	j, err := kube.BatchV1().Jobs(depwatchNS).Get(context.Background(), job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Status.StartTime != nil && j.Status.CompletionTime != nil {
		ran := j.Status.CompletionTime.Sub(j.Status.StartTime.Time)
		t.Logf("the Job ran %s (watchDuration %s)", ran.Round(time.Second), watchDuration)
		// derived bound: the watchDuration this test configured. Job times have whole-second
		// resolution; the upper margin is for the pod's start, however slow.
		if ran < watchDuration-time.Second || ran > watchDuration+time.Minute {
			t.Errorf("the weeder Job ran %s, want about its watchDuration %s", ran.Round(time.Second), watchDuration)
		}
	}

	lines := parseLogLines(jobLogs(t, depwatchNS, job))
	var deleted []logLine
	deferred := 0
	for _, l := range lines {
		if l.str("namespace") != ns {
			continue
		}
		switch l.str("action") {
		case "deleted":
			deleted = append(deleted, l)
		case "deferred":
			deferred++
			if l.str("reason") != "reap-cooldown" || !strings.HasPrefix(l.str("owner"), "ReplicaSet "+ns+"/broken-") || l.str("until") == "" {
				t.Errorf("deferral line lacks reason/owner/until: %v", l)
			}
		}
	}
	reapedEvents := reapedEventCount(t, ns)
	t.Logf("deletions: %d logged, %d Reaped Events; %d deferral lines", len(deleted), reapedEvents, deferred)

	if len(deleted) < 1 || len(deleted) > bound {
		t.Errorf("the weeder deleted %d pods of the broken Deployment, want between 1 and the bound %d", len(deleted), bound)
	}
	if reapedEvents > bound {
		t.Errorf("%d Reaped Events in %s, more than the bound %d", reapedEvents, ns, bound)
	}
	// The replicas that crash-looped before the weeder started are restarted in its first round.
	gone := map[string]bool{}
	for _, l := range deleted {
		gone[l.str("uid")] = true
	}
	for _, p := range originals {
		if !gone[string(p.UID)] {
			t.Errorf("the original crash-looping pod %s (uid %s) was not restarted by the weeder", p.Name, p.UID)
		}
	}
	// Each replacement crash-loops again within seconds on a quiet machine, well inside the
	// cooldown, and is held back (a deferral line). On a loaded one a replacement may take
	// longer than the cooldown to start and crash, and then there is nothing to hold back:
	// the rate is held by the rounds below either way, and the deferrals are checked where
	// there were any.
	checkRounds(t, deleted, cooldown, replicas, rounds)

	msg := terminationMessage(t, depwatchNS, job)
	if deferred > 0 && (!strings.Contains(msg, "deferred=") || strings.Contains(msg, "deferred=0")) {
		t.Errorf("the termination message does not count the %d deferred pods: %q", deferred, msg)
	}

	// What the restarts saved reaches Prometheus through the coordinator: the run's report
	// counts each deletion whose back-off was read, and the lab coordinator's histogram has
	// at least those (other tests' weeders add theirs).
	saved := 0
	for _, l := range deleted {
		if _, ok := l["backoff_saved_seconds"]; ok {
			saved++
		}
	}
	rep, err := reaper.ReadReport(msg)
	if err != nil {
		t.Fatalf("the weeder's termination message has no report: %v\n%s", err, msg)
	}
	var counted uint64
	for _, n := range rep.SavedCounts {
		counted += n
	}
	if counted != uint64(saved) || rep.Reaped != len(deleted) {
		t.Errorf("the report counts %d restarts with their saved back-off and %d reaped; the log has %d and %d", counted, rep.Reaped, saved, len(deleted))
	}
	waitFor(t, time.Minute, "the lab coordinator to count the run's saved back-off", func() (bool, error) {
		return lab.metric(t, savedCount) >= max(countBefore, 0)+float64(saved), nil
	})
	t.Logf("%d restarts saved %.0fs of back-off in all (%s %g → %g)", saved, rep.SavedSeconds, savedCount, countBefore, lab.metric(t, savedCount))

	// And per service: the run's one service has its restarts and their saved back-off in the
	// report and, through the lab coordinator, in its own series (the namespace is this
	// test's alone, so the series is too).
	key := ns + "/broken-svc"
	perService, ok := rep.Services[key]
	switch {
	case !ok || len(rep.Services) != 1:
		t.Errorf("the report's services are %v; want %s alone", rep.Services, key)
	// derived bound: the report rounds each service's sum to a tenth of a second.
	case perService.Restarts != len(deleted) || math.Abs(perService.Saved-rep.SavedSeconds) > 0.1:
		t.Errorf("the report gives %s %d restarts saving %.1fs; the run restarted %d, saving %.1fs", key, perService.Restarts, perService.Saved, len(deleted), rep.SavedSeconds)
	}
	labels := fmt.Sprintf("{namespace=%q,service=%q}", ns, "broken-svc")
	waitFor(t, time.Minute, "the lab coordinator's series of "+key, func() (bool, error) {
		return lab.metric(t, "depwatch_coordinator_weeder_service_restarts_total"+labels) == float64(perService.Restarts), nil
	})
	if got := lab.metric(t, "depwatch_coordinator_weeder_service_backoff_saved_seconds_total"+labels); got != perService.Saved {
		t.Errorf("depwatch_coordinator_weeder_service_backoff_saved_seconds_total%s = %g, want the report's %g", labels, got, perService.Saved)
	}
}

// checkRounds groups the deletions (by the weeder's own log time, whole seconds) into rounds:
// a round opens with a deletion and holds the deletions within the cooldown after it. Rounds
// must be at most `rounds` and each at most `replicas` deletions.
func checkRounds(t *testing.T, deleted []logLine, cooldown time.Duration, replicas, rounds int) {
	t.Helper()
	var at []time.Time
	for _, l := range deleted {
		ts, err := time.Parse(time.RFC3339Nano, l.str("time"))
		if err != nil {
			t.Errorf("deletion line without a time: %v", l)
			return
		}
		at = append(at, ts)
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	var sizes []int
	var opened time.Time
	for _, ts := range at {
		// One second of slack for the log's whole-second timestamps.
		if len(sizes) == 0 || ts.Sub(opened) >= cooldown-time.Second {
			sizes = append(sizes, 0)
			opened = ts
		}
		sizes[len(sizes)-1]++
	}
	t.Logf("deletions per round: %v", sizes)
	if len(sizes) > rounds {
		t.Errorf("%d rounds of deletions %v, want at most %d", len(sizes), sizes, rounds)
	}
	for i, n := range sizes {
		if n > replicas {
			t.Errorf("round %d deleted %d pods, more than the %d replicas", i+1, n, replicas)
		}
	}
}

// brokenDeployment runs replicas pods whose container exits 1 at once, forever.
func brokenDeployment(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	zero := int64(0)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &zero,
					Containers: []corev1.Container{{
						Name: "app", Image: testappImage, ImagePullPolicy: corev1.PullNever,
						Command: []string{"/testapp", "exit", "1"},
					}},
				},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/%s: %v", ns, name, err)
	}
}

// waitDeploymentCrashLooping waits until n pods of the Deployment have crashed at least once
// and wait out a kubelet back-off, and returns them.
func waitDeploymentCrashLooping(t *testing.T, ns, app string, n int) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d pods of %s/%s in CrashLoopBackOff", n, ns, app), func() (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err
		}
		out = out[:0]
		for _, p := range pods.Items {
			_, crashLooping := podstate.CrashLoopBackOff(&p)
			if crashLooping && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1 {
				out = append(out, p)
			}
		}
		return len(out) == n, nil
	})
	return out
}

// createWeederJob creates the weeder Job the coordinator would build, with the local overlay's
// jobTemplate, and returns its name.
func createWeederJob(t *testing.T, ns, service string, watchDuration, cooldown time.Duration, selectors []metav1.LabelSelector) string {
	t.Helper()
	spec, err := jobs.Weeder(jobs.WeederSpec{
		Namespace: ns, Service: service, Selectors: selectors,
		WatchDuration: watchDuration, ReapCooldown: cooldown, BackOffFloor: reaper.DefaultBackOffFloor,
		Trigger: jobs.TriggerManual, TriggerTime: time.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return createDepwatchJob(t, localJobTemplate(t), spec)
}

// reapedEventCount counts the Reaped Events depwatch recorded in the namespace.
func reapedEventCount(t *testing.T, ns string) int {
	t.Helper()
	list, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reaper.ReasonReaped})
	if err != nil {
		t.Fatalf("listing Reaped events in %s: %v", ns, err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Source.Component == "depwatch-reaper" {
			n++
		}
	}
	return n
}
