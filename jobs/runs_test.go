package jobs

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/reaper"
)

// A Job's pod writes its report as its container's termination message; the Job executor's
// Runs hands it to the controller as the Report the run wrote, taken once, offered again on
// the pod's next change while the controller declines it, and offered afresh for a pod of the
// same UID only after that pod was deleted.
func TestTheJobExecutorHandsEachPodsReportOverUntilTaken(t *testing.T) {
	msg := reaper.TerminationMessage(reaper.Summary{Reaped: 2})
	end := metav1.NewTime(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "depwatch", Name: "weeder-a-x", UID: "a", Labels: map[string]string{LabelKind: string(KindWeeder)}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: "not the run's"}}},
			{Name: string(KindWeeder), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	}
	client := fake.NewClientset()
	var mu sync.Mutex
	var got []Report
	take := false
	runs, err := InCluster(client).RunView("depwatch", KindWeeder, func(Run) []string { return nil }, RunHandlers{Reported: func(r Report) bool {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r)
		return take
	}})
	if err != nil {
		t.Fatal(err)
	}
	offered := func() []Report { mu.Lock(); defer mu.Unlock(); return append([]Report(nil), got...) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { runs.RunWithContext(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if !cache.WaitForCacheSync(ctx.Done(), runs.HasSynced) {
		t.Fatal("not synced")
	}
	pods := client.CoreV1().Pods("depwatch")
	update := func(p *corev1.Pod) {
		t.Helper()
		if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(offered()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d reports offered, want %d", len(offered()), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: end, Message: msg}}
	update(pod) // ended: offered, declined
	wait(1)
	mu.Lock()
	take = true
	mu.Unlock()
	pod.Annotations = map[string]string{"touched": "1"}
	update(pod) // offered again, taken
	wait(2)
	pod.Annotations["touched"] = "2"
	update(pod) // taken before: not offered
	if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.ResourceVersion = ""
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil { // deleted, forgotten
		t.Fatal(err)
	}
	wait(3)
	all := offered()
	if len(all) != 3 {
		t.Fatalf("%d reports offered, want 3: %+v", len(all), all)
	}
	want := Report{Run: "depwatch/weeder-a-x", FinishedAt: end.Time, Message: msg}
	for _, r := range all {
		if !r.FinishedAt.Equal(want.FinishedAt) || r.Run != want.Run || r.Message != want.Message {
			t.Errorf("report %+v, want %+v", r, want)
		}
	}
	if rep, err := reaper.ReadReport(all[0].Message); err != nil || rep.Reaped != 2 {
		t.Errorf("the report read back: %+v, %v", rep, err)
	}
}

// A Job's run has not started while it has no pod or only Pending ones; the reasons are the
// scheduler's and the kubelet's.
func TestNotStartedSaysWhyFromTheJobsPods(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "probe-a"}}
	r := &podRuns{pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	if why := r.NotStarted(RunOf(job)); !strings.HasPrefix(why, "no pod was created") {
		t.Errorf("no pod: %q", why)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "depwatch", Name: "probe-a-x", Labels: map[string]string{batchv1.JobNameLabel: "probe-a"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/1 nodes are available"}}}}
	_ = r.pods.Add(pod)
	if why := r.NotStarted(RunOf(job)); why != "pod probe-a-x Pending (Unschedulable: 0/1 nodes are available)" {
		t.Errorf("pending: %q", why)
	}
	pod = pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	_ = r.pods.Update(pod)
	if why := r.NotStarted(RunOf(job)); why != "" {
		t.Errorf("running: %q", why)
	}
}

// The run view tells a run's changes once each: Added when it shows, Stopped when it stops
// being active (finished or gone), Failed when its Failed condition appears; a resync, which
// changes nothing, tells nothing again. Active lists the active runs under the index's keys.
func TestTheRunViewTellsEachRunsEndOnce(t *testing.T) {
	client := fake.NewClientset()
	var mu sync.Mutex
	var got []string
	note := func(what string) func(Run) {
		return func(r Run) { mu.Lock(); got = append(got, what+" "+r.Name); mu.Unlock() }
	}
	v, err := InCluster(client).RunView("depwatch", KindWeeder, func(r Run) []string { return r.Facts.Covers() },
		RunHandlers{Added: note("added"), Stopped: note("stopped"), Failed: note("failed")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go v.RunWithContext(ctx)
	cache.WaitForCacheSync(ctx.Done(), v.HasSynced)
	jobsAPI := client.BatchV1().Jobs("depwatch")
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "depwatch", Name: "weeder-a", UID: "u", Labels: map[string]string{LabelKind: string(KindWeeder)}, Annotations: map[string]string{AnnotationTarget: "ns/a"}}}
	if _, err := jobsAPI.Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait := func(want string) {
		t.Helper()
		for i := 0; i < 200; i++ {
			mu.Lock()
			s := strings.Join(got, ", ")
			mu.Unlock()
			if s == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("told %q, want %q", strings.Join(got, ", "), want)
	}
	wait("added weeder-a")
	if a := v.Active("ns/a"); len(a) != 1 || a[0].Name != "weeder-a" || a[0].UID != "u" || v.Count() != 1 || !v.Has("depwatch", "weeder-a") {
		t.Fatalf("active %+v, count %d", a, v.Count())
	}
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}
	if _, err := jobsAPI.UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("added weeder-a, stopped weeder-a, failed weeder-a")
	job.Labels["touched"] = "yes" // a later change of the finished run
	if _, err := jobsAPI.Update(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := jobsAPI.Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	wait("added weeder-a, stopped weeder-a, failed weeder-a")
	if len(v.Active("ns/a")) != 0 || v.Count() != 0 {
		t.Fatal("a finished run is still active")
	}
}

// What a view tells of the runs its executor observes: each change once, in order; a run
// found ended already (a restart) is only added, and a run of the same name started since
// ends the old one.
func TestTheRunViewTellsWhatChangedOnce(t *testing.T) {
	active := Run{Namespace: "depwatch", Name: "weeder-a", UID: "1", Facts: Facts{Target: "ns/a"}}
	failed := active
	failed.Done, failed.Failed = true, true
	again := active
	again.UID = "2"
	for _, tc := range []struct {
		name    string
		observe []Run
		want    string
		active  int
	}{
		{"a run that starts, then fails", []Run{active, failed}, "added 1, stopped 1, failed 1", 0},
		{"a run found failed at a restart", []Run{failed, failed}, "added 1", 0},
		{"a run of the same name started since", []Run{active, again}, "added 1, stopped 1, added 2", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			note := func(what string) func(Run) {
				return func(r Run) { got = append(got, what+" "+string(r.UID)) }
			}
			v := NewRunView(nil, nil, func(r Run) []string { return []string{r.Facts.Target} },
				RunHandlers{Added: note("added"), Stopped: note("stopped"), Failed: note("failed")})
			for _, r := range tc.observe {
				v.Observe(r)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { v.RunWithContext(ctx); close(done) }()
			queued := func() int { v.mu.Lock(); defer v.mu.Unlock(); return len(v.queue) }
			for i := 0; i < 200 && queued() > 0; i++ { // the view's goroutine tells them
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			<-done
			if s := strings.Join(got, ", "); s != tc.want {
				t.Errorf("told %q, want %q", s, tc.want)
			}
			if n := len(v.Active("ns/a")); n != tc.active {
				t.Errorf("%d active, want %d", n, tc.active)
			}
		})
	}
}

// The Job executor's views of two kinds in one namespace share one watch of the Jobs and one
// of their pods (a shared informer factory), and each shows only the runs of its kind.
func TestTheJobExecutorsViewsShareOneWatchPerResource(t *testing.T) {
	client := fake.NewClientset()
	exec := InCluster(client)
	byTarget := func(r Run) []string { return []string{r.Facts.Target} }
	weeders, err := exec.RunView("depwatch", KindWeeder, byTarget, RunHandlers{})
	if err != nil {
		t.Fatal(err)
	}
	probes, err := exec.RunView("depwatch", KindProbe, byTarget, RunHandlers{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, v := range []*RunView{weeders, probes} {
		wg.Go(func() { v.RunWithContext(ctx) })
	}
	if !cache.WaitForCacheSync(ctx.Done(), weeders.HasSynced, probes.HasSynced) {
		t.Fatal("not synced")
	}
	for _, kind := range []Kind{KindWeeder, KindProbe} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "depwatch", Name: string(kind) + "-a",
			Labels: map[string]string{LabelKind: string(kind)}, Annotations: map[string]string{AnnotationTarget: "ns/a"}}}
		if _, err := client.BatchV1().Jobs("depwatch").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 200 && (len(weeders.Active("ns/a")) == 0 || len(probes.Active("ns/a")) == 0); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if w, p := weeders.Active("ns/a"), probes.Active("ns/a"); len(w) != 1 || w[0].Name != "weeder-a" || len(p) != 1 || p[0].Name != "probe-a" {
		t.Errorf("weeder view %+v, probe view %+v: want each its own kind's run", w, p)
	}
	watches := map[string]int{}
	for _, a := range client.Actions() {
		if a.GetVerb() == "watch" {
			watches[a.GetResource().Resource]++
		}
	}
	if watches["jobs"] != 1 || watches["pods"] != 1 {
		t.Errorf("watches %v: want one of the Jobs and one of the pods for both views", watches)
	}
}
