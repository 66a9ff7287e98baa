package prober

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/test/upstream"
)

// An absent scaleUp or scaleDown is level 0 with no delay (dependency-watchdog's zero values).
func TestProberConfigDefaultsAnAbsentScaleInfoToLevelZero(t *testing.T) {
	cfg, err := parseFile([]byte("prober:\n  kubeConfigSecretName: s\n  dependentResourceInfos:\n  - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Prober.Resources()[0]
	want := probe.ScaleInfo{Level: 0, InitialDelay: 0, Timeout: probe.DefaultScaleTimeout}
	if r.ScaleUp != want || r.ScaleDown != want {
		t.Errorf("scale infos %+v %+v, want %+v", r.ScaleUp, r.ScaleDown, want)
	}
}

// A field dependency-watchdog does not know is ignored with a warning naming its path (the
// ConfigMap may come from a newer gardenlet); the probe Jobs never see it. A near miss of one
// of depwatch's own fields is refused (TestProberConfigRefusesInvalidFieldsNamingThem).
func TestUnknownDependencyWatchdogFieldsAreWarningsNotRefusals(t *testing.T) {
	cfg, err := parseFile([]byte(`prober:
  kubeConfigSecretName: s
  probeIntervall: 5s
  internalProbeEnabled: true
  dependentResourceInfos:
  - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1, fieldPath: x}
    shouldExist: true
    scaleUp: {level: 1, replicas: 3}
    scaleDown: {level: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"prober.dependentResourceInfos[0].ref.fieldPath",
		"prober.dependentResourceInfos[0].scaleUp.replicas",
		"prober.dependentResourceInfos[0].shouldExist",
		"prober.internalProbeEnabled",
		"prober.probeIntervall",
	}
	got := cfg.Prober.Warnings()
	if len(got) != len(want) {
		t.Fatalf("warnings %q, want one each for %q", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]+": unknown field") {
			t.Errorf("warning %d = %q, want it to name %s", i, got[i], want[i])
		}
	}
	if cfg.Prober.Interval() != DefaultProbeInterval {
		t.Errorf("a misspelt dependency-watchdog field must not set anything: interval %s", cfg.Prober.Interval())
	}
	var res []map[string]any
	if err := json.Unmarshal([]byte(cfg.Prober.ResourcesJSON()), &res); err != nil {
		t.Fatal(err)
	}
	if _, err := probe.ParseDependentResources([]byte(cfg.Prober.ResourcesJSON())); err != nil || strings.Contains(cfg.Prober.ResourcesJSON(), "shouldExist") {
		t.Errorf("the Job's DEPENDENT_RESOURCES must be free of ignored fields and parse strictly: %s (%v)", cfg.Prober.ResourcesJSON(), err)
	}
}

// The shoot's lifecycle, as dependency-watchdog decides when to run a prober: only a settled
// control plane is probed.
func TestShootLifecycleDecidesWhetherItIsProbed(t *testing.T) {
	op := func(typ, state string) upstream.Shoot { return upstream.Shoot{OpType: typ, OpState: state} }
	for _, tc := range []struct {
		name   string
		shoot  upstream.Shoot
		want   bool
		reason string
	}{
		{"no lastOperation: being created", upstream.Shoot{NoLastOperation: true}, false, "being created"},
		{"Create Processing", op("Create", "Processing"), false, "Create Processing"},
		{"Create Error", op("Create", "Error"), false, "not settled"},
		{"Create Succeeded", op("Create", "Succeeded"), true, "Create Succeeded"},
		{"Restore Processing", op("Restore", "Processing"), false, "Restore Processing"},
		{"Restore Succeeded", op("Restore", "Succeeded"), true, "Restore Succeeded"},
		{"Reconcile Processing", op("Reconcile", "Processing"), true, "Reconcile"},
		{"Reconcile Error", op("Reconcile", "Error"), true, "Reconcile"},
		{"Reconcile Succeeded", op("Reconcile", "Succeeded"), true, "Reconcile"},
		{"Migrate Succeeded", op("Migrate", "Succeeded"), false, "migrated"},
		{"Delete Processing", op("Delete", "Processing"), false, "not settled"},
		{"waking up wins over Reconcile", upstream.Shoot{Hibernated: true, OpType: "Reconcile", OpState: "Processing"}, false, "waking up"},
		{"hibernation enabled wins over Reconcile", upstream.Shoot{HibernationEnabled: true}, false, "hibernat"},
	} {
		got, reason := ShouldProbe(cluster(tc.shoot))
		if got != tc.want || !strings.Contains(reason, tc.reason) {
			t.Errorf("%s: ShouldProbe = %v (%s), want %v (%s)", tc.name, got, reason, tc.want, tc.reason)
		}
	}
}

// The four states of hibernation, each with the decision dependency-watchdog's cluster
// controller makes (controllers/cluster/cluster_controller.go at v1.7.0):
//   - shouldStopProber removes the prober while HibernationIsEnabled (spec.hibernation.enabled
//     true), whatever status.hibernated says: hibernating and hibernated are not probed;
//   - canStartProber refuses to start one while spec.hibernation.enabled is not true but
//     status.hibernated (ShootStatus.IsHibernated, JSON "hibernated") still is, logging
//     "Cannot start probe. Cluster is waking up from hibernation": a waking shoot is not
//     probed, since its nodes are still being created and its leases say nothing yet;
//   - once status.hibernated is false (and lastOperation is a Reconcile) it starts one.
//
// depwatch pauses a namespace already probed in every state dependency-watchdog would not
// start a prober in (docs/coordinator.md lists that difference); dependency-watchdog reaches
// "waking up" only from "hibernated", where it has stopped the prober already.
func TestDecideProbeFollowsDependencyWatchdogThroughHibernation(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		shoot  upstream.Shoot
		probed bool
		want   ProbeAction
		reason string
	}{
		{"hibernating: stopped (shouldStopProber)", upstream.Shoot{HibernationEnabled: true}, true, ProbeForget, "hibernat"},
		{"hibernating, not probed yet: not started", upstream.Shoot{HibernationEnabled: true}, false, ProbeForget, "hibernat"},
		{"hibernated: stopped (shouldStopProber)", upstream.Shoot{HibernationEnabled: true, Hibernated: true}, true, ProbeForget, "hibernat"},
		{"hibernated, not probed yet: not started", upstream.Shoot{HibernationEnabled: true, Hibernated: true}, false, ProbeForget, "hibernat"},
		{"waking up: not started (canStartProber)", upstream.Shoot{Hibernated: true}, false, ProbeForget, "waking up"},
		{"waking up while a Reconcile runs: not started", upstream.Shoot{Hibernated: true, OpState: "Processing"}, false, ProbeForget, "waking up"},
		{"waking up, probed already: paused", upstream.Shoot{Hibernated: true}, true, ProbeForget, "waking up"},
		{"woken: started, first probe after initialDelay", upstream.Shoot{}, false, ProbeFirst, "first seen"},
		{"woken, probed already: probed", upstream.Shoot{}, true, ProbeMember, "probed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := ProbeInput{Watched: true, Cluster: cluster(tc.shoot), Probed: tc.probed, Now: now}
			got, why := DecideProbe(in)
			if got != tc.want || !strings.Contains(why, tc.reason) {
				t.Errorf("DecideProbe = %s (%s), want %s (%s)", got, why, tc.want, tc.reason)
			}
		})
	}
}

// A shoot's own nodeMonitorGracePeriod and per-pool nodeConditions override the config.
func TestShootSettingsOverrideTheConfig(t *testing.T) {
	shoot := func(kcm any, pools ...upstream.Pool) *upstream.Shoot {
		return &upstream.Shoot{NodeMonitorGracePeriod: kcm, Pools: pools}
	}
	pool := func(name string, conds ...any) upstream.Pool { return upstream.Pool{Name: name, NodeConditions: conds} }
	for _, tc := range []struct {
		name     string
		shoot    *upstream.Shoot // nil: no Cluster
		grace    time.Duration
		condJSON string
		problem  string
	}{
		{"no Cluster: the config's", nil, 40 * time.Second, "", ""},
		{"nothing set: the config's", shoot(nil, pool("a")), 40 * time.Second, "", ""},
		{"nodeMonitorGracePeriod set", shoot("2m0s", pool("a")), 2 * time.Minute, "", ""},
		{"nodeMonitorGracePeriod garbage: ignored", shoot("soon", pool("a")), 40 * time.Second, "", "not a duration"},
		{"nodeMonitorGracePeriod zero: ignored", shoot("0s", pool("a")), 40 * time.Second, "", "must be at least 10s"},
		{"nodeMonitorGracePeriod shorter than a lease renewal: ignored", shoot("1ns", pool("a")), 40 * time.Second, "", "must be at least 10s"},
		{"nodeMonitorGracePeriod of a lease renewal: taken", shoot("10s", pool("a")), 10 * time.Second, "", ""},
		{"nodeMonitorGracePeriod a number: ignored", shoot(int64(40), pool("a")), 40 * time.Second, "", "not a duration"},
		{"per-pool nodeConditions", shoot(nil, pool("a", "KernelDeadlock", "Custom"), pool("b")), 40 * time.Second, `{"a":["KernelDeadlock","Custom"]}`, ""},
		{"empty nodeConditions: defaults", shoot(nil, upstream.Pool{Name: "a", NodeConditions: []any{}}), 40 * time.Second, "", ""},
		{"nodeConditions not strings: ignored", shoot(nil, pool("a", int64(1))), 40 * time.Second, "", "not a list of strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s ShootSettings
			if tc.shoot == nil {
				s = ShootSettingsOf(nil)
			} else {
				s = ShootSettingsOf(cluster(*tc.shoot))
			}
			if got := s.Grace(40 * time.Second); got != tc.grace {
				t.Errorf("grace = %s, want %s", got, tc.grace)
			}
			if got := s.NodeConditionsJSON(); got != tc.condJSON {
				t.Errorf("NODE_CONDITIONS = %q, want %q", got, tc.condJSON)
			}
			if tc.problem == "" && len(s.Problems) > 0 || tc.problem != "" && !slices.ContainsFunc(s.Problems, func(p string) bool { return strings.Contains(p, tc.problem) }) {
				t.Errorf("problems %q, want %q", s.Problems, tc.problem)
			}
		})
	}
}

// A throttled probe Job pushes the namespace's next probe out by the back-off; a next probe
// due later anyway stays.
func TestThrottledProbeDefersTheNextProbe(t *testing.T) {
	finished := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		next        time.Time
		consecutive int
		want        time.Time
	}{
		{"first 429: 10s after it finished", finished.Add(5 * time.Second), 1, finished.Add(10 * time.Second)},
		{"third in a row: 40s", finished.Add(5 * time.Second), 3, finished.Add(40 * time.Second)},
		{"already due later: unchanged", finished.Add(time.Minute), 1, finished.Add(time.Minute)},
	} {
		if got := NextAfterThrottle(tc.next, finished, tc.consecutive); !got.Equal(tc.want) {
			t.Errorf("%s: next = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// runClusterInformer gives the harness's prober a synced Cluster informer holding objs.
func (h *probeHarness) runClusterInformer(objs ...*unstructured.Unstructured) cache.SharedIndexInformer {
	h.t.Helper()
	rObjs := make([]runtime.Object, len(objs))
	for i, o := range objs {
		rObjs[i] = o
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{ClusterGVR: "ClusterList"}, rObjs...)
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, ClusterGVR, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		h.t.Fatal("the Cluster informer did not sync")
	}
	h.c.mu.Lock()
	h.c.cluster = &clusterWatch{inf: inf, cancel: cancel}
	h.c.mu.Unlock()
	return inf
}

func probeJobEnv(j batchv1.Job) map[string]string {
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

// A probe Job runs with the shoot's settings as they were when it was launched; after a change
// of the Cluster, the next Job carries the new ones.
func TestProbeJobsCarryTheShootsSettingsAsTheyWereAtLaunch(t *testing.T) {
	h := newProbeHarness(t)
	h.namespace("shoot--p--a", map[string]string{"gardener.cloud/role": "shoot"})
	c := cluster(upstream.Shoot{NodeMonitorGracePeriod: "2m0s", Pools: []upstream.Pool{{Name: "pool-a", NodeConditions: []any{"Custom"}}}})
	inf := h.runClusterInformer(c)

	h.reconcile("shoot--p--a")
	h.now = h.now.Add(30 * time.Second)
	h.reconcile("shoot--p--a")
	list := h.jobs()
	if len(list) != 1 {
		t.Fatalf("%d Jobs, want 1", len(list))
	}
	if env := probeJobEnv(list[0]); env["NAMESPACE_SETTINGS"] != `{"shoot--p--a":{"nodeMonitorGrace":"2m0s","nodeConditions":{"pool-a":["Custom"]}}}` {
		t.Errorf("first Job: NAMESPACE_SETTINGS %q; want the shoot's grace 2m0s and pool-a's Custom", env["NAMESPACE_SETTINGS"])
	}

	// The shoot drops its own settings while the first Job runs: it keeps its environment.
	changed := cluster(upstream.Shoot{})
	if err := inf.GetIndexer().Update(changed); err != nil {
		t.Fatal(err)
	}
	h.finish(list[0].Name, batchv1.JobComplete, h.now)
	h.now = h.now.Add(10 * time.Second)
	h.reconcile("shoot--p--a")
	list = h.jobs()
	if len(list) != 2 {
		t.Fatalf("%d Jobs, want 2", len(list))
	}
	settings := []string{probeJobEnv(list[0])["NAMESPACE_SETTINGS"], probeJobEnv(list[1])["NAMESPACE_SETTINGS"]}
	slices.Sort(settings)
	if settings[0] != "" || !strings.Contains(settings[1], `"nodeMonitorGrace":"2m0s"`) || !strings.Contains(settings[1], `"pool-a":["Custom"]`) {
		t.Errorf("NAMESPACE_SETTINGS of the two Jobs = %q, want the shoot's before the change and none after", settings)
	}
	for _, j := range list {
		if g := probeJobEnv(j)["KCM_NODE_MONITOR_GRACE_DURATION"]; g != "40s" {
			t.Errorf("Job-wide grace %q, want the config's 40s (a shoot's own is per namespace)", g)
		}
	}
}

// A shoot being created is not probed; once its Create has Succeeded, it is.
func TestProberWaitsForTheShootsCreation(t *testing.T) {
	h := newProbeHarness(t)
	h.namespace("shoot--p--a", map[string]string{"gardener.cloud/role": "shoot"})
	c := cluster(upstream.Shoot{OpType: "Create", OpState: "Processing"})
	inf := h.runClusterInformer(c)
	for range 5 {
		h.reconcile("shoot--p--a")
		h.now = h.now.Add(30 * time.Second)
	}
	if n := len(h.jobs()); n != 0 {
		t.Fatalf("%d Jobs for a shoot being created", n)
	}
	done := cluster(upstream.Shoot{OpType: "Create", OpState: "Succeeded"})
	if err := inf.GetIndexer().Update(done); err != nil {
		t.Fatal(err)
	}
	h.reconcile("shoot--p--a")
	h.now = h.now.Add(30 * time.Second)
	h.reconcile("shoot--p--a")
	if n := len(h.jobs()); n != 1 {
		t.Fatalf("%d Jobs once the Create succeeded, want 1", n)
	}
}

// A finished probe pod that reports throttled pushes its namespace's next probe out by the
// back-off, doubling in a row; any other result ends the back-off.
func TestThrottledProbePodDefersTheNamespacesNextProbe(t *testing.T) {
	h := newProbeHarness(t)
	p := h.c
	p.leading.Store(true)
	ns := "shoot--p--a"
	p.mu.Lock()
	p.next[ns] = h.now.Add(5 * time.Second)
	p.mu.Unlock()
	pod := func(name, last string, at time.Time) jobs.Report {
		throttled := 0
		if last == "throttled" {
			throttled = 1
		}
		return finishedProbeRun(name, probe.Report{End: at, Results: map[string]int{last: 1},
			Namespaces: map[string]probe.NamespaceResult{ns: {Last: probe.Result(last), Throttled: throttled}}})
	}
	next := func() time.Time { p.mu.Lock(); defer p.mu.Unlock(); return p.next[ns] }
	finished := time.Now().Add(time.Hour).Truncate(time.Second) // after the coordinator started; reports carry seconds
	p.onReport(pod("a", "throttled", finished))
	if got := next(); !got.Equal(finished.Add(10 * time.Second)) {
		t.Errorf("after one throttled probe: next = %s, want 10s after it finished", got)
	}
	p.onReport(pod("b", "throttled", finished))
	if got := next(); !got.Equal(finished.Add(20 * time.Second)) {
		t.Errorf("after two in a row: next = %s, want 20s after", got)
	}
	p.onReport(pod("c", "healthy", finished))
	p.onReport(pod("d", "throttled", finished.Add(time.Minute)))
	if got := next(); !got.Equal(finished.Add(time.Minute + 10*time.Second)) {
		t.Errorf("a healthy probe must end the back-off: next = %s", got)
	}
}
