package weeder

import (
	"context"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/jobs"
)

// queueOnly delivers an event as the informer would, without reconciling: the key waits in
// the queue, as it does behind a backlog.
func (h *harness) queueOnly(s *discoveryv1.EndpointSlice, deleted bool) {
	h.t.Helper()
	idx := h.c.src.GetIndexer()
	var err error
	if deleted {
		err = idx.Delete(s)
	} else {
		err = idx.Update(s)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	h.c.onEndpoints(s, deleted)
}

// TestEdgesAreActedOnHoweverLateTheQueueReachesThem drives the real handler and queue: the
// edges happen while the service's key waits, and the one reconcile that follows does what
// can still help.
func TestEdgesAreActedOnHoweverLateTheQueueReachesThem(t *testing.T) {
	apiserver := map[string]string{"app": "kubernetes", "role": "apiserver"}
	const svc = "etcd-main-client"
	cases := []struct {
		name string
		// known: the service was seen (Ready) and reconciled before the backlog.
		known bool
		// crashing: a dependent is crash-looping when the queue reaches the key.
		crashing bool
		events   []*discoveryv1.EndpointSlice
		// wantTrigger of the one weeder Job ("" for none); wantArmed its kind.
		wantTrigger string
		wantArmed   bool
		overtaken   map[string]float64
	}{
		{name: "down and back while queued: a weeder reaps on the return", known: true,
			events: []*discoveryv1.EndpointSlice{down("n", svc), up("n", svc)}, wantTrigger: jobs.TriggerReady,
			overtaken: map[string]float64{"outage": 1}},
		{name: "down, back and down again while queued: armed for the current outage", known: true,
			events: []*discoveryv1.EndpointSlice{down("n", svc), up("n", svc), down("n", svc)}, wantTrigger: jobs.TriggerOutage, wantArmed: true,
			overtaken: map[string]float64{"outage": 1, "ready": 1}},
		{name: "down while queued: armed", known: true,
			events: []*discoveryv1.EndpointSlice{down("n", svc)}, wantTrigger: jobs.TriggerOutage, wantArmed: true},
		{name: "first seen down, then back while queued: a weeder reaps on the return",
			events: []*discoveryv1.EndpointSlice{down("n", svc), up("n", svc)}, wantTrigger: jobs.TriggerReady},
		{name: "first seen Ready after an outage it never saw, a dependent crash-looping: catch-up", crashing: true,
			events: []*discoveryv1.EndpointSlice{up("n", svc)}, wantTrigger: jobs.TriggerCatchUp},
		{name: "first seen Ready, no dependent crash-looping: nothing",
			events: []*discoveryv1.EndpointSlice{up("n", svc)}},
		{name: "first seen down: nothing (an outage under way is armed only when seen beginning)",
			events: []*discoveryv1.EndpointSlice{down("n", svc)}},
		{name: "up, down, up again, all Ready → Ready to the reconcile: still a weeder for the return", known: true,
			events: []*discoveryv1.EndpointSlice{up("n", svc), down("n", svc), up("n", svc)}, wantTrigger: jobs.TriggerReady,
			overtaken: map[string]float64{"outage": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testConfig)
			if tc.known {
				h.set(up("n", svc))
			}
			if tc.crashing {
				if _, err := h.client.CoreV1().Pods("n").Create(context.Background(), crashPod("n", "kube-apiserver-0", apiserver, false), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range tc.events {
				h.now = h.now.Add(5 * time.Second)
				h.queueOnly(s, false)
			}
			if n := h.c.queue.Len(); n > 1 {
				t.Fatalf("queue holds %d items for one service", n)
			}
			h.now = h.now.Add(time.Minute) // the backlog
			h.drain()
			js := h.weederJobs()
			if tc.wantTrigger == "" {
				if len(js) != 0 {
					t.Fatalf("jobs = %v, want none", names(js))
				}
				return
			}
			if len(js) != 1 {
				t.Fatalf("jobs = %v, want one", names(js))
			}
			if got := js[0].Annotations[jobs.AnnotationTrigger]; got != tc.wantTrigger || jobs.Armed(&js[0]) != tc.wantArmed {
				t.Errorf("trigger %q armed %v, want %q armed %v", got, jobs.Armed(&js[0]), tc.wantTrigger, tc.wantArmed)
			}
			for edge, want := range tc.overtaken {
				if got := value(h.c.metrics.EdgesOvertaken.WithLabelValues(edge)); got != want {
					t.Errorf("overtaken %s edges = %v, want %v", edge, got, want)
				}
			}
			// The latency counts from the last edge, through the backlog.
			if got := sampleCount(h.c.metrics.EdgeToAction.WithLabelValues(tc.wantTrigger)); got != 1 {
				t.Errorf("edge-to-action samples for %s = %d, want 1", tc.wantTrigger, got)
			}
		})
	}
}

// TestEdgesSeenInTimeLaunchNoDuplicates: when the queue keeps up, each edge is acted on
// once, and the return keeps the Job its outage armed.
func TestEdgesSeenInTimeLaunchNoDuplicates(t *testing.T) {
	h := newHarness(t, testConfig)
	const svc = "kube-apiserver"
	h.set(up("n", svc))
	for i := 0; i < 3; i++ {
		h.now = h.now.Add(10 * time.Second)
		h.set(down("n", svc))
		h.now = h.now.Add(10 * time.Second)
		h.set(up("n", svc))
	}
	if js := h.weederJobs(); len(js) != 1 || !jobs.Armed(&js[0]) {
		t.Fatalf("jobs = %v, want one armed Job", names(js))
	}
	for _, edge := range []string{"outage", "ready", "gone"} {
		if got := value(h.c.metrics.EdgesOvertaken.WithLabelValues(edge)); got != 0 {
			t.Errorf("overtaken %s edges = %v, want 0", edge, got)
		}
	}
}

// TestServicesGoneWithoutAWeederCostNoAPICall: a namespace deleted with its services is one
// gone edge per service; with no weeder active, none of them reads or writes the API, so a
// mass deletion cannot queue a real outage behind it.
func TestServicesGoneWithoutAWeederCostNoAPICall(t *testing.T) {
	h := newHarness(t, testConfig)
	for _, ns := range []string{"a", "b", "c"} {
		h.set(up(ns, "etcd-main-client"))
		h.set(up(ns, "kube-apiserver"))
	}
	h.set(down("c", "etcd-main-client")) // c: an armed weeder, stopped when c goes
	if js := h.weederJobs(); len(js) != 1 {
		t.Fatalf("jobs = %v, want c's armed one", names(js))
	}
	ctx := context.Background()
	n, _ := h.client.CoreV1().Namespaces().Get(ctx, "c", metav1.GetOptions{})
	n.DeletionTimestamp = &metav1.Time{Time: h.now}
	if _, err := h.client.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.client.ClearActions()
	for _, ns := range []string{"a", "b"} {
		h.queueOnly(up(ns, "etcd-main-client"), true)
		h.queueOnly(up(ns, "kube-apiserver"), true)
	}
	h.drain()
	if acts := h.client.Actions(); len(acts) != 0 {
		var calls []string
		for _, a := range acts {
			calls = append(calls, a.GetVerb()+" "+a.GetResource().Resource)
		}
		t.Errorf("4 services gone without a weeder made API calls: %s", strings.Join(calls, ", "))
	}
	h.remove(down("c", "etcd-main-client"))
	if js := h.weederJobs(); len(js) != 0 {
		t.Errorf("jobs = %v: the armed weeder of the deleted namespace should be stopped", names(js))
	}
	h.c.mu.Lock()
	left := len(h.c.services)
	h.c.mu.Unlock()
	if left != 1 { // c/kube-apiserver is still there
		t.Errorf("%d services remembered, want 1: gone services are forgotten", left)
	}
}
