package reaper

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func ownedBy(kind, name, uid string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true),
		})
	}
}

func createdAt(t time.Time) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

func TestCooldownDecidesPerOwnerFromItsLastRoundAndThePodsAge(t *testing.T) {
	const period = time.Minute
	opened := t0
	old := t0.Add(-10 * time.Minute)
	tests := []struct {
		name    string
		period  time.Duration
		round   bool // owner "rs" has a round opened at t0
		owner   types.UID
		created time.Time
		now     time.Time
		want    verdict
	}{
		{"off: every match is reaped", 0, true, "rs", t0.Add(time.Second), t0.Add(time.Second), verdictOpenRound},
		{"no round yet: reap and open one", period, false, "rs", old, t0, verdictOpenRound},
		{"another owner's round does not count", period, true, "other", t0.Add(time.Second), t0.Add(2 * time.Second), verdictOpenRound},
		{"a replacement created after the round opened waits", period, true, "rs", t0.Add(time.Second), t0.Add(20 * time.Second), verdictDefer},
		{"a replacement still waits just before the cooldown ends", period, true, "rs", t0.Add(time.Second), t0.Add(period - time.Nanosecond), verdictDefer},
		{"the cooldown ended: a new round", period, true, "rs", t0.Add(time.Second), t0.Add(period), verdictOpenRound},
		{"a sibling that predates the round is reaped with it", period, true, "rs", old, t0.Add(30 * time.Second), verdictInRound},
		{"a pod created within the margin before the round counts as a replacement", period, true, "rs", opened.Add(-creationMargin), t0.Add(time.Second), verdictDefer},
		{"a pod created just beyond the margin is a sibling", period, true, "rs", opened.Add(-creationMargin - time.Second), t0.Add(time.Second), verdictInRound},
		{"no creation time (never from the API): treated as a replacement", period, true, "rs", time.Time{}, t0.Add(time.Second), verdictDefer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCooldown(tc.period)
			if tc.round {
				c.reaped("rs", verdictOpenRound, opened)
			}
			if got := c.decide(tc.owner, tc.created, tc.now); got != tc.want {
				t.Errorf("decide = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCooldownOpensRoundsOnlyOnOpenRoundVerdicts(t *testing.T) {
	c := newCooldown(time.Minute)
	c.reaped("rs", verdictOpenRound, t0)
	c.reaped("rs", verdictInRound, t0.Add(30*time.Second)) // a sibling does not move the round
	if got := c.until("rs"); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("round ends %s, want %s", got, t0.Add(time.Minute))
	}
	off := newCooldown(0)
	off.reaped("rs", verdictOpenRound, t0)
	if len(off.rounds) != 0 {
		t.Error("a cooldown that is off remembers rounds")
	}
}

func TestCooldownCountsEachDeferredPodOnceAndLogsOncePerRound(t *testing.T) {
	c := newCooldown(time.Minute)
	c.reaped("rs", verdictOpenRound, t0)
	steps := []struct {
		pod                    types.UID
		wantPod, wantFirstLine bool
	}{
		{"a2", true, true},
		{"a2", false, false}, // the same pod on a later event
		{"b2", true, false},  // another replacement in the same round: counted, not logged
	}
	for i, s := range steps {
		p, o := c.deferred("rs", s.pod)
		if p != s.wantPod || o != s.wantFirstLine {
			t.Errorf("step %d (%s): firstForPod=%v firstForOwner=%v, want %v %v", i, s.pod, p, o, s.wantPod, s.wantFirstLine)
		}
	}
	c.reaped("rs", verdictOpenRound, t0.Add(time.Minute)) // the next round
	if p, o := c.deferred("rs", "a2"); !p || !o {
		t.Errorf("a new round: firstForPod=%v firstForOwner=%v, want both", p, o)
	}
}

func TestCooldownPruneForgetsEndedRoundsAndResetForgetsAll(t *testing.T) {
	c := newCooldown(time.Minute)
	c.reaped("old", verdictOpenRound, t0)
	c.reaped("new", verdictOpenRound, t0.Add(30*time.Second))
	c.prune(t0.Add(time.Minute))
	if _, ok := c.rounds["old"]; ok {
		t.Error("an ended round was kept")
	}
	if _, ok := c.rounds["new"]; !ok {
		t.Error("an open round was pruned")
	}
	c.reset()
	if got := c.decide("new", t0.Add(31*time.Second), t0.Add(40*time.Second)); got != verdictOpenRound {
		t.Errorf("after reset: %v, want verdictOpenRound (%v)", got, verdictOpenRound)
	}
}

func TestOwnerIsTheControllerOrTheBarePodItself(t *testing.T) {
	tests := []struct {
		name     string
		pod      *corev1.Pod
		uid      types.UID
		wantDesc string
	}{
		{"replica set", newPod("ns", "kcm-1", ownedBy("ReplicaSet", "kcm-5d8f", "rs-uid")), "rs-uid", "ReplicaSet ns/kcm-5d8f"},
		{"bare pod", newPod("ns", "solo"), "ns/solo", "pod ns/solo"},
		{"an owner that is not the controller does not count", newPod("ns", "p", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ConfigMap", Name: "c", UID: "cm-uid"}}
		}), "ns/p", "pod ns/p"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ownerOf(tc.pod)
			if o.uid != tc.uid || o.desc != tc.wantDesc {
				t.Errorf("ownerOf = %+v, want %s %q", o, tc.uid, tc.wantDesc)
			}
		})
	}
}

func TestLoadOptionsReapCooldown(t *testing.T) {
	base := map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff"}
	tests := []struct {
		name    string
		value   *string
		want    time.Duration
		problem string
	}{
		{"unset: off, as pod-reaper", nil, 0, ""},
		{"zero: off", ptr.To("0s"), 0, ""},
		{"a duration", ptr.To("90s"), 90 * time.Second, ""},
		{"surrounding spaces", ptr.To(" 1m "), time.Minute, ""},
		{"negative", ptr.To("-1s"), 0, `REAP_COOLDOWN="-1s": must not be negative`},
		{"garbage", ptr.To("soon"), 0, `REAP_COOLDOWN="soon": must be a Go duration`},
		{"a bare number", ptr.To("60"), 0, `REAP_COOLDOWN="60": must be a Go duration`},
		{"empty", ptr.To(""), 0, `REAP_COOLDOWN="": must be a Go duration`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			if tc.value != nil {
				env["REAP_COOLDOWN"] = *tc.value
			}
			o, err := LoadOptions(envOf(env))
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("err = %v, want one containing %q", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.ReapCooldown != tc.want {
				t.Errorf("ReapCooldown = %s, want %s", o.ReapCooldown, tc.want)
			}
		})
	}
}

func TestRunRejectsANegativeReapCooldownNotFromLoadOptions(t *testing.T) {
	t.Parallel() // seconds of work or waiting, none of it timed: the others need not wait for it
	o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff"})
	o.ReapCooldown = -time.Second
	client := fake.NewClientset(newPod("a", "p", crashLooping))
	log, _ := quietLogger()
	if _, err := Run(context.Background(), client, o, log); err == nil || !strings.Contains(err.Error(), "REAP_COOLDOWN") {
		t.Fatalf("Run = %v, want an error naming REAP_COOLDOWN", err)
	}
	if !podExists(t, client, "a", "p") {
		t.Error("a pod was reaped with invalid options")
	}
}

// fakeClock is an injectable clock the test moves; safe to read from Run's goroutine.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(at time.Time) *fakeClock {
	c := &fakeClock{}
	c.set(at)
	return c
}
func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) set(at time.Time)    { c.ns.Store(at.UnixNano()) }
func (c *fakeClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// replicaSet plays a ReplicaSet controller whose pods always crash-loop: after each cycle it
// re-creates the pods the reaper deleted, stamped with the (simulated) time.
type replicaSet struct {
	name, uid string
	replicas  int
	next      int
}

func (rs *replicaSet) reconcile(t *testing.T, client *fake.Clientset, ns string, now time.Time) {
	t.Helper()
	list, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := 0
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && string(ref.UID) == rs.uid {
			have++
		}
	}
	for ; have < rs.replicas; have++ {
		rs.next++
		name := fmt.Sprintf("%s-%d", rs.name, rs.next)
		p := newPod(ns, name, withLabel("app", rs.name), ownedBy("ReplicaSet", rs.name, rs.uid), createdAt(now), crashLooping)
		if _, err := client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func deferredLines(hook *logtest.Hook) []map[string]any {
	var out []map[string]any
	for _, e := range hook.AllEntries() {
		if e.Data["action"] == "deferred" {
			out = append(out, e.Data)
		}
	}
	return out
}

// TestRunReapsAForeverCrashLoopingOwnerAtMostOncePerCooldown simulates a 5-minute weeder run
// (a cycle every 10 s of simulated time, REAP_COOLDOWN 1m) against a 3-replica ReplicaSet whose
// pods crash-loop forever: each round reaps all three replicas, rounds are a cooldown apart,
// so it is exactly 1 + floor(5m / 1m) = 6 rounds and 18 deletions, never more; replacements in
// between are deferred, logged once per round. A bare crash-looping pod is reaped once.
func TestRunReapsAForeverCrashLoopingOwnerAtMostOncePerCooldown(t *testing.T) {
	const (
		runDuration = 5 * time.Minute
		cooldown    = time.Minute
		every       = 10 * time.Second
		replicas    = 3
	)
	clock := newFakeClock(t0)
	client := fake.NewClientset(newPod("shoot", "solo", withLabel("app", "solo"), createdAt(t0.Add(-time.Hour)), crashLooping))
	rs := &replicaSet{name: "kcm", uid: "rs-kcm", replicas: replicas}
	rs.reconcile(t, client, "shoot", t0.Add(-time.Hour)) // crash-looping since the outage
	o := mustOptions(t, map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff", "NAMESPACE": "shoot", "REAP_COOLDOWN": cooldown.String(),
	})
	o.now = clock.now
	deletedAt := map[time.Duration]int{}
	client.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.DeleteAction).GetName() != "solo" {
			deletedAt[clock.now().Sub(t0)]++
		}
		return false, nil, nil
	})
	log, hook := quietLogger()
	r := newRunner(context.Background(), client, newEvents(client, log), o, log)

	for elapsed := time.Duration(0); elapsed <= runDuration; elapsed += every {
		clock.set(t0.Add(elapsed))
		r.cycleOver(context.Background(), r.collect)
		rs.reconcile(t, client, "shoot", clock.now().Add(time.Second)) // replacements a moment later
	}

	rounds := 1 + int(runDuration/cooldown)
	bound := replicas * rounds
	if r.sum.Reaped != bound+1 {
		t.Errorf("reaped %d pods, want %d (%d rounds of %d replicas) + the bare pod", r.sum.Reaped, bound+1, rounds, replicas)
	}
	// Deletions by simulated time: all replicas together, in rounds a cooldown apart.
	want := map[time.Duration]int{}
	for k := 0; k < rounds; k++ {
		want[time.Duration(k)*cooldown] = replicas
	}
	if fmt.Sprint(deletedAt) != fmt.Sprint(want) {
		t.Errorf("deletions of the ReplicaSet's pods by time into the run = %v, want %v", deletedAt, want)
	}
	lines := deferredLines(hook)
	if len(lines) != rounds-1 {
		t.Errorf("%d deferral lines, want one per round that saw a replacement crash-loop (%d)", len(lines), rounds-1)
	}
	if r.sum.Deferred != replicas*(rounds-1) {
		t.Errorf("Summary.Deferred = %d, want each replacement counted once per round: %d", r.sum.Deferred, replicas*(rounds-1))
	}
	if len(lines) > 0 {
		l := lines[0]
		if l["owner"] != "ReplicaSet shoot/kcm" || l["reason"] != "reap-cooldown" || l["namespace"] != "shoot" || l["cooldown"] != "1m0s" {
			t.Errorf("deferral line = %v", l)
		}
	}
	if !strings.Contains(r.sum.String(), fmt.Sprintf("deferred=%d", r.sum.Deferred)) {
		t.Errorf("summary %q does not count the deferred pods", r.sum)
	}
}

// TestRunCooldownOffKeepsPodReaperBehaviour: without REAP_COOLDOWN the same owner is reaped
// on every cycle, as pod-reaper does (the churn the cooldown exists to bound).
func TestRunCooldownOffKeepsPodReaperBehaviour(t *testing.T) {
	clock := newFakeClock(t0)
	client := fake.NewClientset()
	rs := &replicaSet{name: "kcm", uid: "rs-kcm", replicas: 1}
	rs.reconcile(t, client, "shoot", t0.Add(-time.Hour))
	o := mustOptions(t, map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "NAMESPACE": "shoot"})
	o.now = clock.now
	log, hook := quietLogger()
	r := newRunner(context.Background(), client, newEvents(client, log), o, log)
	for i := 0; i < 5; i++ {
		clock.add(10 * time.Second)
		r.cycleOver(context.Background(), r.collect)
		rs.reconcile(t, client, "shoot", clock.now())
	}
	if r.sum.Reaped != 5 || r.sum.Deferred != 0 || len(deferredLines(hook)) != 0 {
		t.Errorf("summary = %+v, want 5 reaped and nothing deferred", r.sum)
	}
}

// TestRunDeferredPodsDoNotUseUpMaxPods: MAX_PODS counts pods reaped; a deferred pod leaves
// the cycle's room to the next match.
func TestRunDeferredPodsDoNotUseUpMaxPods(t *testing.T) {
	clock := newFakeClock(t0)
	client := fake.NewClientset()
	rs := &replicaSet{name: "kcm", uid: "rs-kcm", replicas: 1}
	rs.reconcile(t, client, "shoot", t0.Add(-time.Hour))
	o := mustOptions(t, map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff", "NAMESPACE": "shoot", "REAP_COOLDOWN": "1m", "MAX_PODS": "1",
	})
	o.now = clock.now
	log, _ := quietLogger()
	r := newRunner(context.Background(), client, newEvents(client, log), o, log)
	r.cycleOver(context.Background(), r.collect) // reaps kcm-1, opens the round
	rs.reconcile(t, client, "shoot", clock.now())
	// A bare pod that sorts after kcm-2 (namespace/name order) starts crash-looping too.
	if _, err := client.CoreV1().Pods("shoot").Create(context.Background(),
		newPod("shoot", "zz-solo", createdAt(t0.Add(-time.Hour)), crashLooping), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.add(10 * time.Second)
	r.cycleOver(context.Background(), r.collect)
	if !podExists(t, client, "shoot", "kcm-2") || podExists(t, client, "shoot", "zz-solo") {
		t.Errorf("want kcm-2 deferred and zz-solo reaped under MAX_PODS=1")
	}
	if r.sum.Reaped != 2 || r.sum.Deferred != 1 {
		t.Errorf("summary = %+v", r.sum)
	}
}

// TestWatchReapsAnOwnersReplicasInOneRoundAndDefersItsReplacements: in WATCH mode a sibling
// that starts crash-looping after the round opened is still reaped with it; the replacement of
// a reaped pod is deferred (one line, however many updates) until the cooldown has passed,
// then reaped on its next update.
func TestWatchReapsAnOwnersReplicasInOneRoundAndDefersItsReplacements(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old := t0.Add(-time.Hour)
	rsPod := func(name string, created time.Time, opts ...podOpt) *corev1.Pod {
		return newPod("shoot", name, append([]podOpt{withLabel("app", "kcm"), ownedBy("ReplicaSet", "kcm", "rs-kcm"), createdAt(created)}, opts...)...)
	}
	client := fake.NewClientset(rsPod("kcm-a", old), rsPod("kcm-b", old))
	clock := newFakeClock(t0)
	o := mustOptions(t, map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff", "WATCH": "true", "NAMESPACE": "shoot",
		"LABEL_SELECTOR": "app=kcm", "SCHEDULE": "@every 1h", "REAP_COOLDOWN": "1m",
	})
	o.now = clock.now
	synced := make(chan struct{})
	o.onSynced = func() { close(synced) }
	log, hook := quietLogger()
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
		return func() bool { _, err := pods.Get(ctx, name, metav1.GetOptions{}); return err != nil }
	}

	update(rsPod("kcm-a", old, crashLooping)) // opens the round at t0
	waitFor(t, "kcm-a to be reaped", gone("kcm-a"))

	// The controller's replacement, created after the round opened, crash-loops too.
	clock.add(time.Second)
	if _, err := pods.Create(ctx, rsPod("kcm-a2", clock.now()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.add(10 * time.Second)
	update(rsPod("kcm-a2", t0.Add(time.Second), crashLooping))
	waitFor(t, "the replacement to be deferred", func() bool { return len(deferredLines(hook)) == 1 })

	// The sibling, as old as the round's first pod, starts crash-looping later: same round.
	clock.add(10 * time.Second)
	update(rsPod("kcm-b", old, crashLooping))
	waitFor(t, "kcm-b to be reaped in the same round", gone("kcm-b"))

	// More updates of the replacement within the cooldown: still deferred, not logged again.
	clock.add(20 * time.Second)
	update(rsPod("kcm-a2", t0.Add(time.Second), crashLooping, withAnnotation("restart", "2")))
	time.Sleep(100 * time.Millisecond) // room to (wrongly) reap or log
	if gone("kcm-a2")() || len(deferredLines(hook)) != 1 {
		t.Fatalf("within the cooldown: kcm-a2 gone=%v, %d deferral lines; want it kept and one line", gone("kcm-a2")(), len(deferredLines(hook)))
	}

	// The cooldown has passed: its next update reaps it (a new round).
	clock.set(t0.Add(time.Minute))
	update(rsPod("kcm-a2", t0.Add(time.Second), crashLooping, withAnnotation("restart", "3")))
	waitFor(t, "kcm-a2 to be reaped after the cooldown", gone("kcm-a2"))

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.Reaped != 3 || s.Deferred != 1 {
		t.Errorf("summary = %+v, want 3 reaped (a, b, a2) and 1 deferred (a2)", s)
	}
}

// TestGateReturnStartsTheCooldownAfresh: with START_WHEN_READY, a replacement deferred by the
// cooldown is reaped at once when the service is Ready again after another outage: its crash
// loop is explained by that outage. The clock stands still, so only the reset can allow it.
func TestGateReturnStartsTheCooldownAfresh(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old := t0.Add(-time.Hour)
	rsPod := func(name string, created time.Time) *corev1.Pod {
		return newPod("shoot", name, withLabel("app", "kcm"), ownedBy("ReplicaSet", "kcm", "rs-kcm"), createdAt(created), crashLooping)
	}
	client := fake.NewClientset(endpointSlice("shoot", "etcd", ptr.To(true)), rsPod("kcm-a", old))
	run := startGatedRun(t, ctx, client, map[string]string{"RUN_DURATION": "1h", "REAP_COOLDOWN": "10m"})
	run.waitSynced(t)
	waitFor(t, "kcm-a to be reaped", func() bool { return deletes(client) == 1 })

	if _, err := client.CoreV1().Pods("shoot").Create(ctx, rsPod("kcm-a2", t0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replacement to be deferred", func() bool { return strings.Contains(run.messages(), "Not restarting pod shoot/kcm-a2 yet") })

	slices := client.DiscoveryV1().EndpointSlices("shoot")
	if _, err := slices.Update(ctx, endpointSlice("shoot", "etcd", ptr.To(false)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reaping to pause", func() bool { return strings.Contains(run.messages(), "reaping paused") })
	if _, err := slices.Update(ctx, endpointSlice("shoot", "etcd", ptr.To(true)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replacement to be reaped on the service's return", func() bool { return deletes(client) == 2 })
	cancel()
	run.wait(t)
	if !strings.Contains(run.messages(), "REAP_COOLDOWN starts afresh") {
		t.Errorf("the resume line does not say the cooldown starts afresh:\n%s", run.messages())
	}
}
