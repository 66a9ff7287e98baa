package weeder

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/jobs"
)

func TestDecideTransitionTable(t *testing.T) {
	unknown := Observation{}
	down := Observation{Known: true}
	up := Observation{Known: true, Ready: true}
	cases := []struct {
		name      string
		prev, now Observation
		want      Edge
	}{
		{"notReady → Ready is a return", down, up, EdgeReady},
		{"Ready → Ready is none", up, up, EdgeNone},
		{"Ready → notReady is an outage", up, down, EdgeOutage},
		{"notReady → notReady is none", down, down, EdgeNone},
		{"first seen Ready is not a transition", unknown, up, EdgeNone},
		{"first seen notReady is not a transition", unknown, down, EdgeNone},
		{"deleted while Ready is gone", up, unknown, EdgeGone},
		{"deleted while notReady is gone", down, unknown, EdgeGone},
		{"unknown and still unknown is none", unknown, unknown, EdgeNone},
	}
	for _, tc := range cases {
		if got := Decide(tc.prev, tc.now); got != tc.want {
			t.Errorf("%s: Decide = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestPlanWeederTable(t *testing.T) {
	cases := []struct {
		name string
		in   WeederInput
		want Action
	}{
		// Arming on (the default).
		{"outage, nothing running: arm a weeder", WeederInput{Edge: EdgeOutage, Arm: true}, ActionArmWeeder},
		{"outage while an unarmed weeder reaps: replace it with an armed one", WeederInput{Edge: EdgeOutage, Arm: true, Active: UnarmedWeeder}, ActionArmWeeder},
		{"outage while an armed weeder is active (flapping): keep it, it pauses", WeederInput{Edge: EdgeOutage, Arm: true, Active: ArmedWeeder}, ActionKeepWeeder},
		{"return with an armed weeder waiting: keep it, it opens by itself", WeederInput{Edge: EdgeReady, Arm: true, Active: ArmedWeeder}, ActionKeepWeeder},
		{"return without an armed weeder (expired, coordinator was down): launch unarmed", WeederInput{Edge: EdgeReady, Arm: true}, ActionLaunchWeeder},
		{"return while an unarmed weeder runs: replace it", WeederInput{Edge: EdgeReady, Arm: true, Active: UnarmedWeeder}, ActionLaunchWeeder},
		// Arming off: the weeder is launched on the return, and stopped when the service goes down.
		{"arm off, outage, weeder running: stop it", WeederInput{Edge: EdgeOutage, Active: UnarmedWeeder}, ActionStopWeeder},
		{"arm off, outage, nothing running: nothing", WeederInput{Edge: EdgeOutage}, ActionNone},
		{"arm off, return: launch", WeederInput{Edge: EdgeReady}, ActionLaunchWeeder},
		{"arm off, return, an armed weeder left from before: keep it", WeederInput{Edge: EdgeReady, Active: ArmedWeeder}, ActionKeepWeeder},
		{"arm off, outage, an armed weeder left from before: keep it", WeederInput{Edge: EdgeOutage, Active: ArmedWeeder}, ActionKeepWeeder},
		// Going away: never armed, its weeder stopped.
		{"outage of a service being deleted: not armed", WeederInput{Edge: EdgeOutage, Arm: true, Going: true}, ActionNone},
		{"outage of a service being deleted, unarmed weeder running: stop it", WeederInput{Edge: EdgeOutage, Arm: true, Active: UnarmedWeeder, Going: true}, ActionStopWeeder},
		{"outage of a service being deleted, armed weeder waiting: stop it", WeederInput{Edge: EdgeOutage, Arm: true, Active: ArmedWeeder, Going: true}, ActionStopWeeder},
		{"gone with its namespace, armed weeder waiting: stop it", WeederInput{Edge: EdgeGone, Arm: true, Active: ArmedWeeder, Going: true}, ActionStopWeeder},
		{"gone, namespace stays: keep the armed weeder (the service may come back)", WeederInput{Edge: EdgeGone, Arm: true, Active: ArmedWeeder}, ActionNone},
		{"gone, nothing running", WeederInput{Edge: EdgeGone, Arm: true, Going: true}, ActionNone},
		// No edge.
		{"no edge", WeederInput{Arm: true, Active: ArmedWeeder}, ActionNone},
		{"no edge, nothing", WeederInput{}, ActionNone},
	}
	for _, tc := range cases {
		if got := PlanWeeder(tc.in); got != tc.want {
			t.Errorf("%s: PlanWeeder = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func ep(ready *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
}

func slice(ns, svc, name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
	}
}

func TestReadinessAggregatesAcrossTheServiceSlices(t *testing.T) {
	cases := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   Observation
	}{
		{"no slices: unknown", nil, Observation{}},
		{"one empty slice: known, not ready", []*discoveryv1.EndpointSlice{slice("n", "s", "a")}, Observation{Known: true}},
		{"only not-ready endpoints", []*discoveryv1.EndpointSlice{slice("n", "s", "a", ep(ptr.To(false)), ep(ptr.To(false)))}, Observation{Known: true}},
		{"a ready endpoint", []*discoveryv1.EndpointSlice{slice("n", "s", "a", ep(ptr.To(false)), ep(ptr.To(true)))}, Observation{Known: true, Ready: true}},
		{"nil ready counts as ready", []*discoveryv1.EndpointSlice{slice("n", "s", "a", ep(nil))}, Observation{Known: true, Ready: true}},
		{"ready endpoint in the second slice", []*discoveryv1.EndpointSlice{slice("n", "s", "a", ep(ptr.To(false))), slice("n", "s", "b", ep(ptr.To(true)))}, Observation{Known: true, Ready: true}},
	}
	for _, tc := range cases {
		if got := SlicesObservation(tc.slices); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestLegacyEndpointsReadiness(t *testing.T) {
	cases := []struct {
		name string
		ep   *corev1.Endpoints
		want Observation
	}{
		{"absent", nil, Observation{}},
		{"no subsets", &corev1.Endpoints{}, Observation{Known: true}},
		{"only notReadyAddresses", &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{{IP: "1.2.3.4"}}}}}, Observation{Known: true}},
		{"a ready address", &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{}, {Addresses: []corev1.EndpointAddress{{IP: "1.2.3.4"}}}}}, Observation{Known: true, Ready: true}},
	}
	for _, tc := range cases {
		if got := EndpointsObservation(tc.ep); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func crashPod(ns, name string, lbl map[string]string, init bool) *corev1.Pod {
	st := corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl}}
	if init {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{st}
	} else {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
	}
	return p
}

func TestCrashLoopingCountsInitContainers(t *testing.T) {
	running := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	terminating := crashPod("n", "p", nil, false)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running", running, false},
		{"container in CrashLoopBackOff", crashPod("n", "p", nil, false), true},
		{"init container in CrashLoopBackOff", crashPod("n", "p", nil, true), true},
		{"terminating", terminating, false},
	}
	for _, tc := range cases {
		if got := CrashLooping(tc.pod); got != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}

// harness: a weeder on a fake clientset whose informer caches are filled by hand.
type harness struct {
	t      *testing.T
	c      *Controller
	client *fake.Clientset
	rec    *record.FakeRecorder
	now    time.Time
}

const testConfig = `
watchDuration: 3m
servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors: [{matchLabels: {app: kubernetes, role: apiserver}}]
  kube-apiserver:
    podSelectors:
      - matchLabels: {app: kubernetes, role: controller-manager}
      - matchLabels: {app: machine-controller-manager}
`

func newHarness(t *testing.T, cfgYAML string, objs ...runtime.Object) *harness {
	t.Helper()
	cfg := parseConfig(t, cfgYAML)
	client := fake.NewClientset(objs...)
	rec := record.NewFakeRecorder(100)
	log := logrus.New()
	log.SetOutput(io.Discard)
	h := &harness{t: t, client: client, rec: rec, now: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	c, err := New(Deps{
		Client:   client,
		Config:   cfg,
		Log:      log,
		Metrics:  newTestMetrics(),
		Template: jobs.Template{Namespace: "depwatch", Image: "localhost/depwatch:dev"},
		Recorder: rec,
		Now:      func() time.Time { return h.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	t.Cleanup(c.queue.ShutDown)
	t.Cleanup(c.batch.queue.ShutDown)
	return h
}

// set puts a slice into the cache and delivers the event as the informer would. The
// namespace and the Service are created in the API first (the coordinator reads them on an
// outage).
func (h *harness) set(s *discoveryv1.EndpointSlice) {
	h.t.Helper()
	ctx := context.Background()
	_, _ = h.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}, metav1.CreateOptions{})
	svc := s.Labels[discoveryv1.LabelServiceName]
	_, _ = h.client.CoreV1().Services(s.Namespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: svc}}, metav1.CreateOptions{})
	if err := h.c.src.Informer().GetIndexer().Update(s); err != nil {
		h.t.Fatal(err)
	}
	h.c.onEndpoints(s, false)
	h.drain()
}

func (h *harness) remove(s *discoveryv1.EndpointSlice) {
	h.t.Helper()
	if err := h.c.src.Informer().GetIndexer().Delete(s); err != nil {
		h.t.Fatal(err)
	}
	h.c.onEndpoints(s, true)
	h.drain()
}

// syncCaches fills the Job and pod informers' caches from the fake API's store, as running
// informers would have by the time a reconcile reads them (read from the tracker, so the
// client's recorded actions stay the coordinator's own).
func (h *harness) syncCaches() {
	h.t.Helper()
	jobsGVR := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	obj, err := h.client.Tracker().List(jobsGVR, schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, "")
	if err != nil {
		h.t.Fatal(err)
	}
	var js []any
	for i := range obj.(*batchv1.JobList).Items {
		js = append(js, &obj.(*batchv1.JobList).Items[i])
		h.c.onJobAdded(&obj.(*batchv1.JobList).Items[i])
	}
	if err := h.c.wjobs.inf.GetIndexer().Replace(js, ""); err != nil {
		h.t.Fatal(err)
	}
	obj, err = h.client.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "")
	if err != nil {
		h.t.Fatal(err)
	}
	var nss []any
	for i := range obj.(*corev1.NamespaceList).Items {
		nss = append(nss, &obj.(*corev1.NamespaceList).Items[i])
	}
	if err := h.c.nsInf.GetIndexer().Replace(nss, ""); err != nil {
		h.t.Fatal(err)
	}
	obj, err = h.client.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "")
	if err != nil {
		h.t.Fatal(err)
	}
	pods := obj.(*corev1.PodList).Items
	for sel, inf := range h.c.deps.infs {
		s, err := labels.Parse(sel)
		if err != nil {
			h.t.Fatal(err)
		}
		var ps []any
		for i := range pods {
			if s.Matches(labels.Set(pods[i].Labels)) {
				p, _ := slimPod(&pods[i])
				ps = append(ps, p)
			}
		}
		if err := inf.GetIndexer().Replace(ps, ""); err != nil {
			h.t.Fatal(err)
		}
	}
}

// drain reconciles everything queued, synchronously.
func (h *harness) drain() {
	h.t.Helper()
	for h.c.queue.Len() > 0 {
		if h.c.src != nil {
			h.syncCaches()
		}
		key, _ := h.c.queue.Get()
		if err := h.c.Reconcile(context.Background(), key); err != nil {
			h.t.Errorf("reconcile %s: %v", key, err)
		}
		if h.c.src != nil {
			h.syncCaches() // the informers catch up with what the reconcile created
		}
		h.c.queue.Forget(key)
		h.c.queue.Done(key)
	}
}

func (h *harness) weederJobs() []batchv1.Job {
	h.t.Helper()
	list, err := h.client.BatchV1().Jobs("depwatch").List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/kind=weeder"})
	if err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func down(ns, svc string) *discoveryv1.EndpointSlice {
	return slice(ns, svc, svc+"-abc", ep(ptr.To(false)))
}

func up(ns, svc string) *discoveryv1.EndpointSlice {
	return slice(ns, svc, svc+"-abc", ep(ptr.To(true)))
}

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
	if err := h.c.launchWeeder(context.Background(), h.c.config(), "n/kube-apiserver", &recordedEdge{trigger: "catch-up", at: h.now}, false, first, h.c.log); err != nil {
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

func names(js []batchv1.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.Name)
	}
	return out
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
	h.c.config().launcher.Template.Image = "" // Build fails
	if err := h.c.src.Informer().GetIndexer().Update(up("n", "etcd-main-client")); err != nil {
		t.Fatal(err)
	}
	h.c.onEndpoints(up("n", "etcd-main-client"), false)
	if err := h.c.Reconcile(context.Background(), "n/etcd-main-client"); err == nil {
		t.Fatal("launch without an image succeeded")
	}
	if got := value(h.c.metrics.JobsLaunched.WithLabelValues("weeder", "error")); got != 1 {
		t.Errorf("error launches = %v", got)
	}
	h.c.config().launcher.Template.Image = "img"
	if err := h.c.Reconcile(context.Background(), "n/etcd-main-client"); err != nil {
		t.Fatal(err)
	}
	if n := len(h.weederJobs()); n != 1 {
		t.Errorf("retry launched %d Jobs", n)
	}
}

// value reads a counter or gauge.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

func sampleCount(o prometheus.Observer) uint64 {
	var d dto.Metric
	if err := o.(prometheus.Metric).Write(&d); err != nil {
		panic(err)
	}
	return d.Histogram.GetSampleCount()
}

func jobEnv(j batchv1.Job) map[string]string {
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

func countWith(events []string, reason string) int {
	n := 0
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") {
			n++
		}
	}
	return n
}

// TestOutageArmsTheWeederAndTheReturnKeepsIt: the outage launches the weeder armed at once;
// the return launches nothing (the armed Job opens by itself).
func TestOutageArmsTheWeederAndTheReturnKeepsIt(t *testing.T) {
	h := newHarness(t, testConfig)
	h.set(up("shoot--a", "etcd-main-client"))
	h.now = h.now.Add(time.Minute)
	h.set(down("shoot--a", "etcd-main-client"))
	js := h.weederJobs()
	if len(js) != 1 {
		t.Fatalf("%d Jobs after the outage began, want 1 armed", len(js))
	}
	j := js[0]
	env := jobEnv(j)
	if env["START_WHEN_READY"] != "shoot--a/etcd-main-client" || env["MAX_WAIT"] != "6h0m0s" || env["RUN_DURATION"] != "3m0s" || env["WATCH"] != "true" || env["NAMESPACE"] != "shoot--a" {
		t.Errorf("env = %v", env)
	}
	if got, want := *j.Spec.ActiveDeadlineSeconds, int64((6*time.Hour+3*time.Minute+2*time.Minute)/time.Second); got != want {
		t.Errorf("activeDeadlineSeconds = %d, want %d (MAX_WAIT + watchDuration + margin)", got, want)
	}
	if j.Annotations[jobs.AnnotationTrigger] != jobs.TriggerOutage || j.Annotations[jobs.AnnotationArmedAt] != "2026-05-01T10:01:00Z" || j.Spec.Template.Annotations[jobs.AnnotationTrigger] != jobs.TriggerOutage {
		t.Errorf("annotations = %v", j.Annotations)
	}
	if !jobs.Armed(&j) {
		t.Error("jobs.Armed = false")
	}
	ev := h.events()
	if countWith(ev, EventWeederArmed) != 1 || !strings.Contains(ev[0], j.Name) {
		t.Errorf("events = %q, want one WeederArmed naming %s", ev, j.Name)
	}

	h.now = h.now.Add(time.Minute)
	h.set(up("shoot--a", "etcd-main-client"))
	if js := h.weederJobs(); len(js) != 1 || js[0].Name != j.Name {
		t.Fatalf("jobs after the return: %v, want only the armed %s", names(js), j.Name)
	}
	if ev := h.events(); len(ev) != 0 {
		t.Errorf("events on the return: %q, want none", ev)
	}
	m := h.c.metrics
	if got := value(m.JobsLaunched.WithLabelValues("weeder", "kept")); got != 1 {
		t.Errorf("kept = %v", got)
	}
	if got := value(m.Triggers.WithLabelValues("weeder", "outage")); got != 1 {
		t.Errorf("outage triggers = %v", got)
	}
}

// TestFlappingServiceKeepsOneArmedJob: Ready/notReady several times within watchDuration:
// one Job throughout.
func TestFlappingServiceKeepsOneArmedJob(t *testing.T) {
	h := newHarness(t, testConfig)
	h.set(up("n", "kube-apiserver"))
	for i := 0; i < 3; i++ {
		h.now = h.now.Add(10 * time.Second)
		h.set(down("n", "kube-apiserver"))
		h.now = h.now.Add(10 * time.Second)
		h.set(up("n", "kube-apiserver"))
	}
	js := h.weederJobs()
	if len(js) != 1 || !jobs.Armed(&js[0]) {
		t.Fatalf("jobs = %v, want one armed Job", names(js))
	}
	if got := value(h.c.metrics.JobsLaunched.WithLabelValues("weeder", "kept")); got != 5 {
		t.Errorf("kept = %v, want 5 (3 returns, 2 later outages)", got)
	}
	if ev := h.events(); len(ev) != 1 || countWith(ev, EventWeederArmed) != 1 {
		t.Errorf("events = %q, want one WeederArmed", ev)
	}
}

// TestReturnAfterTheArmedJobEndedLaunchesAnUnarmedOne: the armed Job finished (MAX_WAIT):
// the return falls back to an unarmed weeder.
func TestReturnAfterTheArmedJobEndedLaunchesAnUnarmedOne(t *testing.T) {
	h := newHarness(t, testConfig)
	h.set(up("n", "etcd-main-client"))
	h.set(down("n", "etcd-main-client"))
	armed := h.weederJobs()[0]
	armed.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if _, err := h.client.BatchV1().Jobs("depwatch").UpdateStatus(context.Background(), &armed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.now = h.now.Add(7 * time.Hour)
	h.set(up("n", "etcd-main-client"))
	js := h.weederJobs()
	if len(js) != 2 {
		t.Fatalf("jobs = %v, want the finished armed one and a new unarmed one", names(js))
	}
	for _, j := range js {
		if j.Name == armed.Name {
			continue
		}
		if jobs.Armed(&j) || j.Annotations[jobs.AnnotationTrigger] != jobs.TriggerReady {
			t.Errorf("new Job %s: armed %v, trigger %q", j.Name, jobs.Armed(&j), j.Annotations[jobs.AnnotationTrigger])
		}
	}
	if ev := h.events(); countWith(ev, EventWeederStarted) != 1 {
		t.Errorf("events = %q", ev)
	}
}

// TestOutageReplacesAnUnarmedWeederWithAnArmedOne: an unarmed weeder still reaping when the
// service goes down would restart dependents that can only crash again.
func TestOutageReplacesAnUnarmedWeederWithAnArmedOne(t *testing.T) {
	h := newHarness(t, testConfig)
	h.set(down("n", "etcd-main-client"))
	h.set(up("n", "etcd-main-client"))
	unarmed := h.weederJobs()
	h.now = h.now.Add(time.Minute)
	h.set(down("n", "etcd-main-client"))
	js := h.weederJobs()
	if len(unarmed) != 1 || jobs.Armed(&unarmed[0]) || len(js) != 1 || js[0].Name == unarmed[0].Name || !jobs.Armed(&js[0]) {
		t.Fatalf("before %v after %v: want the unarmed Job replaced by an armed one", names(unarmed), names(js))
	}
	if got := value(h.c.metrics.JobsLaunched.WithLabelValues("weeder", "replaced")); got != 1 {
		t.Errorf("replaced = %v", got)
	}
}

// TestArmSwitches: armWeeder: false, or a service's own arm: false, launches on the return only;
// armedMaxWait sets MAX_WAIT and the deadline.
func TestArmSwitches(t *testing.T) {
	h := newHarness(t, `
watchDuration: 1m
armedMaxWait: 30m
servicesAndDependantSelectors:
  armed:
    podSelectors: [{matchLabels: {app: a}}]
  unarmed:
    arm: false
    podSelectors: [{matchLabels: {app: b}}]
`)
	for _, svc := range []string{"armed", "unarmed"} {
		h.set(up("n", svc))
		h.set(down("n", svc))
	}
	js := h.weederJobs()
	if len(js) != 1 || js[0].Labels[jobs.LabelService] != "armed" {
		t.Fatalf("jobs = %v, want one, for the armed service", names(js))
	}
	if env := jobEnv(js[0]); env["MAX_WAIT"] != "30m0s" || *js[0].Spec.ActiveDeadlineSeconds != int64((30*time.Minute+time.Minute+2*time.Minute)/time.Second) {
		t.Errorf("env %v deadline %d", env, *js[0].Spec.ActiveDeadlineSeconds)
	}

	off := newHarness(t, testConfig+"armWeeder: false\n")
	off.set(up("n", "etcd-main-client"))
	off.set(down("n", "etcd-main-client"))
	if n := len(off.weederJobs()); n != 0 {
		t.Errorf("armWeeder: false launched %d Jobs on an outage", n)
	}
	// A service's arm: true wins over armWeeder: false.
	on := newHarness(t, "armWeeder: false\nservicesAndDependantSelectors: {s: {arm: true, podSelectors: [{matchLabels: {app: a}}]}}\n")
	on.set(up("n", "s"))
	on.set(down("n", "s"))
	if js := on.weederJobs(); len(js) != 1 || !jobs.Armed(&js[0]) {
		t.Errorf("arm: true under armWeeder: false: %v", names(js))
	}
}

// TestCatchUpKeepsAnArmedWeeder: catch-up finds the service Ready with a crash-looping
// dependent while its armed weeder is active: that Job handles it.
func TestCatchUpKeepsAnArmedWeeder(t *testing.T) {
	h := newHarness(t, testConfig, crashPod("a", "kube-apiserver-1", map[string]string{"app": "kubernetes", "role": "apiserver"}, false))
	h.set(down("a", "etcd-main-client"))
	h.set(up("a", "etcd-main-client"))
	h.set(down("a", "etcd-main-client"))
	h.set(up("a", "etcd-main-client"))
	if n := h.c.CatchUp(); n != 1 {
		t.Fatalf("CatchUp = %d", n)
	}
	h.drain()
	if js := h.weederJobs(); len(js) != 1 || !jobs.Armed(&js[0]) {
		t.Errorf("jobs = %v, want the armed one only", names(js))
	}
}

// TestNoArmedWeederForAServiceGoingAway: when the namespace is being deleted the service's
// pods go first; that outage arms nothing, and the deletion stops an armed weeder waiting.
func TestNoArmedWeederForAServiceGoingAway(t *testing.T) {
	h := newHarness(t, testConfig)
	ctx := context.Background()
	h.set(up("a", "etcd-main-client"))
	h.set(up("b", "etcd-main-client"))
	h.set(down("b", "etcd-main-client")) // b: armed while its namespace lives
	if js := h.weederJobs(); len(js) != 1 {
		t.Fatalf("jobs = %v", names(js))
	}
	for _, ns := range []string{"a", "b"} {
		n, _ := h.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		n.Status.Phase = corev1.NamespaceTerminating
		if _, err := h.client.CoreV1().Namespaces().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.set(down("a", "etcd-main-client"))
	h.remove(down("b", "etcd-main-client"))
	if js := h.weederJobs(); len(js) != 0 {
		t.Errorf("jobs = %v, want none: nothing armed in a, b's armed weeder stopped", names(js))
	}
	// A Service deleted in a namespace that stays: its outage arms nothing.
	h.set(up("c", "etcd-main-client"))
	if err := h.client.CoreV1().Services("c").Delete(ctx, "etcd-main-client", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.src.Informer().GetIndexer().Update(down("c", "etcd-main-client")); err != nil {
		t.Fatal(err)
	}
	h.c.onEndpoints(down("c", "etcd-main-client"), false)
	h.drain()
	if js := h.weederJobs(); len(js) != 0 {
		t.Errorf("jobs = %v after the outage of a deleted Service", names(js))
	}
}
