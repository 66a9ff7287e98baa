package weeder

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/jobs"
)

func TestNotReadyToReadyLaunchesOneWeederJob(t *testing.T) {
	h := newHarness(t, testConfig)
	h.set(down("shoot--a", "etcd-main-client"))
	if n := len(h.weederJobs()); n != 0 {
		t.Fatalf("%d Jobs while down", n)
	}
	h.now = h.now.Add(time.Minute)
	h.set(up("shoot--a", "etcd-main-client"))
	js := h.weederJobs()
	if len(js) != 1 {
		t.Fatalf("%d Jobs after the return, want 1", len(js))
	}
	j := js[0]
	if j.Labels[jobs.LabelService] != "etcd-main-client" || j.Labels[jobs.LabelNamespace] != "shoot--a" || j.Annotations[jobs.AnnotationTrigger] != jobs.TriggerReady {
		t.Errorf("job metadata: %v %v", j.Labels, j.Annotations)
	}
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	var sels []string
	_ = json.Unmarshal([]byte(env["LABEL_SELECTORS"]), &sels)
	if env["NAMESPACE"] != "shoot--a" || env["RUN_DURATION"] != "3m0s" || env["WATCH"] != "true" || len(sels) != 1 || sels[0] != "app=kubernetes,role=apiserver" {
		t.Errorf("env = %v", env)
	}
	ev := h.events()
	if len(ev) != 1 || !strings.Contains(ev[0], "Normal WeederStarted Started weeder Job depwatch/"+j.Name) {
		t.Errorf("events = %q", ev)
	}
	m := h.c.metrics
	if got := value(m.Triggers.WithLabelValues("weeder", "ready")); got != 1 {
		t.Errorf("triggers = %v", got)
	}
	if got := value(m.JobsLaunched.WithLabelValues("weeder", "created")); got != 1 {
		t.Errorf("launched = %v", got)
	}
	if got := sampleCount(m.TriggerToJob.WithLabelValues("weeder")); got != 1 {
		t.Errorf("latency samples = %d", got)
	}
	if got := value(m.ServicesReady); got != 1 {
		t.Errorf("services ready = %v", got)
	}
}

func TestNoJobWithoutATransition(t *testing.T) {
	cases := []struct {
		name  string
		steps func(h *harness)
	}{
		{"Ready → Ready", func(h *harness) {
			h.set(down("n", "etcd-main-client"))
			h.set(up("n", "etcd-main-client"))
			before := len(h.weederJobs())
			s := up("n", "etcd-main-client")
			s.Endpoints = append(s.Endpoints, ep(ptr.To(true)))
			h.set(s) // a second ready endpoint: still Ready
			if before != 1 {
				h.t.Fatalf("setup: %d Jobs", before)
			}
		}},
		{"first seen Ready", func(h *harness) { h.set(up("n", "etcd-main-client")) }},
		{"delete", func(h *harness) { h.set(down("n", "etcd-main-client")); h.remove(down("n", "etcd-main-client")) }},
		{"deleted then recreated Ready", func(h *harness) {
			h.set(down("n", "etcd-main-client"))
			h.remove(down("n", "etcd-main-client"))
			h.set(up("n", "etcd-main-client"))
		}},
		{"unconfigured service", func(h *harness) { h.set(down("n", "other")); h.set(up("n", "other")) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testConfig)
			tc.steps(h)
			want := 0
			if tc.name == "Ready → Ready" {
				want = 1
			}
			if n := len(h.weederJobs()); n != want {
				t.Errorf("%d Jobs, want %d", n, want)
			}
		})
	}
}

func TestArmOffOutageStopsTheRunningWeederAndTheNextReturnStartsAFreshOne(t *testing.T) {
	h := newHarness(t, testConfig+"armWeeder: false\n")
	h.set(down("n", "kube-apiserver"))
	h.set(up("n", "kube-apiserver"))
	first := h.weederJobs()
	h.now = h.now.Add(30 * time.Second)
	h.set(down("n", "kube-apiserver"))
	if left := h.weederJobs(); len(left) != 0 {
		t.Fatalf("jobs after the outage began: %v, want the weeder stopped", names(left))
	}
	h.now = h.now.Add(30 * time.Second)
	h.set(up("n", "kube-apiserver"))
	second := h.weederJobs()
	if len(first) != 1 || len(second) != 1 || first[0].Name == second[0].Name {
		t.Fatalf("jobs before %v after %v: want one, then a new one", names(first), names(second))
	}
	if got := value(h.c.metrics.JobsLaunched.WithLabelValues("weeder", "stopped")); got != 1 {
		t.Errorf("stopped = %v, want 1", got)
	}
	ev := h.events()
	if len(ev) != 3 || !strings.Contains(ev[1], "WeederStopped") || !strings.Contains(ev[1], first[0].Name) {
		t.Errorf("events = %q, want started, stopped (naming %s), started", ev, first[0].Name)
	}
}

func TestLaunchReplacesAWeederThatIsStillActive(t *testing.T) {
	h := newHarness(t, testConfig)
	h.set(down("n", "kube-apiserver"))
	h.set(up("n", "kube-apiserver"))
	first := h.weederJobs()
	// A second launch for the same service while the first runs (e.g. catch-up racing a
	// transition) replaces it: never two weeders for one service.
	h.now = h.now.Add(30 * time.Second)
	if err := h.c.launchWeeder(context.Background(), "n/kube-apiserver", &recordedEdge{trigger: "catch-up", at: h.now}, false, []jobs.Run{jobs.RunOf(&first[0])}, h.c.log); err != nil {
		t.Fatal(err)
	}
	second := h.weederJobs()
	if len(first) != 1 || len(second) != 1 || first[0].Name == second[0].Name {
		t.Fatalf("jobs before %v after %v: want one, replaced", names(first), names(second))
	}
	if got := value(h.c.metrics.JobsLaunched.WithLabelValues("weeder", "replaced")); got != 1 {
		t.Errorf("replaced = %v", got)
	}
}

func TestNamespacesOutsideTheSelectionAreIgnored(t *testing.T) {
	h := newHarness(t, testConfig+"namespaces: {names: [watched]}\n")
	for _, ns := range []string{"watched", "other"} {
		h.set(down(ns, "etcd-main-client"))
		h.set(up(ns, "etcd-main-client"))
	}
	js := h.weederJobs()
	if len(js) != 1 || js[0].Labels[jobs.LabelNamespace] != "watched" {
		t.Errorf("jobs = %v", names(js))
	}
}

func TestNamespaceLabelSelector(t *testing.T) {
	h := newHarness(t, testConfig+"namespaces: {selector: {matchLabels: {gardener.cloud/role: shoot}}}\n")
	for _, n := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "shoot--a", Labels: map[string]string{"gardener.cloud/role": "shoot"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "garden"}},
	} {
		if _, err := h.client.CoreV1().Namespaces().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.syncCaches()
	for _, ns := range []string{"shoot--a", "garden", "unknown"} {
		h.set(down(ns, "etcd-main-client"))
		h.set(up(ns, "etcd-main-client"))
	}
	js := h.weederJobs()
	if len(js) != 1 || js[0].Labels[jobs.LabelNamespace] != "shoot--a" {
		t.Errorf("jobs = %v", names(js))
	}
}

func TestFirstSightingOfAReadyServiceWithCrashLoopingDependentsCatchesUp(t *testing.T) {
	apiserver := map[string]string{"app": "kubernetes", "role": "apiserver"}
	mcm := map[string]string{"app": "machine-controller-manager"}
	h := newHarness(t, testConfig,
		crashPod("a", "kube-apiserver-1", apiserver, false),                                                     // a: etcd Ready, apiserver crash-looping → weeder
		crashPod("b", "kube-apiserver-1", apiserver, true),                                                      // b: etcd down → nothing (the transition will do it)
		crashPod("c", "mcm-1", mcm, false),                                                                      // c: kube-apiserver Ready, mcm crash-looping → weeder
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "d", Name: "kube-apiserver-1", Labels: apiserver}}, // d: healthy
	)
	for _, s := range []*discoveryv1.EndpointSlice{up("a", "etcd-main-client"), down("b", "etcd-main-client"), up("c", "kube-apiserver"), up("c", "etcd-main-client"), up("d", "etcd-main-client")} {
		h.set(s) // first sightings, as on start
	}
	got := map[string]bool{}
	for _, j := range h.weederJobs() {
		got[j.Annotations[jobs.AnnotationTarget]] = true
		if j.Annotations[jobs.AnnotationTrigger] != jobs.TriggerCatchUp {
			t.Errorf("%s: trigger %q", j.Name, j.Annotations[jobs.AnnotationTrigger])
		}
	}
	if len(got) != 2 || !got["a/etcd-main-client"] || !got["c/kube-apiserver"] {
		t.Errorf("catch-up Jobs for %v", got)
	}
	if v := value(h.c.metrics.Triggers.WithLabelValues("weeder", "catch-up")); v != 2 {
		t.Errorf("catch-up triggers = %v", v)
	}
	// Later Ready → Ready events launch nothing more, and taking the lead again keeps the
	// weeders that are already active instead of replacing them.
	h.set(up("a", "etcd-main-client"))
	if n := h.c.CatchUp(); n != 4 {
		t.Errorf("CatchUp queued %d services, want the 4 Ready ones", n)
	}
	h.drain()
	if js := h.weederJobs(); len(js) != 2 {
		t.Errorf("%d Jobs after a Ready → Ready update and a catch-up, want the 2 first", len(js))
	}
	if got := value(h.c.metrics.JobsLaunched.WithLabelValues("weeder", "replaced")); got != 0 {
		t.Errorf("replaced = %v, want 0", got)
	}
}

func TestFailedLaunchIsRetriedWhileStillReady(t *testing.T) {
	h := newHarness(t, testConfig)
	h.set(down("n", "etcd-main-client"))
	h.c.launcher.Template.Image = "" // Build fails
	if err := h.c.src.GetIndexer().Update(up("n", "etcd-main-client")); err != nil {
		t.Fatal(err)
	}
	h.c.onEndpoints(up("n", "etcd-main-client"), false)
	if err := h.c.Reconcile(context.Background(), "n/etcd-main-client"); err == nil {
		t.Fatal("launch without an image succeeded")
	}
	if got := value(h.c.metrics.JobsLaunched.WithLabelValues("weeder", "error")); got != 1 {
		t.Errorf("error launches = %v", got)
	}
	h.c.launcher.Template.Image = "img"
	if err := h.c.Reconcile(context.Background(), "n/etcd-main-client"); err != nil {
		t.Fatal(err)
	}
	if n := len(h.weederJobs()); n != 1 {
		t.Errorf("retry launched %d Jobs", n)
	}
}

// TestWithoutNamespaceAndServiceRightsNothingIsAskedOfThem: under gardenlet's weeder RBAC
// (no namespaces, no Services) the weeder runs no namespace informer and asks nothing about
// a namespace or Service going away; a config that chooses namespaces by label is refused.
func TestWithoutNamespaceAndServiceRightsNothingIsAskedOfThem(t *testing.T) {
	client := fake.NewClientset()
	log := logrus.New()
	log.SetOutput(io.Discard)
	d := Deps{
		Shared:  ctrl.Shared{Client: client, Log: log, Template: jobs.Template{Namespace: "garden", Image: "in-process"}},
		Config:  parseConfig(t, testConfig),
		Metrics: newTestMetrics(),
		Options: Options{NoNamespaceReads: true, NoServiceReads: true, NoWorkloadReads: true},
	}
	c, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	t.Cleanup(c.batch.queue.ShutDown)
	// The endpoints, and the executor's weeder runs (their Jobs and pods).
	if c.nsInf != nil || len(c.Informers()) != 2+len(c.deps.informers()) {
		t.Errorf("a namespace informer runs (%d informers)", len(c.Informers()))
	}
	ns, err := c.namespaceGoing(context.Background(), "shoot--a")
	svc, err2 := c.serviceGoing(context.Background(), "shoot--a", "etcd-main-client")
	if ns != "" || svc != "" || err != nil || err2 != nil || len(client.Actions()) != 0 {
		t.Errorf("going %q %q (%v %v); API actions %v", ns, svc, err, err2, client.Actions())
	}
	d.Config = parseConfig(t, testConfig+"namespaces: {selector: {matchLabels: {gardener.cloud/role: shoot}}}\n")
	if _, err := New(d); err == nil || !strings.Contains(err.Error(), "namespaces.selector") {
		t.Errorf("a namespace selector without namespace rights: %v", err)
	}
}

// A Job the informer shows before its creator expects it (an in-process run that ended at
// once is gone from the cache by then) leaves no expectation behind: the service is not
// taken for covered, nor the Job counted under the cap, until the expectation would expire.
func TestAJobSeenBeforeItIsExpectedIsNotExpected(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	e := jobExpectations{}
	e.observe("weeder-a", now)
	e.expect("weeder-a", now)
	if e.pending("weeder-a", now) || e.count(now) != 0 {
		t.Error("a Job already seen is expected")
	}
	e.expect("weeder-b", now)
	if !e.pending("weeder-b", now) || e.count(now) != 1 {
		t.Error("a created Job not seen yet is not expected")
	}
	e.observe("weeder-b", now)
	e.observe("weeder-c", now) // another replica's, or one listed at start
	if e.pending("weeder-b", now) || e.count(now) != 0 {
		t.Error("a seen Job is still expected")
	}
	if e.count(now.Add(expectationTTL)); len(e) != 0 {
		t.Errorf("sightings outlive the expectation TTL: %v", e)
	}
}
