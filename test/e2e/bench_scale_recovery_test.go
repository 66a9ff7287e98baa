//go:build e2e

package e2e

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/jobs"
)

// The recovery half of make bench-scale: a storm that comes back. The weeder Jobs run for
// real; the dependents are kubelet-less pods (bound to a Node object no kubelet serves, so
// nothing runs them and their status is what the test writes) in CrashLoopBackOff.

const (
	noKubeletNode     = "depwatch-bench-no-kubelet"
	benchDependentKey = "depwatch.io/bench-dependent"
	recoveryOutage    = 60 * time.Second
	// recoveryWatch is the weeders' watchDuration in this run: they exit (and log what they
	// cost) a minute after their return rather than after the shipped 5 minutes.
	recoveryWatch = time.Minute
)

// dependentLabels are the labels the lab config's selectors give each service's dependent.
var dependentLabels = map[string]map[string]string{
	"etcd-main-client": {"app": "kubernetes", "role": "apiserver"},
	"kube-apiserver":   {"app": "kubernetes", "role": "controller-manager"},
}

// TestBenchScaleWeederRecovery: at each count N of DEPWATCH_BENCH_SCALE, min(2N, 1,000)
// services (two per namespace), each with one crash-looping dependent, go down at once, stay
// down 60 s and come back at once, with the lab coordinator on the shipped defaults. It
// reports, per dependent, its service's return → its delete (p50/p99/max), deletes during the
// outage and dependents never reaped (both must be 0), weeder pods, the API requests of the
// coordinator and of the weeder pods (their last log line), and RSS.
func TestBenchScaleWeederRecovery(t *testing.T) {
	counts := benchScaleCounts(t)
	ensureCoordinator(t)
	setCoordinatorEnv(t, benchCoordinatorEnv(t))
	applyLabConfig(t, "the short watchDuration", func(base string) string {
		return strings.Replace(base, "watchDuration: 5m0s\n", "watchDuration: "+recoveryWatch.String()+"\n", 1)
	})
	c := benchClient(t)
	// An earlier run's namespaces still count in the coordinator's services-Ready gauge, which
	// this run waits on; they go once their dependents are gone (with the node, PodGC).
	waitFor(t, 5*time.Minute, "namespaces of an earlier recovery run to be gone", func() (bool, error) {
		list, err := c.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/e2e=true"})
		if err != nil {
			return false, err
		}
		return !slices.ContainsFunc(list.Items, func(ns corev1.Namespace) bool { return strings.HasPrefix(ns.Name, "benchr-") }), nil
	})
	createNoKubeletNode(t, c)
	for _, n := range counts {
		t.Run(fmt.Sprintf("services=%d", min(2*n, 1000)), func(t *testing.T) { benchRecoveryAt(t, c, min(n, 500)) })
	}
}

func createNoKubeletNode(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: noKubeletNode, Labels: map[string]string{"depwatch.io/e2e": "true"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
			{Key: "depwatch.io/bench", Value: "no-kubelet", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if _, err := c.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("creating the kubelet-less node: %v", err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), noKubeletNode, metav1.DeleteOptions{}) })
}

// createDependents makes one bare pod per service on the kubelet-less node, running.
func createDependents(t *testing.T, c kubernetes.Interface, svcs []benchService) {
	t.Helper()
	ctx := context.Background()
	err := concurrently(svcs, func(s benchService) error {
		lbl := map[string]string{benchDependentKey: "true"}
		for k, v := range dependentLabels[s.name] {
			lbl[k] = v
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: s.dependent(), Namespace: s.ns, Labels: lbl},
			Spec: corev1.PodSpec{
				NodeName:    noKubeletNode,
				Containers:  []corev1.Container{{Name: "app", Image: "localhost/none:never"}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, // the node is NotReady: never evicted
			},
		}
		var created *corev1.Pod
		var err error
		// A new namespace's default ServiceAccount comes a moment after it; admission waits for it.
		for try := 0; ; try++ {
			created, err = c.CoreV1().Pods(s.ns).Create(ctx, pod, metav1.CreateOptions{})
			if err == nil || try == 100 || !strings.Contains(err.Error(), "serviceaccount") {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Image: "localhost/none:never", Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
		}}}
		_, err = c.CoreV1().Pods(s.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating the dependents: %v", err)
	}
}

// crashLoopDependents writes what a kubelet would after the sixth crash.
func crashLoopDependents(c kubernetes.Interface, svcs []benchService) error {
	ctx := context.Background()
	return concurrently(svcs, func(s benchService) error {
		pod, err := c.CoreV1().Pods(s.ns).Get(ctx, s.dependent(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "app", Image: "localhost/none:never", RestartCount: 6, Started: ptr.To(false),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: "Error", StartedAt: now, FinishedAt: now}},
		}}
		_, err = c.CoreV1().Pods(s.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

// deleteWatch notes when the test first sees each dependent deleted (a deletion timestamp or
// the delete itself): the weeder's delete call, give or take the watch's latency. It is an
// informer, not a bare watch: under a storm's load the API server may close a watch whose
// reader falls behind, and the informer lists and watches again where a bare watch would go
// quiet and report every later delete as never made. A delete made while it re-lists is
// noted when the list shows it (the pods stay, terminating, on their kubelet-less node).
// Only this run's dependents count: an earlier run's may still be terminating.
type deleteWatch struct {
	mu      sync.Mutex
	deleted map[string]time.Time
	stopCh  chan struct{}
	factory informers.SharedInformerFactory
}

func watchDeletes(t *testing.T, c kubernetes.Interface, svcs []benchService) *deleteWatch {
	t.Helper()
	mine := map[string]bool{}
	for _, s := range svcs {
		mine[s.ns+"/"+s.dependent()] = true
	}
	d := &deleteWatch{deleted: map[string]time.Time{}, stopCh: make(chan struct{})}
	d.factory = informers.NewSharedInformerFactoryWithOptions(c, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = benchDependentKey + "=true" }))
	inf := d.factory.Core().V1().Pods().Informer()
	note := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok || !mine[pod.Namespace+"/"+pod.Name] {
			return
		}
		d.mu.Lock()
		if _, ok := d.deleted[pod.Namespace+"/"+pod.Name]; !ok {
			d.deleted[pod.Namespace+"/"+pod.Name] = time.Now()
		}
		d.mu.Unlock()
	}
	terminating := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.DeletionTimestamp != nil {
			note(pod)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    terminating,
		UpdateFunc: func(_, obj any) { terminating(obj) },
		DeleteFunc: note,
	}); err != nil {
		t.Fatalf("watching the dependents: %v", err)
	}
	d.factory.Start(d.stopCh)
	if !cache.WaitForCacheSync(d.stopCh, inf.HasSynced) {
		d.stop()
		t.Fatal("watching the dependents: the pod cache never synced")
	}
	return d
}

func (d *deleteWatch) snapshot() map[string]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]time.Time, len(d.deleted))
	for k, v := range d.deleted {
		out[k] = v
	}
	return out
}

func (d *deleteWatch) stop() { close(d.stopCh); d.factory.Shutdown() }

// depwatchRSS is what weederRSS measured: the largest `depwatch reap` process, and the
// largest sum over every depwatch process on the machine (the coordinator, the weeder and any
// other Job pods) in one sample, with that sample's split into anonymous memory (the Go heap,
// stacks, runtime) and pages mapped from the binary (RssFile: each process counts its own,
// though the node's page cache holds them once).
type depwatchRSS struct {
	reapPeak          float64 // bytes
	reapProcs         int
	sumPeak           float64 // bytes, all depwatch processes in one sample
	sumAnon, sumFile  float64 // of the sumPeak sample
	sumPss            float64 // of the sumPeak sample: the binary's shared pages counted once
	sumProcs, sumReap int     // processes in the sumPeak sample, and of them `depwatch reap`
}

func (r depwatchRSS) String() string {
	const mib = 1 << 20
	return fmt.Sprintf("weeder pods' largest %.1f MiB (%d processes seen); every depwatch process summed, peak %.1f MiB (%d processes, %d of them reap; anon %.1f MiB, file %.1f MiB; PSS %.1f MiB)",
		r.reapPeak/mib, r.reapProcs, r.sumPeak/mib, r.sumProcs, r.sumReap, r.sumAnon/mib, r.sumFile/mib, r.sumPss/mib)
}

// weederRSS samples the resident memory of every depwatch process on this machine (the
// coordinator and the weeder pods run here) every second until stop.
func weederRSS(stop <-chan struct{}) depwatchRSS {
	var r depwatchRSS
	seen := map[string]bool{}
	for {
		select {
		case <-stop:
			r.reapProcs = len(seen)
			return r
		case <-time.After(time.Second):
		}
		var sum, anon, file, pss float64
		procs, reaps := 0, 0
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, dir := range dirs {
			cmd, err := os.ReadFile(dir + "/cmdline")
			if err != nil || !strings.HasSuffix(strings.SplitN(string(cmd), "\x00", 2)[0], "depwatch") {
				continue
			}
			reap := strings.Contains(string(cmd), "\x00reap")
			st := procStatusKB(dir + "/status")
			if st["VmRSS"] == 0 {
				continue // gone, or a zombie
			}
			procs++
			sum, anon, file = sum+st["VmRSS"]*1024, anon+st["RssAnon"]*1024, file+st["RssFile"]*1024
			pss += procStatusKB(dir + "/smaps_rollup")["Pss"] * 1024
			if reap {
				reaps++
				seen[dir] = true
				r.reapPeak = max(r.reapPeak, st["VmRSS"]*1024)
			}
		}
		if sum > r.sumPeak {
			r.sumPeak, r.sumAnon, r.sumFile, r.sumPss, r.sumProcs, r.sumReap = sum, anon, file, pss, procs, reaps
		}
	}
}

// procStatusKB reads the kB figures of a /proc/<pid>/status file (VmRSS, RssAnon, ...).
func procStatusKB(path string) map[string]float64 {
	out := map[string]float64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if v, isKB := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok && isKB {
			out[k], _ = strconv.ParseFloat(v, 64)
		}
	}
	return out
}

func benchRecoveryAt(t *testing.T, c kubernetes.Interface, namespaces int) {
	ctx := context.Background()
	readyBefore := lab.metric(t, "depwatch_coordinator_services_ready")
	prefix := "benchr-" + rand.String(4)
	svcs := createBenchServices(t, c, prefix, namespaces)
	waitFor(t, 3*time.Minute, "the coordinator to see every service Ready", func() (bool, error) {
		return lab.metric(t, "depwatch_coordinator_services_ready") >= readyBefore+float64(len(svcs)), nil
	})
	createDependents(t, c, svcs)
	t.Logf("%d namespaces, %d services, %d kubelet-less dependents", namespaces, len(svcs), len(svcs))
	deletes := watchDeletes(t, c, svcs)
	defer deletes.stop()

	stopRSS := make(chan struct{})
	var rss depwatchRSS
	var sampler sync.WaitGroup
	sampler.Go(func() { rss = weederRSS(stopRSS) })
	req0, use0 := apiRequests(t), coordinatorUsage(t)
	// The coordinator's RSS, sampled every second: with EXECUTOR=in-process the weeders'
	// runs are in it, and their peak is the figure.
	var coordPeak float64
	sampler.Go(func() { coordPeak = coordinatorRSSPeak(t, stopRSS, use0.rss) })
	stormStart := time.Now()
	if _, err := setAllReady(c, svcs, false); err != nil {
		t.Fatalf("taking the services down: %v", err)
	}
	if err := crashLoopDependents(c, svcs); err != nil {
		t.Fatalf("crash-looping the dependents: %v", err)
	}
	want := map[string]bool{}
	for _, s := range svcs {
		want[s.key()] = true
	}
	stamped, seen := map[string]time.Time{}, map[string]time.Time{}
	waitFor(t, 3*time.Minute, "every service to be covered by a weeder Job", func() (bool, error) {
		if benchInProcess() { // its runs are not in the API: their WeederArmed Events say it
			armedEvents(t, c, want, stamped, seen)
			return len(seen) == len(svcs), nil
		}
		by, _ := coveringJobs(t, stormStart, nil)
		for _, s := range svcs {
			if len(by[s.key()]) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("armed: every service covered %s after the outage began", time.Since(stormStart).Round(100*time.Millisecond))
	time.Sleep(time.Until(stormStart.Add(recoveryOutage)))
	early := len(deletes.snapshot())

	back, err := setAllReady(c, svcs, true)
	if err != nil {
		t.Fatalf("bringing the services back: %v", err)
	}
	// A benchmark reports what it measured: dependents still there after 3 minutes are
	// counted as not reaped, not a reason to stop before the figures.
	for end := time.Now().Add(3 * time.Minute); len(deletes.snapshot()) < len(svcs) && time.Now().Before(end); {
		time.Sleep(time.Second)
	}
	got := deletes.snapshot()
	var took []time.Duration
	missing := 0
	for _, s := range svcs {
		at, ok := got[s.ns+"/"+s.dependent()]
		if !ok {
			missing++
			continue
		}
		took = append(took, at.Sub(back[s.key()]))
	}
	req1, use1 := apiRequests(t), coordinatorUsage(t)
	// Per covering Job: its services and their return → delete p99, so a slow tail can be
	// told apart as one Job's (its size, its pod) or the API server's (every Job's).
	byJob := map[string][]time.Duration{}
	covering, _ := coveringJobs(t, stormStart, nil)
	for _, s := range svcs {
		if at, ok := got[s.ns+"/"+s.dependent()]; ok && len(covering[s.key()]) > 0 {
			j := covering[s.key()][len(covering[s.key()])-1]
			byJob[j] = append(byJob[j], at.Sub(back[s.key()]))
		}
	}
	for _, j := range slices.Sorted(maps.Keys(byJob)) {
		d := byJob[j]
		slices.Sort(d)
		t.Logf("  Job %s: %d services, return → delete p50 %s p99 %s", j, len(d), percentile(d, .5).Round(10*time.Millisecond), percentile(d, .99).Round(10*time.Millisecond))
	}

	// The weeders end a minute after their return; their last line says what they cost.
	_, made := coveringJobs(t, stormStart, nil)
	waitFor(t, 2*time.Minute, "the storm's weeder Jobs to finish", func() (bool, error) {
		_, made = coveringJobs(t, stormStart, nil)
		for _, j := range made {
			if j.Status.CompletionTime == nil && j.Status.Failed == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	close(stopRSS)
	sampler.Wait()
	weederReqs, batches := 0.0, 0
	for _, j := range made {
		if j.Labels[jobs.LabelBatch] == "true" {
			batches++
		}
		out := mustKubectl(t, "-n", depwatchNS, "logs", "job/"+j.Name, "--tail=5")
		for _, l := range parseLogLines(out) {
			if l.str("msg") == "pod reaper is exiting" {
				if n, ok := l["api_requests"].(float64); ok {
					weederReqs += n
				}
			}
		}
	}
	pods, err := c.CoreV1().Pods(depwatchNS).List(ctx, metav1.ListOptions{LabelSelector: "depwatch.io/kind=weeder"})
	if err != nil {
		t.Fatal(err)
	}
	weederPods := 0
	for _, p := range pods.Items {
		if !p.CreationTimestamp.Time.Before(stormStart.Truncate(time.Second)) {
			weederPods++
		}
	}
	t.Logf("recovery at %d services (%d namespaces), outage %s: return → delete p50 %s p99 %s max %s; deletes during the outage %d; dependents not reaped %d",
		len(svcs), namespaces, recoveryOutage, percentile(took, .5).Round(10*time.Millisecond), percentile(took, .99).Round(10*time.Millisecond),
		percentile(took, 1).Round(10*time.Millisecond), early, missing)
	t.Logf("recovery at %d services: weeder Jobs %d (%d batch), weeder pods %d; API requests: coordinator %.0f (storm → all deleted), weeder pods %.0f (whole runs); RSS: coordinator peak %.1f MiB, %s; coordinator CPU %.1f s (executor %s)",
		len(svcs), len(made), batches, weederPods, req1-req0, weederReqs, max(coordPeak, use1.rss)/(1<<20), rss, use1.cpu-use0.cpu, cmp.Or(os.Getenv("DEPWATCH_BENCH_EXECUTOR"), "job"))
	if early > 0 || missing > 0 {
		t.Errorf("%d dependents deleted while their service was down, %d never deleted", early, missing)
	}
	if weederPods > 25 {
		t.Errorf("%d weeder pods for the storm; the budget is 25", weederPods)
	}
	_ = c.BatchV1().Jobs(depwatchNS).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)},
		metav1.ListOptions{LabelSelector: "depwatch.io/kind=weeder"})
}
