package reaper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/internal/podstate"
)

func endpointSlice(ns, svc string, ready ...*bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-x1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: r}})
	}
	return s
}

// gatedRun starts Run in the background with a gate on svc in namespace "shoot".
type gatedRun struct {
	done   chan struct{}
	synced chan struct{}
	sum    Summary
	err    error
	hook   *logtest.Hook
}

func startGatedRun(t *testing.T, ctx context.Context, client *fake.Clientset, env map[string]string) *gatedRun {
	t.Helper()
	base := map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff", "WATCH": "true", "NAMESPACE": "shoot",
		"LABEL_SELECTORS": `["app=kcm"]`, "SCHEDULE": "@every 1h", "START_WHEN_READY": "etcd",
	}
	for k, v := range env {
		base[k] = v
	}
	o := mustOptions(t, base)
	g := &gatedRun{done: make(chan struct{}), synced: make(chan struct{})}
	o.onSynced = func() { close(g.synced) }
	log, hook := quietLogger()
	g.hook = hook
	go func() { g.sum, g.err = Run(ctx, client, o, log); close(g.done) }()
	return g
}

func (g *gatedRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}

func (g *gatedRun) waitSynced(t *testing.T) {
	t.Helper()
	select {
	case <-g.synced:
	case <-time.After(10 * time.Second):
		t.Fatal("the gate's informer never synced")
	}
}

func (g *gatedRun) messages() string {
	var b strings.Builder
	for _, e := range g.hook.AllEntries() {
		b.WriteString(e.Message + "\n")
	}
	return b.String()
}

func deletes(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			n++
		}
	}
	return n
}

// TestGateOpensOnEndpointSliceUpdate: while the service is down nothing is reaped, even a
// crash-looping pod; the update that gives it a ready endpoint opens the gate, and the pod
// is reaped at once; the log tells the story.
func TestGateOpensOnEndpointSliceUpdate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(
		endpointSlice("shoot", "etcd", ptr.To(false)),
		endpointSlice("shoot", "other", ptr.To(true)), // another service's readiness does not count
		newPod("shoot", "kcm", withLabel("app", "kcm"), crashLooping),
	)
	run := startGatedRun(t, ctx, client, map[string]string{"RUN_DURATION": "1h"})
	run.waitSynced(t)
	time.Sleep(100 * time.Millisecond) // room to (wrongly) reap
	if n := deletes(client); n != 0 {
		t.Fatalf("%d pods deleted before the service was Ready", n)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("shoot").Update(ctx, endpointSlice("shoot", "etcd", ptr.To(false), nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the crash-looping pod to be reaped", func() bool { return deletes(client) == 1 })
	cancel()
	run.wait(t)
	if run.err != nil || run.sum.Reaped != 1 || run.sum.NotStarted {
		t.Fatalf("Run = %+v, %v", run.sum, run.err)
	}
	msgs := run.messages()
	for _, want := range []string{"Reaper armed at ", "waiting for service shoot/etcd to be Ready (at most 6h0m0s)", "Service shoot/etcd is Ready at ", "(waited ", "reaping pod", "Reaper run finished"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("log lacks %q:\n%s", want, msgs)
		}
	}
	// The gate lists and watches only the service's slices, in its namespace.
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "endpointslices" {
			if a.GetNamespace() != "shoot" {
				t.Errorf("%s endpointslices in %q", a.GetVerb(), a.GetNamespace())
			}
			if l, ok := a.(k8stesting.ListActionImpl); ok && l.ListOptions.LabelSelector != "kubernetes.io/service-name=etcd" {
				t.Errorf("listed with selector %q", l.ListOptions.LabelSelector)
			}
		}
	}
}

// TestGateAlreadyReadyOpensAtOnce: an outage that ended before the Job started: the first
// cycle runs at once and RUN_DURATION counts from then.
func TestGateAlreadyReadyOpensAtOnce(t *testing.T) {
	client := fake.NewClientset(
		func() *discoveryv1.EndpointSlice { // two slices: one not ready, one with a nil ready (= ready)
			s := endpointSlice("shoot", "etcd", ptr.To(false))
			s.Name = "etcd-x2"
			return s
		}(),
		endpointSlice("shoot", "etcd", nil),
		newPod("shoot", "kcm", withLabel("app", "kcm"), crashLooping),
	)
	start := time.Now()
	run := startGatedRun(t, context.Background(), client, map[string]string{"RUN_DURATION": "200ms", "START_WHEN_READY": "shoot/etcd", "NAMESPACE": "shoot"})
	run.wait(t)
	if run.err != nil || run.sum.Reaped != 1 || run.sum.Cycles != 1 {
		t.Fatalf("Run = %+v, %v", run.sum, run.err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("run took %s", took)
	}
}

// TestGateMaxWaitExpiresWithoutReaping: MAX_WAIT passes first: exit without error, nothing
// listed or reaped, a clear log line and summary.
func TestGateMaxWaitExpiresWithoutReaping(t *testing.T) {
	client := fake.NewClientset(
		endpointSlice("shoot", "etcd", ptr.To(false)),
		newPod("shoot", "kcm", withLabel("app", "kcm"), crashLooping),
	)
	run := startGatedRun(t, context.Background(), client, map[string]string{"MAX_WAIT": "150ms"})
	run.wait(t)
	if run.err != nil || !run.sum.NotStarted || run.sum.Reaped != 0 || run.sum.Cycles != 0 {
		t.Fatalf("Run = %+v, %v", run.sum, run.err)
	}
	if n := deletes(client); n != 0 {
		t.Errorf("%d pods deleted", n)
	}
	if !strings.Contains(run.messages(), "MAX_WAIT 150ms elapsed and service shoot/etcd never became Ready; nothing was reaped") {
		t.Errorf("log:\n%s", run.messages())
	}
	if s := run.sum.String(); !strings.HasPrefix(s, "never started") {
		t.Errorf("summary = %q", s)
	}
	if last := run.hook.LastEntry(); !strings.Contains(last.Message, "Reaper run finished (MAX_WAIT") {
		t.Errorf("last line = %q", last.Message)
	}
}

// TestGateCancelWhileWaiting: SIGTERM while armed ends the run cleanly, nothing reaped.
func TestGateCancelWhileWaiting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(endpointSlice("shoot", "etcd"), newPod("shoot", "kcm", withLabel("app", "kcm"), crashLooping))
	run := startGatedRun(t, ctx, client, nil)
	run.waitSynced(t)
	cancel()
	run.wait(t)
	if run.err != nil || !run.sum.NotStarted || deletes(client) != 0 {
		t.Fatalf("Run = %+v, %v", run.sum, run.err)
	}
	if last := run.hook.LastEntry(); !strings.Contains(last.Message, "asked to stop while waiting for service shoot/etcd") {
		t.Errorf("last line = %q", last.Message)
	}
}

// TestGatePausesWhileTheServiceIsDownAgain: after the gate opened, a flap (down again) pauses
// reaping; Ready again resumes it with a cycle.
func TestGatePausesWhileTheServiceIsDownAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(endpointSlice("shoot", "etcd", ptr.To(true)))
	run := startGatedRun(t, ctx, client, map[string]string{"RUN_DURATION": "1h"})
	run.waitSynced(t)
	slices := client.DiscoveryV1().EndpointSlices("shoot")
	if _, err := slices.Update(ctx, endpointSlice("shoot", "etcd", ptr.To(false)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pause", func() bool { return strings.Contains(run.messages(), "reaping paused") })
	pods := client.CoreV1().Pods("shoot")
	if _, err := pods.Create(ctx, newPod("shoot", "kcm", withLabel("app", "kcm"), crashLooping), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if n := deletes(client); n != 0 {
		t.Fatalf("%d pods reaped while the service was down again", n)
	}
	if _, err := slices.Update(ctx, endpointSlice("shoot", "etcd", ptr.To(true)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod reaped after the service is Ready again", func() bool { return deletes(client) == 1 })
	cancel()
	run.wait(t)
	if run.err != nil || run.sum.Reaped != 1 {
		t.Fatalf("Run = %+v, %v", run.sum, run.err)
	}
}

// TestGateListFailureFailsTheRun: without the right to read EndpointSlices the run cannot do
// its job: an error (exit 1), nothing reaped.
func TestGateListFailureFailsTheRun(t *testing.T) {
	client := fake.NewClientset(newPod("shoot", "kcm", withLabel("app", "kcm"), crashLooping))
	client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", errors.New("no RBAC"))
	})
	run := startGatedRun(t, context.Background(), client, nil)
	run.wait(t)
	if !apierrors.IsForbidden(run.err) || deletes(client) != 0 {
		t.Fatalf("Run = %+v, %v", run.sum, run.err)
	}
}

// TestGateEachReturnGetsAFreshRunDuration: a service that flaps (Ready, down, Ready) gives its
// second return a full RUN_DURATION from that return, not what was left of the first window:
// a pod that starts crash-looping after the first window would have ended is still reaped,
// and the run ends one RUN_DURATION after the return.
func TestGateEachReturnGetsAFreshRunDuration(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(endpointSlice("shoot", "etcd", ptr.To(true)))
	const window = time.Second
	run := startGatedRun(t, ctx, client, map[string]string{"RUN_DURATION": window.String()})
	run.waitSynced(t)
	opened := time.Now()
	slices := client.DiscoveryV1().EndpointSlices("shoot")
	time.Sleep(window / 2)
	if _, err := slices.Update(ctx, endpointSlice("shoot", "etcd", ptr.To(false)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pause", func() bool { return strings.Contains(run.messages(), "reaping paused") })
	returned := time.Now() // the window restarts after this, when the gate sees the update
	if _, err := slices.Update(ctx, endpointSlice("shoot", "etcd", ptr.To(true)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resume", func() bool { return strings.Contains(run.messages(), "fresh RUN_DURATION") })

	// Past the end of the first window, well inside the second.
	time.Sleep(time.Until(opened.Add(window + 200*time.Millisecond)))
	if _, err := client.CoreV1().Pods("shoot").Create(ctx, newPod("shoot", "kcm", withLabel("app", "kcm"), crashLooping), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run.wait(t)
	ended := time.Now()
	if run.err != nil || run.sum.Reaped != 1 {
		t.Fatalf("Run = %+v, %v: the pod crash-looping after the first window, inside the second, must be reaped", run.sum, run.err)
	}
	if ended.Before(returned.Add(window)) || ended.After(returned.Add(window+time.Second)) {
		t.Errorf("run ended %v after the return, want RUN_DURATION %v after it", ended.Sub(returned), window)
	}
}

// TestGateIgnoresSlicesOfOtherServices: a slice labelled for another service never opens the
// gate, should a lenient API return it.
func TestGateIgnoresSlicesOfOtherServices(t *testing.T) {
	ref := ServiceRef{Namespace: "shoot", Name: "etcd"}
	tr, err := newServiceTracker(fake.NewClientset(), map[ServiceRef]podstate.ReadyWhen{ref: podstate.ReadyAny}, func(ServiceRef) {})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*discoveryv1.EndpointSlice{endpointSlice("shoot", "other", ptr.To(true)), endpointSlice("shoot", "etcd", ptr.To(false))} {
		if err := tr.informer.GetIndexer().Add(s); err != nil {
			t.Fatal(err)
		}
	}
	tr.resync()
	if v := tr.view(ref); !v.Known || v.Ready {
		t.Errorf("view = %+v: a ready slice of another service opened the gate", v)
	}
}
