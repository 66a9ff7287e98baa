//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// The fault tests break things under depwatch on purpose: the coordinator's pod, the
// leader, the API server. The coordinators they kill are private ones, so those tests run
// beside the others; the API server's restart stops what every test relies on, so that test
// disrupts the cluster only once every other test has ended.

// unarmedService is the local config's Service whose weeder the coordinator launches on the
// return (not armed when the outage begins): the path that depends on the coordinator.
const unarmedService = "upstream-unarmed"

// weederWatch follows the weeder Jobs in the depwatch namespace and records, per service,
// the most Jobs that existed unfinished at the same moment, and when each Job covering it was
// created (a finished Job may be removed before the test looks: the history limit).
type weederWatch struct {
	mu      sync.Mutex
	active  map[string]map[string]bool // namespace/service → unfinished Job names
	most    map[string]int
	created map[string]map[string]time.Time // namespace/service → Job name → creation
}

func watchWeederJobs(t *testing.T) *weederWatch {
	t.Helper()
	w := &weederWatch{active: map[string]map[string]bool{}, most: map[string]int{}, created: map[string]map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(depwatchNS),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "depwatch.io/kind=weeder" }))
	inf := factory.Batch().V1().Jobs().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj, false) },
		UpdateFunc: func(_, obj any) { w.observe(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			w.observe(obj, true)
		},
	})
	if err != nil {
		t.Fatalf("watching weeder jobs: %v", err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("the weeder Job watch did not sync")
	}
	return w
}

func (w *weederWatch) observe(obj any, gone bool) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	key := j.Labels["depwatch.io/namespace"] + "/" + j.Labels["depwatch.io/service"]
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, target := range jobs.ReadFacts(j).Covers() {
		if w.created[target] == nil {
			w.created[target] = map[string]time.Time{}
		}
		w.created[target][j.Name] = j.CreationTimestamp.Time
	}
	if w.active[key] == nil {
		w.active[key] = map[string]bool{}
	}
	if gone || jobDone(j) || j.DeletionTimestamp != nil {
		delete(w.active[key], j.Name)
		return
	}
	w.active[key][j.Name] = true
	w.most[key] = max(w.most[key], len(w.active[key]))
}

// createdSince tells whether a Job covering ns/svc was created at or after since (whole
// seconds: since is rounded down).
func (w *weederWatch) createdSince(ns, svc string, since time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.created[ns+"/"+svc] {
		if !at.Before(since.Truncate(time.Second)) {
			return true
		}
	}
	return false
}

func (w *weederWatch) mostAtOnce(ns, svc string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.most[ns+"/"+svc]
}

// TestCoordinatorKilledWhileTwentyServicesRecoverGivesEachItsWeederOnce: 20 Services go down
// and their dependents crash-loop; the Services come back together and the coordinator's pod
// is killed (no grace period) as the first of them turns Ready. Whatever the old pod did not
// launch, its replacement's catch-up does: every dependent still crash-looping is reaped by a
// weeder and becomes Ready (those in a long back-off at the kill are judged), and no Service
// ever has two unfinished weeder Jobs at once.
func TestCoordinatorKilledWhileTwentyServicesRecoverGivesEachItsWeederOnce(t *testing.T) {
	parallelLong(t, 5*time.Minute)
	c := privateCoordinator(t, "kill", nil)
	const n = 20
	jobsSeen := watchWeederJobs(t)
	pairs := make([]*pair, n)
	for i := range pairs {
		pairs[i] = startPair(t, c.namespace(t, fmt.Sprintf("kill%02d", i)), unarmedService)
	}
	for _, p := range pairs {
		p.waitServiceReady(true, 2*time.Minute)
		p.startDependent()
	}
	for _, p := range pairs {
		p.waitDependentReady(2*time.Minute, "")
	}
	for _, p := range pairs {
		p.scaleUpstream(0)
	}
	dependents := make([]podsOf, n)
	for i, p := range pairs {
		p.waitServiceReady(false, time.Minute)
		dependents[i] = p.dependent()
	}
	// The weeders, not the kubelet, must restart the dependents: every back-off must outlast
	// the return, the kill, the replacement's lease takeover (up to leaseDuration) and the
	// catch-up Jobs for twenty services, tens of seconds on two cores (a minute must be left
	// at the kill, checked below). 100 s ahead for all twenty at once takes the 160 s back-off
	// (some 150 s of crash-looping); the 80 s one could never leave that much. Each of the
	// twenty has 100 s ahead during the first 60 s of its 160 s back-off; their crash loops
	// drift apart by up to 40 s on a busy machine, which still leaves a common moment. With
	// two minutes (40 s each) there mostly was none, and the wait went on to the 5-minute
	// back-off: 160 s longer.
	// On a loaded machine twenty crash loops drift too far apart for one moment to suit all
	// of them: at least half are judged (on a quiet one, all).
	loops := waitForBackOffOfMost(t, 100*time.Second, 8*time.Minute, dependents...)
	crashing := make([]corev1.Pod, n)
	for i, cl := range loops {
		crashing[i] = cl.pod
	}

	upAt := time.Now()
	for _, p := range pairs {
		p.scaleUpstream(1)
	}
	waitFor(t, time.Minute, "the first service to be Ready again", func() (bool, error) {
		for _, p := range pairs {
			if ok, err := p.serviceReady(); ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	})
	c.kill(t)
	killedAt := time.Now()
	for _, cl := range loops {
		if cl.judged() {
			requireBackOffAhead(t, cl, time.Minute, "the replacement coordinator's catch-up")
		}
	}
	t.Logf("coordinator pod killed %.1fs after the services began to return", killedAt.Sub(upAt).Seconds())

	var slowest time.Duration
	judged := 0
	for i, p := range pairs {
		if !loops[i].judged() {
			continue
		}
		judged++
		_, took := p.restartedByWeeder(loops[i])
		slowest = max(slowest, took)
	}
	t.Logf("%d judged dependents restarted by the weeders, the slowest Ready %s after its own service's return", judged, slowest)
	c.waitReplicas(t, 1)
	for i, p := range pairs {
		if most := jobsSeen.mostAtOnce(p.ns, p.svc); most > 1 {
			t.Errorf("service %s/%s had %d unfinished weeder Jobs at once, want at most 1", p.ns, p.svc, most)
		}
		switch got := jobsSeen.createdSince(p.ns, p.svc, upAt); {
		case got:
		case loops[i].judged():
			// Its dependent was crash-looping with a minute of back-off ahead at the kill:
			// the killed leader's return edge or the new leader's catch-up owed it a weeder.
			t.Errorf("service %s/%s got no weeder Job after its return", p.ns, p.svc)
		default:
			// Not judged: its dependent may have been restarted by the kubelet around the
			// return and be running, and a catch-up launches a weeder only for a service
			// with a crash-looping dependent.
			t.Logf("service %s/%s got no weeder Job after its return; its dependent was not in a long back-off at the kill, so none was owed", p.ns, p.svc)
		}
	}
}

// TestStandbyCoordinatorTakesOverWhenTheLeaderIsKilled: a second coordinator (its own
// Deployment, its own ports: replicas on the host network cannot share them) stands by on
// the same Lease. The leader's process is killed (SIGKILL), so the Lease is not released;
// a Service comes back at that moment. The standby takes the Lease once it expires
// (leaseDuration + retryPeriod, 15 s + 2 s; the figures are in the log) and launches the
// weeder, which restarts the dependent before the kubelet would.
func TestStandbyCoordinatorTakesOverWhenTheLeaderIsKilled(t *testing.T) {
	parallelLong(t, 5*time.Minute)
	c := privateCoordinator(t, "failover", nil)
	standby := c.standby(t)
	ns := c.namespace(t, "failover")
	p := newPairNamed(t, ns, unarmedService)
	p.scaleUpstream(0)
	p.waitServiceReady(false, time.Minute)
	// The new leader's weeder must find the dependent still crash-looping: its back-off must
	// outlast the Lease's expiry, the Job's start and the replacement's (some 20 s on a quiet
	// machine, 90 s on one running make test) by far. Two minutes ahead takes the 160 s
	// back-off.
	cl := p.waitCrashLoop(2*time.Minute, 7*time.Minute)

	leader := c.leaseHolder(t)
	if !strings.HasPrefix(leader, c.name+"-") || strings.HasPrefix(leader, standby.name) {
		t.Fatalf("the Lease is held by %q, want the first coordinator's pod", leader)
	}
	before := len(p.weederJobs())
	// SIGKILL, not a pod deletion: a deleted pod gets SIGTERM first and hands the Lease
	// over at once (ReleaseOnCancel); a killed process leaves it to expire, the worst case.
	c.killProcess(t)
	killedAt := time.Now()
	requireBackOffAhead(t, cl, 100*time.Second, "the upstream's return")
	p.scaleUpstream(1)

	var takeover time.Duration
	var newLeader string
	waitFor(t, time.Minute, "another coordinator to hold the Lease", func() (bool, error) {
		h := c.leaseHolder(t)
		if h != "" && h != leader {
			newLeader, takeover = h, time.Since(killedAt)
			return true, nil
		}
		return false, nil
	})
	var launched time.Duration
	waitFor(t, time.Minute, "a weeder Job from the new leader", func() (bool, error) {
		if len(p.weederJobs()) > before {
			launched = time.Since(killedAt)
			return true, nil
		}
		return false, nil
	})
	t.Logf("leader %s killed: %s took the Lease after %.1fs; weeder Job created %.1fs after the kill (leaseDuration + retryPeriod: 17s)",
		leader, newLeader, takeover.Seconds(), launched.Seconds())
	// The new leader launched it: it came after the Lease changed hands.
	acquired := c.leaseAcquired(t)
	for _, j := range p.weederJobs()[before:] {
		if j.CreationTimestamp.Time.Before(acquired.Truncate(time.Second)) {
			t.Errorf("weeder Job %s was created at %s, before %s took the Lease at %s", j.Name, clock(j.CreationTimestamp.Time), newLeader, clock(acquired))
		}
	}
	ready, took := p.restartedByWeeder(cl)
	t.Logf("upstream Ready → dependent %s Ready: %s", ready.Name, took)
}

// everyLineIsJSON: LOG_FORMAT=Logrus holds through client-go's retries. Every line that the
// pods of each source ("--selector=..." or "job/<name>") logged since since is a JSON object,
// client-go's own among them (its reflectors' and leader election's complaints while the API
// server was away, routed through klog to logrus): a log pipeline parses each line.
func everyLineIsJSON(t *testing.T, since time.Time, sources ...string) {
	t.Helper()
	lines, klog := 0, 0
	for _, src := range sources {
		out, err := kubectl(t, "-n", depwatchNS, "logs", "--tail=-1", "--since-time="+since.UTC().Format(time.RFC3339), src)
		if err != nil {
			t.Logf("logs of %s: %v (a Job's pod may be gone)", src, err)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line == "" {
				continue
			}
			lines++
			var l logLine
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Errorf("%s logged a line that is not JSON: %q", src, line)
				continue
			}
			if l.str("logger") == "klog" {
				klog++
			}
		}
	}
	if lines == 0 {
		t.Errorf("no log line from %v since %s: nothing was checked", sources, since.Format(time.TimeOnly))
	}
	t.Logf("%d log lines since the API server's restart began are JSON, %d of them client-go's (logger klog)", lines, klog)
}

// restartAPIServer stops kube-apiserver and starts it again (hack/restart-component.sh), the
// way an operator restarts it; it returns once /readyz passes again.
func restartAPIServer(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(repoRoot+"/hack/restart-component.sh", "kube-apiserver")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("restarting kube-apiserver: %v\n%s", err, out)
	}
	return time.Since(start)
}

// scaleWatch polls Deployments and records every violation of the probe's promises: a
// Deployment at 0 replicas without the replicas annotation, an annotation other than want,
// and any replica count other than want or 0.
type scaleWatch struct {
	mu         sync.Mutex
	violations []string
	seen       map[string][]int32
}

func watchScaling(ctx context.Context, ns string, names []string, want map[string]int32) *scaleWatch {
	w := &scaleWatch{seen: map[string][]int32{}}
	go func() {
		for ctx.Err() == nil {
			for _, name := range names {
				d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					continue // the API server may be restarting
				}
				w.check(name, *d.Spec.Replicas, d.Annotations, want[name])
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *scaleWatch) check(name string, replicas int32, ann map[string]string, want int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.seen[name]; len(s) == 0 || s[len(s)-1] != replicas {
		w.seen[name] = append(s, replicas)
	}
	stored, annotated := ann[annReplicas]
	switch {
	case replicas != want && replicas != 0:
		w.violations = append(w.violations, fmt.Sprintf("%s at %d replicas (want %d or 0)", name, replicas, want))
	case replicas == 0 && !annotated:
		w.violations = append(w.violations, fmt.Sprintf("%s at 0 replicas without the %s annotation", name, annReplicas))
	case annotated && stored != fmt.Sprint(want):
		w.violations = append(w.violations, fmt.Sprintf("%s annotated %s=%q, want %q", name, annReplicas, stored, fmt.Sprint(want)))
	}
}

func (w *scaleWatch) report(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("replica counts seen: %v", w.seen)
	for i, v := range w.violations {
		if i == 10 {
			t.Errorf("... and %d more", len(w.violations)-10)
			break
		}
		t.Errorf("broken promise: %s", v)
	}
}

// TestAPIServerRestartDuringWeederAndProbeJobs: kube-apiserver is stopped and started again
// while an armed weeder waits for its Service and while probe Jobs scale a "control plane"
// down. Jobs may fail, but nothing outside the weeder's selector is deleted, no Deployment is
// ever at 0 without its replicas annotation or annotated with another count, the next runs
// converge (the dependent recovers; the scale-down completes, and the scale-up restores 2),
// and the coordinator works again on its own. Every other test needs the API server: this
// one sets up and waits beside them, and restarts it once they have all ended.
func TestAPIServerRestartDuringWeederAndProbeJobs(t *testing.T) {
	othersEnded := disruptsTheCluster(t)
	ensureCoordinator(t)
	ns := newNamespace(t, "apirestart")
	p := newPair(t, ns)
	// The outage first: the rest is set up, and the other tests run, while the dependent's
	// back-off grows.
	outageStart := p.beginOutage()
	p.waitServiceReady(false, time.Minute)
	armed := p.waitArmedJob(outageStart, time.Minute)

	// Decoys: crash-looping like the dependent, but outside the weeder's selector (no
	// dependent label) or outside its namespace (labelled, in a namespace with no Service).
	decoyNS := newNamespace(t, "apirestart-decoy")
	decoys := []*corev1.Pod{
		crashingPod(t, ns, "decoy-unlabelled", map[string]string{"app": "decoy"}),
		crashingPod(t, decoyNS, "decoy-elsewhere", map[string]string{dependentLabel: "dependent"}),
	}
	s := newProbeScenario(t, "apirestart-probe", probeSetup{expired: []string{"w1", "w2", "w3"}})

	// The dependent must still be crash-looping when the upstream returns, or the kubelet
	// restarts it and the weeder has nothing to reap: its back-off must outlast the probe
	// Job's start, the API server's restart (13 s on an idle machine, more under load), the
	// upstream's return and the weeder's reconnect. Two minutes ahead takes the 160 s
	// back-off; a 20 s one was used up by the first two steps alone. When the other tests
	// end is not known in advance, and by then a dependent may wait the kubelet's longest
	// back-off (5 min), which leaves two minutes ahead only during its first three minutes.
	// A second dependent, whose crash loop starts 150 s later, covers the other two.
	crashLoops := []podsOf{p.dependent()}
	select {
	case <-othersEnded:
	case <-time.After(time.Until(outageStart.Add(150 * time.Second))):
		const late = "dependent-late"
		p.startDependentNamed(late)
		crashLoops = append(crashLoops, podsOf{ns, "app=" + late})
		<-othersEnded
	}
	t.Logf("every test that shares the cluster has ended, %s after the outage began: the API server is this test's alone now",
		time.Since(outageStart).Round(time.Second))
	want := map[string]int32{kcm: dependentReplicas, mcm: dependentReplicas, ca: dependentReplicas}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scaling := watchScaling(ctx, s.ns, dependents, want)
	restartsBefore := lab.restarts(t)
	cl, crashLoop := waitForAnyBackOffAtLeast(t, 2*time.Minute, 5*time.Minute, crashLoops...)
	crashing := cl.pod
	s.start()
	waitFor(t, time.Minute, "a probe Job to run", func() (bool, error) {
		for _, j := range s.probeJobs() {
			if j.Status.Active > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	restarting := time.Now()
	took := restartAPIServer(t)
	t.Logf("kube-apiserver restarted in %.1fs (armed weeder %s waiting, a probe Job running); %s of the dependent's back-off left",
		took.Seconds(), armed.Name, cl.ahead().Round(100*time.Millisecond))
	requireBackOffAhead(t, cl, 100*time.Second, "the upstream's return")

	p.scaleUpstream(1)
	p.waitServiceReady(true, time.Minute)
	waitReapedEvent(t, ns, crashing.Name, 3*time.Minute)
	waitPodReady(t, crashLoop, 2*time.Minute, crashing.UID)
	s.waitReplicas(kcm, 0, 3*time.Minute)
	s.waitReplicas(mcm, 0, time.Minute)
	s.waitReplicas(ca, 0, time.Minute)
	s.setRenewing(true, "w1", "w2", "w3")
	for _, name := range dependents {
		s.waitReplicas(name, dependentReplicas, 3*time.Minute)
	}
	cancel()
	scaling.report(t)
	for _, d := range decoys {
		if !podExists(t, d.Namespace, d.Name, d.UID) {
			t.Errorf("decoy pod %s/%s (outside the weeder's selector) was deleted", d.Namespace, d.Name)
		}
	}
	lab.waitReplicas(t, 1)
	t.Logf("coordinator container restarts during the test: %d", lab.restarts(t)-restartsBefore)
	sources := []string{"--selector=app.kubernetes.io/component=coordinator"}
	for _, name := range jobNames(jobsCreatedAfter(p.weederJobs(), outageStart)) {
		sources = append(sources, "job/"+name)
	}
	everyLineIsJSON(t, restarting, sources...)
	for _, j := range jobsCreatedAfter(p.weederJobs(), outageStart) {
		t.Logf("weeder Job %s: active %d, succeeded %d, failed %d", j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed)
	}
}
