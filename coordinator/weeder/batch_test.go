package weeder

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/depwatch/depwatch/jobs"
)

func TestPlanLaunch(t *testing.T) {
	b := Batching{After: 3, Window: 10 * time.Second, Size: 100, Linger: time.Second, MaxJobs: 10}
	cases := []struct {
		name string
		b    Batching
		in   LaunchInput
		want LaunchMode
	}{
		{"a lone launch gets its own Job", b, LaunchInput{}, LaunchOwnJob},
		{"launches still rare: own Job", b, LaunchInput{RecentOwn: 2, Active: 5}, LaunchOwnJob},
		{"too many launches within the window: batch", b, LaunchInput{RecentOwn: 3}, LaunchInBatch},
		{"a batch is forming: join it, however few launches", b, LaunchInput{Waiting: 1}, LaunchInBatch},
		{"at the cap: wait in a batch", b, LaunchInput{Active: 10}, LaunchInBatch},
		{"no cap", Batching{After: 3, MaxJobs: 0}, LaunchInput{Active: 1000}, LaunchOwnJob},
		{"after 0: always batch", Batching{After: 0}, LaunchInput{}, LaunchInBatch},
	}
	for _, tc := range cases {
		if got := PlanLaunch(tc.b, tc.in); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// flushBatches launches every due batch, as runBatches would, until none is due or the cap
// holds the rest back; it returns how many batch Jobs it launched.
func (h *harness) flushBatches() int {
	h.t.Helper()
	n := 0
	for {
		items, _ := h.c.batch.due(h.now, h.c.opts.Batching.Size, 0)
		if len(items) == 0 {
			return n
		}
		launched, err := h.c.launchBatch(context.Background(), items)
		if err != nil {
			h.t.Fatal(err)
		}
		h.syncCaches()
		if !launched {
			return n
		}
		n++
	}
}

func batchJobs(js []batchv1.Job) (own, batch []batchv1.Job) {
	for _, j := range js {
		if j.Labels[jobs.LabelBatch] == "true" {
			batch = append(batch, j)
		} else {
			own = append(own, j)
		}
	}
	return own, batch
}

// TestAStormIsCoveredByFewJobsAndEveryServiceIsArmed: beyond --weeder-batch-after, services
// that go down share batch Jobs of at most --weeder-batch-size; each still gets its own
// WeederArmed Event, and its return is handled by the batch Job (no new Job).
func TestAStormIsCoveredByFewJobsAndEveryServiceIsArmed(t *testing.T) {
	h := newHarness(t, testConfig)
	h.c.opts.Batching = Batching{After: 2, Window: time.Minute, Size: 3, Linger: time.Second}
	nss := []string{"s1", "s2", "s3", "s4", "s5", "s6", "s7"}
	for _, ns := range nss {
		h.set(up(ns, "etcd-main-client"))
	}
	h.events()
	for _, ns := range nss {
		h.set(down(ns, "etcd-main-client"))
	}
	own, batch := batchJobs(h.weederJobs())
	if len(own) != 2 || len(batch) != 0 || h.c.batch.count() != 5 {
		t.Fatalf("before the batch is due: own %v, batch %v, waiting %d; want 2 own Jobs and 5 waiting", names(own), names(batch), h.c.batch.count())
	}
	if n := h.flushBatches(); n != 2 {
		t.Fatalf("launched %d batch Jobs, want 2 (5 services, 3 a Job)", n)
	}
	own, batch = batchJobs(h.weederJobs())
	covered := map[string]bool{}
	for _, j := range append(own, batch...) {
		if !jobs.Armed(&j) {
			t.Errorf("Job %s is not armed", j.Name)
		}
		for _, k := range jobs.ReadFacts(&j).Covers() {
			if covered[k] {
				t.Errorf("%s covered twice", k)
			}
			covered[k] = true
		}
	}
	for _, ns := range nss {
		if !covered[ns+"/etcd-main-client"] {
			t.Errorf("%s/etcd-main-client is not covered by any Job", ns)
		}
	}
	armed := 0
	for _, e := range h.events() {
		if strings.Contains(e, EventWeederArmed) {
			armed++
		}
	}
	if armed != len(nss) {
		t.Errorf("%d WeederArmed Events, want one per service (%d)", armed, len(nss))
	}
	before := len(h.weederJobs())
	for _, ns := range nss {
		h.set(up(ns, "etcd-main-client"))
	}
	h.flushBatches()
	if after := len(h.weederJobs()); after != before {
		t.Errorf("the returns launched %d more Jobs; the armed Jobs cover them", after-before)
	}
}

// TestServicesPastTheCapWaitUntilAWeederFinishes: with --max-weeder-jobs reached, services
// wait (counted in the waiting gauge) and are covered once a Job finishes; none is dropped.
func TestServicesPastTheCapWaitUntilAWeederFinishes(t *testing.T) {
	h := newHarness(t, testConfig)
	h.c.opts.Batching = Batching{After: 1, Window: time.Minute, Size: 10, Linger: time.Second, MaxJobs: 1}
	for _, ns := range []string{"a", "b", "c"} {
		h.set(up(ns, "etcd-main-client"))
	}
	for _, ns := range []string{"a", "b", "c"} {
		h.set(down(ns, "etcd-main-client"))
	}
	if n := h.flushBatches(); n != 0 {
		t.Fatalf("launched %d batch Jobs past the cap", n)
	}
	if js := h.weederJobs(); len(js) != 1 || h.c.batch.count() != 2 {
		t.Fatalf("jobs %v, waiting %d: want a's own Job and b, c waiting", names(js), h.c.batch.count())
	}
	// b comes back while it waits: it keeps its place (the armed Job it gets opens at once,
	// since b is Ready) and no Job of its own is launched past the cap.
	h.set(up("b", "etcd-main-client"))
	if _, ok := h.c.batch.waitingFor("b/etcd-main-client"); !ok || len(h.weederJobs()) != 1 {
		t.Fatalf("b waiting %v, jobs %v", ok, names(h.weederJobs()))
	}
	js := h.weederJobs()
	js[0].Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if _, err := h.client.BatchV1().Jobs("depwatch").UpdateStatus(context.Background(), &js[0], metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.syncCaches()
	if n := h.flushBatches(); n != 1 {
		t.Fatalf("launched %d batch Jobs after a place freed, want 1 (the cap is 1)", n)
	}
	_, batch := batchJobs(h.weederJobs())
	if len(batch) != 1 || h.c.batch.count() != 0 || strings.Join(jobs.ReadFacts(&batch[0]).Covers(), " ") != "b/etcd-main-client c/etcd-main-client" {
		t.Fatalf("batch Jobs %v, waiting %d: want one covering b and c", names(batch), h.c.batch.count())
	}
}

// TestAServiceGoingAwayLeavesTheBatch: a service waiting for a batch whose namespace is then
// deleted is not launched for.
func TestAServiceGoingAwayLeavesTheBatch(t *testing.T) {
	h := newHarness(t, testConfig)
	h.c.opts.Batching = Batching{After: 0, Window: time.Minute, Size: 10, Linger: time.Second}
	h.set(up("a", "etcd-main-client"))
	h.set(down("a", "etcd-main-client"))
	if h.c.batch.count() != 1 {
		t.Fatalf("waiting %d", h.c.batch.count())
	}
	n, _ := h.client.CoreV1().Namespaces().Get(context.Background(), "a", metav1.GetOptions{})
	n.Status.Phase = corev1.NamespaceTerminating
	if _, err := h.client.CoreV1().Namespaces().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.syncCaches()
	h.remove(down("a", "etcd-main-client"))
	if h.c.batch.count() != 0 || h.flushBatches() != 0 || len(h.weederJobs()) != 0 {
		t.Errorf("waiting %d, jobs %v: a service going away must leave the batch", h.c.batch.count(), names(h.weederJobs()))
	}
}

// TestBatchLaunchesAreRetriedUntilTheyWork: runBatches keeps a batch whose Job cannot be
// created, retries it with back-off, and stops when its context ends.
func TestBatchLaunchesAreRetriedUntilTheyWork(t *testing.T) {
	h := newHarness(t, testConfig)
	h.c.now = time.Now
	h.c.opts.Batching = Batching{After: 0, Window: time.Minute, Size: 10, Linger: 0}
	h.set(up("a", "etcd-main-client"))
	h.set(down("a", "etcd-main-client"))
	var fails atomic.Int32
	h.client.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails.Add(1) <= 2 {
			return true, nil, errors.New("the API server is overloaded")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.c.runBatches(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.weederJobs()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("runBatches did not return when its context ended")
	}
	if js := h.weederJobs(); len(js) != 1 || fails.Load() < 3 || h.c.batch.count() != 0 {
		t.Fatalf("jobs %v after %d create attempts, waiting %d: want the batch created on the third", names(js), fails.Load(), h.c.batch.count())
	}
}

// TestAJobNotYetInTheCacheIsStoppedLikeOneThatIs: the service goes down again before the
// Job cache shows the unarmed weeder just launched for its return; with arming off, that
// weeder is stopped all the same (by name and UID), not left reaping during the outage.
func TestAJobNotYetInTheCacheIsStoppedLikeOneThatIs(t *testing.T) {
	h := newHarness(t, testConfig+"armWeeder: false\n")
	h.set(up("a", "etcd-main-client"))
	reconcileNoSync := func() {
		key, _ := h.c.queue.Get()
		if err := h.c.Reconcile(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		h.c.queue.Done(key)
	}
	h.queueOnly(down("a", "etcd-main-client"), false)
	h.queueOnly(up("a", "etcd-main-client"), false)
	reconcileNoSync() // the return: an unarmed weeder, not in the cache yet
	if js := h.weederJobs(); len(js) != 1 || jobs.Armed(&js[0]) {
		t.Fatalf("jobs %v, want the return's unarmed weeder", names(js))
	}
	h.queueOnly(down("a", "etcd-main-client"), false)
	reconcileNoSync()
	if js := h.weederJobs(); len(js) != 0 {
		t.Errorf("jobs %v: the weeder launched a moment ago must be stopped when the service goes down again", names(js))
	}
}

// A forming batch waits while services keep joining (a storm is seen over seconds), until
// none joined for the linger, and never longer than maxLingerFactor lingers after its first.
func TestABatchLaunchesOnceServicesStopJoining(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBatcher()
	defer b.queue.ShutDown()
	add := func(key string, at time.Time) { b.waiting[key] = &batchItem{key: key, since: at} }
	add("a", t0)
	if items, wait := b.due(t0.Add(500*time.Millisecond), 500, time.Second); items != nil || wait != 500*time.Millisecond {
		t.Fatalf("half a linger after the first: %d items, wait %s; want none, 500ms", len(items), wait)
	}
	add("b", t0.Add(900*time.Millisecond))
	if items, wait := b.due(t0.Add(1100*time.Millisecond), 500, time.Second); items != nil || wait != 800*time.Millisecond {
		t.Fatalf("a service joined 200ms ago: %d items, wait %s; want none, 800ms", len(items), wait)
	}
	for i := range 40 { // one every 100ms: the batch never goes quiet
		add(fmt.Sprintf("s%02d", i), t0.Add(time.Second+time.Duration(i)*100*time.Millisecond))
	}
	if items, _ := b.due(t0.Add(4900*time.Millisecond), 500, time.Second); items != nil {
		t.Fatalf("launched %d before 5 lingers", len(items))
	}
	if items, wait := b.due(t0.Add(5*time.Second), 500, time.Second); len(items) != 42 || wait != 0 {
		t.Fatalf("at 5 lingers: %d items, wait %s; want all 42 now", len(items), wait)
	}
	if items, _ := b.due(t0.Add(time.Second), 2, time.Second); len(items) != 2 {
		t.Fatalf("a full batch: %d items, want 2 at once", len(items))
	}
}
