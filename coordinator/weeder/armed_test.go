package weeder

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/jobs"
)

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
	if err := h.c.src.GetIndexer().Update(down("c", "etcd-main-client")); err != nil {
		t.Fatal(err)
	}
	h.c.onEndpoints(down("c", "etcd-main-client"), false)
	h.drain()
	if js := h.weederJobs(); len(js) != 0 {
		t.Errorf("jobs = %v after the outage of a deleted Service", names(js))
	}
}

// TestWithoutNamespaceReadsEndpointsGoneStopTheArmedWeeder: under gardenlet's weeder RBAC a
// namespace being deleted is not seen; its services' outages arm weeders (nothing says
// otherwise), and when their endpoints are gone the armed weeders are stopped instead of
// waiting maxWait. Nothing was read of namespaces or Services.
func TestWithoutNamespaceReadsEndpointsGoneStopTheArmedWeeder(t *testing.T) {
	h := newHarnessWith(t, testConfig, Options{NoNamespaceReads: true, NoServiceReads: true})
	h.set(up("shoot--a", "etcd-main-client"))
	h.set(down("shoot--a", "etcd-main-client"))
	js := h.weederJobs()
	if len(js) != 1 || js[0].Annotations[jobs.AnnotationArmed] != "true" {
		t.Fatalf("jobs = %v, want the armed one", names(js))
	}
	h.remove(down("shoot--a", "etcd-main-client"))
	if js := h.weederJobs(); len(js) != 0 {
		t.Errorf("jobs = %v, want the armed weeder stopped once the endpoints are gone", names(js))
	}
	for _, a := range h.client.Actions() {
		if r := a.GetResource().Resource; (r == "namespaces" || r == "services") && a.GetVerb() == "get" {
			t.Errorf("read %s although the options say it may not", r)
		}
	}
}
