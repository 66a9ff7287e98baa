package reaper

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// TestBatchRunIsOneRunOverAllItsTargets: twenty services in one batch run cost one list of
// EndpointSlices and one of pods (plus the start's one-item check), not one per target; each
// target's dependent is restarted after its own service's return and not before; a service
// that never returns holds back no other; every Event is written by the time the run ends.
func TestBatchRunIsOneRunOverAllItsTargets(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 20
	var objs []runtime.Object
	var targets []Target
	for i := range n {
		ns := fmt.Sprintf("shoot-%02d", i)
		objs = append(objs, endpointSlice(ns, "etcd", ptr.To(false)),
			newPod(ns, "kcm", withLabel("app", "kcm"), crashLooping),
			newPod(ns, "bystander", withLabel("app", "other"), crashLooping))
		targets = append(targets, Target{Namespace: ns, Service: "etcd", Selectors: []string{"app=kcm"}})
	}
	client := fake.NewClientset(objs...)
	o := mustOptions(t, map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff", "WATCH": "true", "SCHEDULE": "@every 1h", "RUN_DURATION": "1h",
		"TARGETS": TargetsValue(targets),
	})
	o.now = nil // the gates' windows run on the real clock
	synced := make(chan struct{})
	o.onSynced = func() { close(synced) }
	log, _ := quietLogger()
	done := make(chan struct{})
	var sum Summary
	var runErr error
	go func() { sum, runErr = Run(ctx, client, o, log); close(done) }()
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("the batch's caches never synced")
	}
	deletedIn := func(ns string) int {
		c := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" && a.GetNamespace() == ns {
				c++
			}
		}
		return c
	}
	// Every service but the last returns, one after the other.
	for i := range n - 1 {
		ns := fmt.Sprintf("shoot-%02d", i)
		if deletedIn(ns) != 0 {
			t.Fatalf("%s's dependent was restarted before its service returned", ns)
		}
		if _, err := client.DiscoveryV1().EndpointSlices(ns).Update(ctx, endpointSlice(ns, "etcd", ptr.To(true)), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ns+"'s dependent to be restarted", func() bool { return deletedIn(ns) == 1 })
	}
	time.Sleep(100 * time.Millisecond) // room to (wrongly) reap where the service is still down
	if c := deletedIn(fmt.Sprintf("shoot-%02d", n-1)); c != 0 {
		t.Errorf("the target whose service never returned had %d pods restarted", c)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
	}
	if runErr != nil || sum.Reaped != n-1 {
		t.Fatalf("Run = %+v, %v; want %d reaped", sum, runErr, n-1)
	}
	// Each restart is counted for its own service (the report's per-service part).
	for i := range n {
		ref := ServiceRef{Namespace: fmt.Sprintf("shoot-%02d", i), Name: "etcd"}
		if got, want := sum.ByService[ref].Restarts, min(1, n-1-i); got != want {
			t.Errorf("%s: %d restarts counted for it, want %d", ref, got, want)
		}
	}
	lists := map[string]int{}
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" {
			lists[a.GetResource().Resource]++
		}
	}
	if lists["pods"] != 1 || lists["endpointslices"] != 2 {
		t.Errorf("lists %v for %d targets: want one list of pods and one of EndpointSlices (plus the start's check), shared by all", lists, n)
	}
	if ev := eventsFor(t, client, ""); len(ev) != n-1 {
		t.Errorf("%d Events written, want one per restarted pod (%d)", len(ev), n-1)
	} else if ev[0].Reason != ReasonReaped || ev[0].Source.Component != eventComponent || ev[0].InvolvedObject.Kind != "Pod" {
		t.Errorf("event %+v", ev[0])
	}
}

// TestEventsThatCannotBeWrittenAreCountedAndLoggedOnce: a run whose Events are refused reaps
// every pod all the same and says so once, not once per pod.
func TestEventsThatCannotBeWrittenAreCountedAndLoggedOnce(t *testing.T) {
	var pods []runtime.Object
	for i := range 5 {
		pods = append(pods, newPod("a", fmt.Sprintf("p%d", i), crashLooping))
	}
	client := fake.NewClientset(pods...)
	events := fake.NewClientset()
	events.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("client rate limiter Wait returned an error: context deadline exceeded")
	})
	o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "REAP_AT_START": "true", "RUN_DURATION": "1ms"})
	log, hook := quietLogger()
	s, err := RunWith(context.Background(), Clients{API: client, Events: events}, o, log)
	if err != nil || s.Reaped != 5 {
		t.Fatalf("RunWith = %+v, %v", s, err)
	}
	warned, counted := 0, false
	for _, e := range hook.AllEntries() {
		if e.Level.String() == "warning" && e.Data["reason"] == ReasonReaped {
			warned++
		}
		counted = counted || e.Data["events_failed"] == int64(5)
	}
	if warned != 1 || !counted {
		t.Errorf("%d warnings naming an Event (want 1), count of failures logged: %v", warned, counted)
	}
}
