package prober

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/test/upstream"
)

// dwdProberConfig is dependency-watchdog's prober ConfigMap data as Gardener ships it.
const dwdProberConfig = `
prober:
  kubeConfigSecretName: shoot-access-dependency-watchdog-probe
  probeInterval: 20s
  initialDelay: 5s
  probeTimeout: 10s
  backoffJitterFactor: 0.2
  kcmNodeMonitorGraceDuration: 40s
  nodeLeaseFailureFraction: 0.6
  dependentResourceInfos:
    - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
      optional: false
      scaleUp: {level: 1, initialDelay: 10s, timeout: 60s}
      scaleDown: {level: 0, initialDelay: 15s, timeout: 45s}
    - ref: {kind: Deployment, name: machine-controller-manager, apiVersion: apps/v1}
      optional: false
      scaleUp: {level: 1, initialDelay: 10s, timeout: 60s}
      scaleDown: {level: 1, timeout: 45s}
    - ref: {kind: Deployment, name: cluster-autoscaler, apiVersion: apps/v1}
      optional: true
      scaleUp: {level: 0, timeout: 60s}
      scaleDown: {level: 2, timeout: 45s}
`

func TestConfigAcceptsDependencyWatchdogProberConfigAsIs(t *testing.T) {
	cfg, err := parseFile([]byte(dwdProberConfig))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	p := cfg.Prober
	switch {
	case p == nil:
		t.Fatal("no prober")
	case p.Interval() != 20*time.Second || p.Delay() != 5*time.Second || p.Timeout() != 10*time.Second:
		t.Errorf("durations: %s %s %s", p.Interval(), p.Delay(), p.Timeout())
	case p.Jitter() != 0.2 || p.LeaseFailure() != 0.6 || p.ExpiryBuffer() != 0.75:
		t.Errorf("fractions: %g %g %g", p.Jitter(), p.LeaseFailure(), p.ExpiryBuffer())
	case len(p.Resources()) != 3 || !strings.Contains(p.ResourcesJSON(), `"name":"cluster-autoscaler"`):
		t.Errorf("resources: %d %s", len(p.Resources()), p.ResourcesJSON())
	case p.Selector().String() != "gardener.cloud/role=shoot":
		t.Errorf("selector: %s", p.Selector())
	case p.SuccessfulHistory() != 1 || p.FailedHistory() != 3 || p.RunDuration() != 2*time.Minute || p.PerJob() != 125:
		t.Errorf("history/run: %d %d %s", p.SuccessfulHistory(), p.FailedHistory(), p.RunDuration())
	}
	// Levels: down 0 (15+45) + 1 (45) + 2 (45) = 150 s; up 0 (60) + 1 (70) = 130 s.
	if got := p.ScaleChain(); got != 150*time.Second {
		t.Errorf("scale chain = %s, want 2m30s", got)
	}
}

func TestProberConfigRefusesInvalidFieldsNamingThem(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"prober: {kcmNodeMonitorGraceDuration: 40s, dependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]}", "prober.kubeConfigSecretName: required"},
		{"prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 0s, dependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]}", "prober.kcmNodeMonitorGraceDuration: 0s: must be greater than 0"},
		{"prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 1s, dependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]}", "prober.kcmNodeMonitorGraceDuration: 1s: must be at least 10s"},
		{"prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s}", "prober.dependentResourceInfos: required"},
		{"prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, dependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: x}, scaleDown: {level: 0}}]}", "prober.dependentResourceInfos[0].scaleUp.level"},
		{"prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, nodeLeaseFailureFraction: 1.5, dependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]}", "prober.nodeLeaseFailureFraction: 1.5"},
		{"prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, probeInterval: 0s, dependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]}", "prober.probeInterval: 0s"},
		{"prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, probeJobRunDuration: 5s, dependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]}", "prober.probeJobRunDuration: 5s"},
		{"prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, namespaceSelector: {}, dependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]}", "prober.namespaceSelector: empty"},
		{"prober: {kubeConfigSecretName: s, namespaceSelecter: {matchLabels: {a: b}}}", "prober.namespaceSelecter: unknown field; did you mean namespaceSelector?"},
		{"prober: {kubeConfigSecretName: s, DryRun: true}", "prober.DryRun: unknown field; did you mean dryRun?"},
		{"prober: {kubeConfigSecretName: s, namespaceSelector: {matchLabel: {a: b}}}", "prober.namespaceSelector.matchLabel: unknown field; did you mean matchLabels?"},
	} {
		_, err := parseFile([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n  error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
}

// cluster is the Cluster of the control-plane namespace shoot--p--a whose shoot is in state
// s, built from the Cluster written from Gardener's types (test/upstream).
func cluster(s upstream.Shoot) *unstructured.Unstructured { return s.Cluster("shoot--p--a") }

func TestShouldProbe(t *testing.T) {
	deleting := cluster(upstream.Shoot{})
	deleting.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	emptyWorkers := cluster(upstream.Shoot{})
	if err := unstructured.SetNestedSlice(emptyWorkers.Object, []any{}, ShootWorkers.Path()...); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cluster *unstructured.Unstructured
		want    bool
		reason  string
	}{
		{"no Cluster", nil, true, "no Gardener Cluster"},
		{"active shoot", cluster(upstream.Shoot{}), true, "active"},
		{"hibernation enabled", cluster(upstream.Shoot{HibernationEnabled: true}), false, "hibernat"},
		{"still hibernated while waking", cluster(upstream.Shoot{Hibernated: true}), false, "waking up"},
		{"shoot being deleted", cluster(upstream.Shoot{Deleting: true}), false, "deleted"},
		{"Cluster being deleted", deleting, false, "Cluster resource is being deleted"},
		{"migrating", cluster(upstream.Shoot{OpType: "Migrate", OpState: "Processing"}), false, "migrated"},
		{"reconciling", cluster(upstream.Shoot{OpState: "Processing"}), true, "active"},
		{"workers absent (Gardener omits an empty list)", cluster(upstream.Shoot{NoWorkers: true}), false, "no workers"},
		{"workers an empty list", emptyWorkers, false, "no workers"},
	} {
		got, reason := ShouldProbe(tc.cluster)
		if got != tc.want || !strings.Contains(reason, tc.reason) {
			t.Errorf("%s: ShouldProbe = %v (%s), want %v (%s)", tc.name, got, reason, tc.want, tc.reason)
		}
	}
}

func TestDecideProbe(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	hibernated := cluster(upstream.Shoot{HibernationEnabled: true, Hibernated: true})
	for _, tc := range []struct {
		name string
		in   ProbeInput
		want ProbeAction
	}{
		{"not selected", ProbeInput{Now: now, Probed: true}, ProbeForget},
		{"hibernated", ProbeInput{Watched: true, Cluster: hibernated, Now: now, Probed: true}, ProbeForget},
		{"cluster cache syncing", ProbeInput{Watched: true, ClusterPending: true, Now: now}, ProbeDeferred},
		{"first seen", ProbeInput{Watched: true, Now: now}, ProbeFirst},
		{"probed already", ProbeInput{Watched: true, Now: now, Probed: true}, ProbeMember},
	} {
		if got, why := DecideProbe(tc.in); got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got, why, tc.want)
		}
	}
}

func TestJitteredStaysWithinTheFactor(t *testing.T) {
	for range 1000 {
		d := Jittered(10*time.Second, 0.2)
		if d < 8*time.Second || d > 12*time.Second {
			t.Fatalf("Jittered(10s, 0.2) = %s", d)
		}
	}
	if Jittered(10*time.Second, 0) != 10*time.Second {
		t.Error("factor 0 must not jitter")
	}
}

// probeHarness: a prober on a fake clientset, caches filled by hand.
type probeHarness struct {
	t      *testing.T
	c      *Controller
	client *fake.Clientset
	rec    record.EventRecorder
	now    time.Time
	shown  []jobs.Run // what syncJobs last showed the controller's run view
}

const probeOnlyConfig = `
prober:
  kubeConfigSecretName: shoot-access
  probeInterval: 10s
  initialDelay: 30s
  backoffJitterFactor: 0
  kcmNodeMonitorGraceDuration: 40s
  successfulJobsHistoryLimit: 1
  failedJobsHistoryLimit: 1
  probeJobRunDuration: 0s
  dependentResourceInfos:
    - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
      scaleUp: {level: 1, timeout: 30s}
      scaleDown: {level: 0, timeout: 40s}
`

func newProbeHarness(t *testing.T) *probeHarness {
	t.Helper()
	return newProbeHarnessWith(t, probeOnlyConfig)
}

func newProbeHarnessWith(t *testing.T, config string) *probeHarness {
	t.Helper()
	cfg, err := parseFile([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	log := logrus.New()
	log.SetOutput(io.Discard)
	h := &probeHarness{t: t, client: client, rec: record.NewFakeRecorder(10), now: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	c, err := New(Deps{
		Shared:  ctrl.Shared{Client: client, Log: log, Template: jobs.Template{Namespace: "depwatch", Image: "localhost/depwatch:dev"}, Recorder: h.rec, Now: func() time.Time { return h.now }},
		Config:  cfg.Prober,
		Metrics: newTestMetrics(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	t.Cleanup(c.queue.ShutDown)
	return h
}

func (h *probeHarness) namespace(name string, lbls map[string]string) {
	h.t.Helper()
	if err := h.c.nsInf.GetIndexer().Update(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}); err != nil {
		h.t.Fatal(err)
	}
}

// reconcile runs one turn for key and then for the keys it queued for now (its shard), as the
// workers would, copying the fake API's probe Jobs and ConfigMaps into the caches after each.
func (h *probeHarness) reconcile(key string) {
	h.t.Helper()
	if err := h.c.Reconcile(context.Background(), key); err != nil {
		h.t.Fatalf("reconcile %s: %v", key, err)
	}
	h.syncJobs()
	for h.c.queue.Len() > 0 {
		next, _ := h.c.queue.Get()
		err := h.c.Reconcile(context.Background(), next)
		h.c.queue.Done(next)
		if err != nil {
			h.t.Fatalf("reconcile %s: %v", next, err)
		}
		h.syncJobs()
	}
}

func (h *probeHarness) syncJobs() {
	list := h.jobs()
	for _, r := range h.shown {
		h.c.view.Forget(r.Namespace, r.Name)
	}
	h.shown = nil
	for i := range list {
		h.shown = append(h.shown, jobs.RunOf(&list[i]))
		h.c.view.Observe(h.shown[i])
	}
	cms, err := h.client.CoreV1().ConfigMaps("depwatch").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	cmIdx := h.c.members.(interface{ GetIndexer() cache.Indexer }).GetIndexer() // the Job executor's ConfigMaps
	for _, o := range cmIdx.List() {
		_ = cmIdx.Delete(o)
	}
	for i := range cms.Items {
		_ = cmIdx.Add(&cms.Items[i])
	}
}

func (h *probeHarness) jobs() []batchv1.Job {
	h.t.Helper()
	list, err := h.client.BatchV1().Jobs("depwatch").List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/kind=probe"})
	if err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

func (h *probeHarness) finish(name string, typ batchv1.JobConditionType, at time.Time) {
	h.t.Helper()
	j, err := h.client.BatchV1().Jobs("depwatch").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: at}}}
	if typ == batchv1.JobComplete {
		j.Status.CompletionTime = &metav1.Time{Time: at}
	}
	if _, err := h.client.BatchV1().Jobs("depwatch").UpdateStatus(context.Background(), j, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.syncJobs()
}

func TestProberLaunchesAfterTheInitialDelayThenEveryIntervalNeverTwoAtOnce(t *testing.T) {
	h := newProbeHarness(t)
	h.namespace("shoot--p--a", map[string]string{"gardener.cloud/role": "shoot"})
	h.namespace("other", nil)

	h.reconcile("shoot--p--a")
	h.reconcile("other")
	if n := len(h.jobs()); n != 0 {
		t.Fatalf("%d Jobs before the initial delay", n)
	}
	h.now = h.now.Add(29 * time.Second)
	h.reconcile("shoot--p--a")
	if n := len(h.jobs()); n != 0 {
		t.Fatalf("%d Jobs 1 s before the initial delay ends", n)
	}
	h.now = h.now.Add(time.Second)
	h.reconcile("shoot--p--a")
	list := h.jobs()
	if len(list) != 1 {
		t.Fatalf("%d Jobs after the initial delay, want 1", len(list))
	}
	j := list[0]
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["NAMESPACES"] != "shoot--p--a" || env["KUBECONFIG_SECRET_NAME"] != "shoot-access" || env["KCM_NODE_MONITOR_GRACE_DURATION"] != "40s" ||
		!strings.Contains(env["DEPENDENT_RESOURCES"], "kube-controller-manager") || env["SCHEDULE"] != "" {
		t.Errorf("env: %v", env)
	}
	if j.Labels["depwatch.io/kind"] != "probe" || j.Labels["probe.depwatch.io/shoot--p--a"] != "true" || !strings.HasPrefix(j.Labels["depwatch.io/namespace"], "shard-0-") || j.Spec.Template.Spec.ServiceAccountName != "depwatch-probe" {
		t.Errorf("labels/SA: %v %s", j.Labels, j.Spec.Template.Spec.ServiceAccountName)
	}
	// Next interval, the first still running: kept, nothing new.
	h.now = h.now.Add(10 * time.Second)
	h.reconcile("shoot--p--a")
	if n := len(h.jobs()); n != 1 {
		t.Fatalf("%d Jobs while the first is active, want 1", n)
	}
	// It finishes; the next turn launches.
	h.finish(j.Name, batchv1.JobComplete, h.now)
	h.now = h.now.Add(10 * time.Second)
	h.reconcile("shoot--p--a")
	if n := len(h.jobs()); n != 2 {
		t.Fatalf("%d Jobs after the first finished, want 2", n)
	}
}

func TestProberKeepsTheHistoryLimits(t *testing.T) {
	h := newProbeHarness(t)
	h.namespace("shoot--p--a", map[string]string{"gardener.cloud/role": "shoot"})
	h.reconcile("shoot--p--a")
	for i := range 4 {
		h.now = h.now.Add(30 * time.Second)
		h.reconcile("shoot--p--a")
		list := h.jobs()
		var active string
		for _, j := range list {
			if !jobs.Finished(&j) {
				active = j.Name
			}
		}
		typ := batchv1.JobComplete
		if i%2 == 1 {
			typ = batchv1.JobFailed
		}
		h.finish(active, typ, h.now)
	}
	h.now = h.now.Add(time.Second)
	h.reconcile("shoot--p--a") // not due: only the clean-up runs
	h.syncJobs()
	var complete, failed int
	for _, j := range h.jobs() {
		for _, c := range j.Status.Conditions {
			switch c.Type {
			case batchv1.JobComplete:
				complete++
			case batchv1.JobFailed:
				failed++
			}
		}
	}
	if complete != 1 || failed != 1 {
		t.Errorf("after 4 finished Jobs: %d complete and %d failed left, want 1 and 1", complete, failed)
	}
}

func TestProberForgetsANamespaceThatIsNoLongerSelected(t *testing.T) {
	h := newProbeHarness(t)
	h.namespace("shoot--p--a", map[string]string{"gardener.cloud/role": "shoot"})
	h.reconcile("shoot--p--a")
	h.namespace("shoot--p--a", nil)
	h.now = h.now.Add(time.Minute)
	h.reconcile("shoot--p--a")
	if n := len(h.jobs()); n != 0 {
		t.Errorf("%d Jobs for a namespace no longer selected", n)
	}
	if _, ok := h.c.next["shoot--p--a"]; ok {
		t.Error("its schedule was kept")
	}
}

// The namespace informer is the whole cluster's (shared with the weeder): the prober queues
// only the namespaces its selector matches, and one whose labels leave it, once more, so that
// it is let go; it starts from the selected ones alone.
func TestProberQueuesOnlyTheNamespacesItsSelectorMatches(t *testing.T) {
	h := newProbeHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { h.c.nsInf.RunWithContext(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	nss := h.client.CoreV1().Namespaces()
	shoot := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gardener.cloud/role": "shoot"}}}
	}
	// Handlers see one informer's events in order: once a later key is queued, every event
	// before it was handled.
	next := func() string {
		t.Helper()
		got := make(chan string, 1)
		go func() { k, _ := h.c.queue.Get(); got <- k }()
		select {
		case k := <-got:
			h.c.queue.Done(k)
			return k
		case <-time.After(10 * time.Second):
			t.Fatal("nothing queued")
			return ""
		}
	}
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nss.Create(ctx, shoot("shoot--p--a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if k := next(); k != "shoot--p--a" {
		t.Fatalf("queued %q first; want shoot--p--a (kube-system is not selected)", k)
	}
	if keys := h.c.selectedKeys(); len(keys) != 1 || keys[0] != "shoot--p--a" {
		t.Errorf("selected %v; want [shoot--p--a] of the two cached", keys)
	}
	// Leaves the selector: queued, to be let go.
	if _, err := nss.Update(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--p--a"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if k := next(); k != "shoot--p--a" {
		t.Fatalf("queued %q; want shoot--p--a, which left the selector", k)
	}
	// Neither side selected: not queued (the marker after it is the next key).
	if _, err := nss.Update(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: map[string]string{"a": "b"}}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nss.Create(ctx, shoot("shoot--p--marker"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if k := next(); k != "shoot--p--marker" {
		t.Errorf("queued %q; want shoot--p--marker (kube-system's update is not the prober's)", k)
	}
}
