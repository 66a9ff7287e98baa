package reaper

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// waitFor polls cond until it holds or the test times out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWatchReapsPodTheMomentItEntersCrashLoopBackOff: between scheduled cycles, a pod that
// turns CrashLoopBackOff is deleted; its replacement (new UID) is deleted again when it crash-
// loops too; a terminating pod and a pod outside the selector are left alone; ctx cancel ends
// the run with informers stopped.
func TestWatchReapsPodTheMomentItEntersCrashLoopBackOff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(
		newPod("shoot", "kcm", withLabel("app", "kcm")),
		newPod("shoot", "other", withLabel("app", "other")),
	)
	o := mustOptions(t, map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff", "WATCH": "true", "NAMESPACE": "shoot",
		"LABEL_SELECTORS": `["app=kcm","app=mcm"]`, "SCHEDULE": "@every 1h",
	})
	synced := make(chan struct{})
	o.onSynced = func() { close(synced) }
	log, hook := quietLogger()
	before := runtime.NumGoroutine()
	done := make(chan struct{})
	var s Summary
	var err error
	go func() { s, err = Run(ctx, client, o, log); close(done) }()
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("informers never synced")
	}

	pods := client.CoreV1().Pods("shoot")
	update := func(p *corev1.Pod) {
		t.Helper()
		if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update %s: %v", p.Name, err)
		}
	}
	gone := func(name string) func() bool {
		return func() bool {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			return err != nil
		}
	}

	// The pod enters CrashLoopBackOff: reaped without waiting for the hourly cycle.
	update(newPod("shoot", "kcm", withLabel("app", "kcm"), crashLooping))
	waitFor(t, "kcm to be reaped", gone("kcm"))

	// Its replacement (same name, new UID) crash-loops too: reaped again.
	if _, err := pods.Create(ctx, newPod("shoot", "kcm", withLabel("app", "kcm"), withUID("kcm-2")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	update(newPod("shoot", "kcm", withLabel("app", "kcm"), withUID("kcm-2"), crashLooping))
	waitFor(t, "the replacement to be reaped", gone("kcm"))

	// A terminating pod and a pod outside the selectors are left alone.
	if _, err := pods.Create(ctx, newPod("shoot", "mcm", withLabel("app", "mcm")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	update(newPod("shoot", "mcm", withLabel("app", "mcm"), crashLooping, terminating, func(p *corev1.Pod) { p.Finalizers = []string{"x"} }))
	update(newPod("shoot", "other", withLabel("app", "other"), crashLooping))
	// Give the worker time to (wrongly) act, then check it did not.
	time.Sleep(100 * time.Millisecond)

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if err != nil {
		t.Fatal(err)
	}
	// No goroutine (informer, reflector, sync waiter) outlives Run.
	waitFor(t, "informer goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
	if gone("mcm")() || gone("other")() {
		t.Error("a terminating pod or a pod outside the selectors was reaped")
	}
	if s.Reaped != 2 {
		t.Errorf("summary = %+v, want 2 reaped (kcm and its replacement)", s)
	}
	// The informer lists and watches server-side filtered, in NAMESPACE: one watch whose
	// selector every OR-ed selector's pods pass (podSelectors), not one per selector.
	filtered := map[string]bool{}
	for _, a := range client.Actions() {
		if a.GetVerb() == "watch" && a.GetResource().Resource == "pods" {
			filtered[a.GetNamespace()+" "+a.(k8stesting.WatchActionImpl).GetWatchRestrictions().Labels.String()] = true
		}
	}
	if len(filtered) != 1 || !filtered["shoot app in (kcm,mcm)"] {
		t.Errorf("informer watches = %v, want one for both selectors in namespace shoot", filtered)
	}
	uids := map[types.UID]bool{}
	for _, ev := range eventsFor(t, client, "shoot") {
		uids[ev.InvolvedObject.UID] = true
	}
	if !uids["shoot/kcm"] || !uids["kcm-2"] {
		t.Errorf("events recorded for %v, want both kcm UIDs", uids)
	}
	if hook.LastEntry().Data["stop_reason"] == nil {
		t.Error("no summary line at the end")
	}
}

// TestWatchedPodsAreCoalescedByPod: the latest version wins, order is kept, removed pods are
// skipped, and a pod that is terminating is never judged.
func TestWatchedPodsAreCoalescedByPod(t *testing.T) {
	inf := cache.NewSharedIndexInformer(nil, &corev1.Pod{}, 0, cache.Indexers{})
	store := inf.GetStore()
	b := watchedBatch(inf)
	defer b.queue.ShutDown()
	report := func(p *corev1.Pod) { // as an informer does: its cache first, then the handler
		t.Helper()
		if err := store.Update(p); err != nil {
			t.Fatal(err)
		}
		b.podChanged(p)
	}
	report(newPod("a", "p1"))
	report(newPod("a", "p2"))
	report(newPod("a", "p1", crashLooping))
	report(newPod("a", "p3"))
	report(newPod("a", "p4"))
	report(newPod("a", "p5", terminating))
	if err := store.Delete(newPod("a", "p2")); err != nil {
		t.Fatal(err)
	}
	report(newPod("a", "p4", terminating)) // changed before, terminating now
	var judged []string
	for _, key := range b.targets[0].changed.take() {
		if p, ok := b.pods.get(key); ok {
			judged = append(judged, p.Name)
			if p.Name == "p1" && len(p.Status.ContainerStatuses) != 1 {
				t.Errorf("p1 = %v, want its latest version", p)
			}
		}
	}
	if want := []string{"p1", "p3"}; !slices.Equal(judged, want) {
		t.Errorf("judged %v, want %v (p2 removed, p4 terminating, p5 terminating when reported)", judged, want)
	}
	if left := b.targets[0].changed.take(); len(left) != 0 {
		t.Errorf("%d keys left after a take, want none", len(left))
	}
}

// watchedBatch is a plain run's batch over inf's pods, one target for namespace "a".
func watchedBatch(inf cache.SharedIndexInformer) *batch {
	return &batch{
		plain: true, single: true,
		targets: []*batchTarget{{pods: "a"}},
		byNS:    map[string][]int{"a": {0}},
		queue:   workqueue.NewTypedDelayingQueue[int](),
		pods:    &podCache{informers: []cache.SharedIndexInformer{inf}},
	}
}
