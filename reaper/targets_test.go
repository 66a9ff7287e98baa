package reaper

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func TestTargetsRoundTrip(t *testing.T) {
	in := []Target{
		{Namespace: "shoot--a", Service: "etcd-main", Selectors: []string{"app=kcm", "role in (a,b)"}},
		{Namespace: "shoot--b", Service: "kube-apiserver", Selectors: []string{"gardener.cloud/role=controlplane,!skip"}},
		{Namespace: "shoot--b", Service: "kube-apiserver", PodNamespace: "tools", Selectors: []string{"app=dashboard"}},
	}
	out, err := ParseTargets(TargetsValue(in))
	if err != nil {
		t.Fatal(err)
	}
	if TargetsValue(out) != TargetsValue(in) {
		t.Fatalf("round trip changed the targets:\n in: %s\nout: %s", TargetsValue(in), TargetsValue(out))
	}
}

func TestTargetsRefusedWithAClearReason(t *testing.T) {
	for _, tc := range []struct{ name, env, want string }{
		{"not JSON", `shoot/etcd`, "must be a JSON list"},
		{"empty list", `[]`, "at least one target"},
		{"unknown field", `[{"namespace":"a","service":"b","selectors":["x=y"],"ns":"c"}]`, `unknown field "ns"`},
		{"bad namespace", `[{"namespace":"A_b","service":"etcd","selectors":["x=y"]}]`, `namespace "A_b"`},
		{"bad service", `[{"namespace":"a","service":"1etcd","selectors":["x=y"]}]`, `service "1etcd"`},
		{"no selector", `[{"namespace":"a","service":"etcd"}]`, "needs at least one pod selector"},
		{"empty selector", `[{"namespace":"a","service":"etcd","selectors":[""]}]`, "would select every pod"},
		{"bad selector", `[{"namespace":"a","service":"etcd","selectors":["a in (b"]}]`, "not a valid label selector"},
		{"service twice", `[{"namespace":"a","service":"etcd","selectors":["x=y"]},{"namespace":"a","service":"etcd","selectors":["z=y"]}]`, "listed twice"},
		{"service twice for one namespace of dependents", `[{"namespace":"a","service":"etcd","selectors":["x=y"],"podNamespace":"b"},{"namespace":"a","service":"etcd","selectors":["z=y"],"podNamespace":"b"}]`, "a/etcd (dependents in b) is listed twice"},
		{"bad podNamespace", `[{"namespace":"a","service":"etcd","selectors":["x=y"],"podNamespace":"B"}]`, `podNamespace "B"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadOptions(envOf(map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "TARGETS": tc.env}))
			if err == nil || !strings.Contains(err.Error(), "TARGETS") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want TARGETS and %q", err, tc.want)
			}
		})
	}
}

func TestTargetsCannotBeMixedWithASingleServiceRun(t *testing.T) {
	targets := `[{"namespace":"a","service":"etcd","selectors":["x=y"]}]`
	for _, name := range []string{"NAMESPACE", "START_WHEN_READY", "LABEL_SELECTORS"} {
		val := map[string]string{"NAMESPACE": "a", "START_WHEN_READY": "a/etcd", "LABEL_SELECTORS": `["x=y"]`}[name]
		_, err := LoadOptions(envOf(map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "TARGETS": targets, name: val}))
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "cannot be set with TARGETS") {
			t.Errorf("%s with TARGETS: err = %v", name, err)
		}
	}
	o, err := LoadOptions(envOf(map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "TARGETS": targets, "MAX_WAIT": "10m", "EXCLUDE_LABEL_KEY": "keep", "EXCLUDE_LABEL_VALUES": "yes"}))
	if err != nil {
		t.Fatal(err)
	}
	one := o.forTarget(o.Targets[0])
	if one.Namespace != "a" || one.StartWhenReady.String() != "a/etcd" || one.MaxWait != 10*time.Minute || len(one.Targets) != 0 {
		t.Fatalf("target run = ns %q gate %v wait %s targets %d", one.Namespace, one.StartWhenReady, one.MaxWait, len(one.Targets))
	}
	if got := one.Selectors[0].String(); got != "keep notin (yes),x=y" {
		t.Errorf("target selector = %q: the run's label filters must apply to every target", got)
	}
	elsewhere := o.forTarget(Target{Namespace: "a", Service: "etcd", PodNamespace: "b", Selectors: []string{"x=y"}})
	if elsewhere.Namespace != "b" || elsewhere.StartWhenReady.String() != "a/etcd" {
		t.Errorf("a target with dependents in b: run in %q gated on %v, want b gated on a/etcd", elsewhere.Namespace, elsewhere.StartWhenReady)
	}
}

// TestEachTargetOpensWithItsOwnService: one run covers two services; only the one that is
// Ready gets its crash-looping dependent restarted, the other keeps waiting, and when it
// returns its own dependent is restarted too.
func TestEachTargetOpensWithItsOwnService(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(
		endpointSlice("shoot-a", "etcd", ptr.To(true)),
		endpointSlice("shoot-b", "etcd", ptr.To(false)),
		newPod("shoot-a", "kcm", withLabel("app", "kcm"), crashLooping),
		newPod("shoot-b", "kcm", withLabel("app", "kcm"), crashLooping),
		newPod("shoot-b", "other", withLabel("app", "other"), crashLooping),
	)
	o := mustOptions(t, map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff", "WATCH": "true", "SCHEDULE": "@every 1h", "RUN_DURATION": "1h",
		"TARGETS": TargetsValue([]Target{
			{Namespace: "shoot-a", Service: "etcd", Selectors: []string{"app=kcm"}},
			{Namespace: "shoot-b", Service: "etcd", Selectors: []string{"app=kcm"}},
		}),
	})
	log, hook := quietLogger()
	done := make(chan struct{})
	var sum Summary
	var runErr error
	go func() { sum, runErr = Run(ctx, client, o, log); close(done) }()
	deleted := func(ns string) int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" && a.GetNamespace() == ns {
				n++
			}
		}
		return n
	}
	waitFor(t, "shoot-a's dependent to be restarted", func() bool { return deleted("shoot-a") == 1 })
	time.Sleep(100 * time.Millisecond) // room to (wrongly) reap in shoot-b
	if n := deleted("shoot-b"); n != 0 {
		t.Fatalf("%d pods of shoot-b restarted while its service was down", n)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("shoot-b").Update(ctx, endpointSlice("shoot-b", "etcd", ptr.To(true)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "shoot-b's dependent to be restarted", func() bool { return deleted("shoot-b") == 1 })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if runErr != nil || sum.Reaped != 2 || sum.NotStarted {
		t.Fatalf("Run = %+v, %v; want 2 reaped (the pod outside the selector stays)", sum, runErr)
	}
	var targets []string
	for _, e := range hook.AllEntries() {
		if e.Message == "reaping pod" {
			targets = append(targets, e.Data["target"].(string))
		}
	}
	if strings.Join(targets, ",") != "shoot-a/etcd,shoot-b/etcd" {
		t.Errorf("reaping lines name targets %v; every line must say which service it is for", targets)
	}
}

// TestATargetsDependentsInAnotherNamespaceWaitForTheServiceInItsOwn: a service in data with
// dependents in data and in shop (two targets of one service) restarts neither while it is
// down, and both once it is Ready; pods of shop its selector does not match stay.
func TestATargetsDependentsInAnotherNamespaceWaitForTheServiceInItsOwn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(
		endpointSlice("data", "postgres", ptr.To(false)),
		newPod("data", "reports", withLabel("app", "reports"), crashLooping),
		newPod("shop", "web", withLabel("app", "web"), crashLooping),
		newPod("shop", "other", withLabel("app", "other"), crashLooping),
	)
	o := mustOptions(t, map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff", "WATCH": "true", "SCHEDULE": "@every 1h", "RUN_DURATION": "1h",
		"TARGETS": TargetsValue([]Target{
			{Namespace: "data", Service: "postgres", Selectors: []string{"app=reports"}},
			{Namespace: "data", Service: "postgres", PodNamespace: "shop", Selectors: []string{"app=web"}},
		}),
	})
	synced := make(chan struct{})
	o.onSynced = func() { close(synced) }
	log, hook := quietLogger()
	done := make(chan struct{})
	var sum Summary
	var runErr error
	go func() { sum, runErr = Run(ctx, client, o, log); close(done) }()
	deleted := func() []string {
		var out []string
		for _, a := range client.Actions() {
			if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
				out = append(out, d.GetNamespace()+"/"+d.GetName())
			}
		}
		return out
	}
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("the run's caches never synced")
	}
	time.Sleep(100 * time.Millisecond) // room to (wrongly) reap while the service is down
	if d := deleted(); len(d) != 0 {
		t.Fatalf("restarted %v while data/postgres was down", d)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("data").Update(ctx, endpointSlice("data", "postgres", ptr.To(true)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both namespaces' dependents to be restarted", func() bool { return len(deleted()) == 2 })
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if d := deleted(); runErr != nil || sum.Reaped != 2 || !slices.Contains(d, "data/reports") || !slices.Contains(d, "shop/web") {
		t.Fatalf("Run = %+v, %v, deleted %v; want data/reports and shop/web", sum, runErr, d)
	}
	var targets []string
	for _, e := range hook.AllEntries() {
		if e.Message == "reaping pod" {
			targets = append(targets, e.Data["target"].(string))
		}
	}
	slices.Sort(targets)
	if strings.Join(targets, ",") != "data/postgres,data/postgres (dependents in shop)" {
		t.Errorf("reaping lines name targets %v", targets)
	}
}
