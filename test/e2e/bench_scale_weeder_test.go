//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/jobs"
)

// benchScaleCounts reads DEPWATCH_BENCH_SCALE (make bench-scale: SCALE=250,1000).
func benchScaleCounts(t *testing.T) []int {
	v := os.Getenv("DEPWATCH_BENCH_SCALE")
	if v == "" {
		t.Skip("a benchmark: run with make bench-scale (DEPWATCH_BENCH_SCALE=250,1000)")
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("DEPWATCH_BENCH_SCALE=%q: want comma-separated namespace counts, e.g. 250,1000", v)
		}
		out = append(out, n)
	}
	return out
}

// benchClient is a client of the benchmark's own, fast enough that the storm is the
// coordinator's to handle, not the test's client-side rate limit.
func benchClient(t *testing.T) kubernetes.Interface {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	return kubernetes.NewForConfigOrDie(cfg)
}

// setCoordinatorEnv sets (value) or removes ("") environment variables of the coordinator
// Deployment, the way an operator changes a flag, and waits until the new pod leads. The
// old values come back when the test ends.
// benchInProcess: DEPWATCH_BENCH_EXECUTOR=in-process (make bench-scale EXECUTOR=in-process)
// measures the coordinator running the weeder's runs in its own process, as it does in
// gardenlet's dependency-watchdog Deployment.
// benchAnnotated is DEPWATCH_BENCH_ANNOTATED: how many Deployments annotated
// depwatch.io/depends-on each namespace of the weeder storm gets before the idle figures are
// taken again (0: none, the default).
func benchAnnotated(t *testing.T) int {
	v := os.Getenv("DEPWATCH_BENCH_ANNOTATED")
	if v == "" {
		return 0
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 {
		t.Fatalf("DEPWATCH_BENCH_ANNOTATED=%q: want a number of workloads a namespace", v)
	}
	return k
}

// createAnnotatedWorkloads gives each namespace of svcs k Deployments at 0 replicas (no pods:
// API objects only, as the storm's services are) whose depwatch.io/depends-on names the
// namespace's first configured service, so the coordinator follows them as it would on a
// cluster where teams declare their dependencies.
func createAnnotatedWorkloads(t *testing.T, c kubernetes.Interface, svcs []benchService, k int) {
	t.Helper()
	type workload struct{ ns, name, upstream string }
	var ws []workload
	seen := map[string]bool{}
	for _, s := range svcs {
		if seen[s.ns] {
			continue
		}
		seen[s.ns] = true
		for i := range k {
			ws = append(ws, workload{s.ns, fmt.Sprintf("app-%d", i), s.name})
		}
	}
	err := concurrently(ws, func(w workload) error {
		labels := map[string]string{"app": w.name}
		_, err := c.AppsV1().Deployments(w.ns).Create(context.Background(), &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: w.name, Annotations: map[string]string{"depwatch.io/depends-on": w.upstream}},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "localhost/depwatch-testapp:dev"}}},
				},
			},
		}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating the annotated workloads: %v", err)
	}
}

// coordinatorRSSPeak samples the lab coordinator's resident memory every second until stop
// is closed, and returns the largest, from at least from.
func coordinatorRSSPeak(t *testing.T, stop <-chan struct{}, from float64) float64 {
	peak := from
	for {
		select {
		case <-stop:
			return peak
		case <-time.After(time.Second):
			if u := lab.scrape(t); u != nil {
				peak = max(peak, u["process_resident_memory_bytes"])
			}
		}
	}
}

func benchInProcess() bool { return os.Getenv("DEPWATCH_BENCH_EXECUTOR") == "in-process" }

// benchCoordinatorEnv is the coordinator's environment for a storm: the shipped defaults;
// with EXECUTOR=in-process, gardenlet's shape (no Jobs, the coordinator holds the weeder's
// rights itself); DEPWATCH_BENCH_KUBE_API_QPS / _BURST set the coordinator's one API budget,
// which in-process runs share, so that a storm's figures can be read against the budget.
func benchCoordinatorEnv(t *testing.T) map[string]string {
	env := map[string]string{"DEPWATCH_WEEDER_BATCH_AFTER": ""}
	if benchInProcess() {
		bindWeederRoleToCoordinator(t)
		env["DEPWATCH_EXECUTOR"] = "in-process"
	}
	if v := os.Getenv("DEPWATCH_BENCH_KUBE_API_QPS"); v != "" {
		env["DEPWATCH_KUBE_API_QPS"] = v
	}
	if v := os.Getenv("DEPWATCH_BENCH_KUBE_API_BURST"); v != "" {
		env["DEPWATCH_KUBE_API_BURST"] = v
	}
	return env
}

// bindWeederRoleToCoordinator gives the lab coordinator's service account the weeder Jobs'
// ClusterRole for the test's time: in-process runs act under the coordinator's own account.
func bindWeederRoleToCoordinator(t *testing.T) {
	t.Helper()
	name := "depwatch-bench-in-process-weeder"
	mustKubectl(t, "create", "clusterrolebinding", name, "--clusterrole=depwatch-weeder", "--serviceaccount="+depwatchNS+":depwatch-coordinator")
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "clusterrolebinding", name, "--ignore-not-found") })
}

func setCoordinatorEnv(t *testing.T, env map[string]string) {
	t.Helper()
	d, err := kube.AppsV1().Deployments(depwatchNS).Get(context.Background(), "depwatch-coordinator", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the coordinator deployment: %v", err)
	}
	old := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		old[e.Name] = e.Value
	}
	apply := func(vals map[string]string) {
		args := []string{"-n", depwatchNS, "set", "env", "deployment/depwatch-coordinator", "-c", "coordinator"}
		for k, v := range vals {
			if v == "" {
				args = append(args, k+"-")
			} else {
				args = append(args, k+"="+v)
			}
		}
		mustKubectl(t, args...)
		// The restore runs while the storm's thousand namespaces are being deleted: the
		// new pod's start waits behind that (over two minutes seen), so the wait is generous.
		mustKubectl(t, "-n", depwatchNS, "rollout", "status", "deployment/depwatch-coordinator", "--timeout=10m")
		lab.waitReplicas(t, 1)
		lab.waitLeading(t)
	}
	restore := map[string]string{}
	for k := range env {
		restore[k] = old[k]
	}
	t.Cleanup(func() { apply(restore) })
	apply(env)
}

// concurrently runs f for every item with 32 workers and returns the first error.
func concurrently[T any](items []T, f func(T) error) error {
	var mu sync.Mutex
	var first error
	work := make(chan T)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for it := range work {
				if err := f(it); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	return first
}

type benchService struct{ ns, name string }

func (s benchService) key() string { return s.ns + "/" + s.name }

// dependent is the name of the service's kubelet-less dependent pod (bench-scale recovery).
func (s benchService) dependent() string { return s.name + "-dependent" }

// createBenchServices makes the namespaces and, in each, the two configured Services with an
// EndpointSlice of their own (all endpoints ready, owned by the Service as the EndpointSlice
// controller's are): a seed's shoot namespaces as the coordinator sees them, without pods.
func createBenchServices(t *testing.T, c kubernetes.Interface, prefix string, n int) []benchService {
	t.Helper()
	ctx := context.Background()
	var nss []string
	var svcs []benchService
	for i := range n {
		ns := fmt.Sprintf("%s-%04d", prefix, i)
		nss = append(nss, ns)
		svcs = append(svcs, benchService{ns, "etcd-main-client"}, benchService{ns, "kube-apiserver"})
	}
	t.Cleanup(func() { deleteNamespaces(nss) })
	err := concurrently(nss, func(ns string) error {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"depwatch.io/e2e": "true"}}}, metav1.CreateOptions{})
		return err
	})
	if err == nil {
		err = concurrently(svcs, func(s benchService) error {
			created, err := c.CoreV1().Services(s.ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.ns},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Port: 80}}},
			}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			slice := stormSlice(s.ns, s.name, 4, 4)
			slice.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: s.name, UID: created.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
			_, err = c.DiscoveryV1().EndpointSlices(s.ns).Create(ctx, slice, metav1.CreateOptions{})
			return err
		})
	}
	if err != nil {
		t.Fatalf("creating %d namespaces with their services: %v", n, err)
	}
	return svcs
}

// setReady patches the service's slice: all 4 endpoints ready, or none.
func setReady(c kubernetes.Interface, s benchService, ready bool) error {
	var ops []string
	for i := range 4 {
		ops = append(ops, fmt.Sprintf(`{"op":"replace","path":"/endpoints/%d/conditions/ready","value":%t}`, i, ready))
	}
	_, err := c.DiscoveryV1().EndpointSlices(s.ns).Patch(context.Background(), s.name+"-storm", types.JSONPatchType, []byte("["+strings.Join(ops, ",")+"]"), metav1.PatchOptions{})
	return err
}

// armedEvents maps each service of want to when its WeederArmed Event says it was armed (its
// first timestamp, whole seconds) for Events first seen now; seen records when the poll found
// them. Other services' Events are left out: an earlier run's namespaces, still being deleted,
// keep theirs, and counting them would end the wait before this storm's Events are written.
func armedEvents(t *testing.T, c kubernetes.Interface, want map[string]bool, stamped, seen map[string]time.Time) {
	list, err := c.CoreV1().Events("").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=WeederArmed"})
	if err != nil {
		t.Logf("listing WeederArmed Events: %v", err)
		return
	}
	now := time.Now()
	for _, e := range list.Items {
		k := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		if _, ok := seen[k]; !ok && want[k] {
			seen[k] = now
			stamped[k] = e.FirstTimestamp.Time
		}
	}
}

// applyLabConfig gives the lab coordinator its config as edit changes it, waits until it has
// restarted with it, and restores the config when the test ends.
func applyLabConfig(t *testing.T, what string, edit func(string) string) {
	t.Helper()
	base, err := os.ReadFile(repoRoot + "/manifests/overlays/local/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lab.applyConfigAndRestart(t, what, edit(string(base)))
	t.Cleanup(func() { lab.applyConfigAndRestart(t, "its own config", string(base)) })
}

// setAllReady patches every service's slice (setReady), 32 at a time, and says when each was
// patched.
func setAllReady(c kubernetes.Interface, svcs []benchService, ready bool) (map[string]time.Time, error) {
	at := map[string]time.Time{}
	var mu sync.Mutex
	err := concurrently(svcs, func(s benchService) error {
		if err := setReady(c, s, ready); err != nil {
			return err
		}
		mu.Lock()
		at[s.key()] = time.Now()
		mu.Unlock()
		return nil
	})
	return at, err
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func apiRequests(t *testing.T) float64 {
	total := 0.0
	for name, v := range lab.scrape(t) {
		if strings.HasPrefix(name, "depwatch_coordinator_kube_api_requests_total{") {
			total += v
		}
	}
	return total
}

// TestBenchScaleWeeder is make bench-scale's weeder side: at each count of namespaces (two
// configured services each, API objects only), the coordinator's memory and CPU idle; a storm
// taking down 1,000 services (or all, if fewer) at once: outage → WeederArmed Event
// (p50/p99), weeder Jobs and pods created, every service covered, the coordinator's API
// requests, CPU and peak memory; then lone outages during a mass deletion of the namespaces.
// The coordinator runs with the shipped defaults; weeder Jobs are pinned to a node that does
// not exist, so their pods stay Pending and the cluster's two cores stay the coordinator's.
func TestBenchScaleWeeder(t *testing.T) {
	counts := benchScaleCounts(t)
	ensureCoordinator(t)
	setCoordinatorEnv(t, benchCoordinatorEnv(t))
	applyLabConfig(t, "the pinned jobTemplate", func(base string) string {
		return strings.Replace(base, "jobTemplate:\n", "jobTemplate:\n  nodeSelector: {kubernetes.io/hostname: depwatch-bench-no-such-node}\n", 1)
	})
	c := benchClient(t)
	// An earlier run's namespaces (this test's, bench-, or the recovery's, benchr-, which runs
	// just before it in make bench-scale) are still being deleted: their informer events
	// would count in the idle figures and their Events in the storm's.
	waitFor(t, 20*time.Minute, "namespaces of an earlier bench run to be gone", func() (bool, error) {
		list, err := c.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/e2e=true"})
		if err != nil {
			return false, err
		}
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, "bench-") || strings.HasPrefix(ns.Name, "benchr-") {
				return false, nil
			}
		}
		return true, nil
	})
	for i, n := range counts {
		t.Run(fmt.Sprintf("namespaces=%d", n), func(t *testing.T) { benchWeederAt(t, c, n, i == len(counts)-1) })
	}
}

func benchWeederAt(t *testing.T, c kubernetes.Interface, n int, last bool) {
	ctx := context.Background()
	readyBefore := lab.metric(t, "depwatch_coordinator_services_ready")
	created := time.Now()
	prefix := "bench-" + rand.String(4)
	svcs := createBenchServices(t, c, prefix, n)
	lone := createBenchServices(t, c, prefix+"-lone", 5)
	t.Logf("created %d namespaces, %d services in %s", n+1, len(svcs)+len(lone), time.Since(created).Round(time.Second))
	waitFor(t, 3*time.Minute, "the coordinator to see every service Ready", func() (bool, error) {
		return lab.metric(t, "depwatch_coordinator_services_ready") >= readyBefore+float64(len(svcs)+len(lone)), nil
	})
	time.Sleep(10 * time.Second)
	idle0 := coordinatorUsage(t)
	time.Sleep(30 * time.Second)
	idle1 := coordinatorUsage(t)
	t.Logf("idle at %d namespaces: RSS %.1f MiB, CPU %.2f%% of a core; %s", n, idle1.rss/(1<<20), 100*(idle1.cpu-idle0.cpu)/30, coordinatorHeap(t))
	if k := benchAnnotated(t); k > 0 {
		made := time.Now()
		createAnnotatedWorkloads(t, c, svcs, k)
		t.Logf("created %d Deployments annotated depwatch.io/depends-on (%d a namespace) in %s", k*n, k, time.Since(made).Round(time.Second))
		time.Sleep(10 * time.Second)
		idle0 = coordinatorUsage(t)
		time.Sleep(30 * time.Second)
		idle1 = coordinatorUsage(t)
		t.Logf("idle at %d namespaces with %d annotated workloads each: RSS %.1f MiB, CPU %.2f%% of a core; %s", n, k, idle1.rss/(1<<20), 100*(idle1.cpu-idle0.cpu)/30, coordinatorHeap(t))
	}

	// The storm.
	storm := svcs[:min(1000, len(svcs))]
	req0, use0 := apiRequests(t), coordinatorUsage(t)
	peak := use0.rss
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() { peak = coordinatorRSSPeak(t, stop, use0.rss) })
	stormStart := time.Now()
	down, err := setAllReady(c, storm, false)
	if err != nil {
		t.Fatalf("taking the storm's services down: %v", err)
	}
	sent := time.Since(stormStart)
	stamped, seen := map[string]time.Time{}, map[string]time.Time{}
	inStorm := map[string]bool{}
	for _, s := range storm {
		inStorm[s.key()] = true
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(seen) < len(storm) && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		armedEvents(t, c, inStorm, stamped, seen)
	}
	close(stop)
	sampler.Wait()
	req1, use1 := apiRequests(t), coordinatorUsage(t)

	var byStamp, bySeen []time.Duration
	missing := 0
	for _, s := range storm {
		at, ok := down[s.key()]
		if _, armed := seen[s.key()]; !ok || !armed {
			missing++
			continue
		}
		// Event timestamps have whole seconds: the outage time is truncated the same way.
		byStamp = append(byStamp, stamped[s.key()].Sub(at.Truncate(time.Second)))
		bySeen = append(bySeen, seen[s.key()].Sub(at))
	}
	by, jobsMade := coveringJobs(t, stormStart, nil)
	uncovered := 0
	for _, s := range storm {
		if len(by[s.key()]) == 0 {
			uncovered++
		}
	}
	pods, err := c.CoreV1().Pods(depwatchNS).List(ctx, metav1.ListOptions{LabelSelector: "depwatch.io/kind=weeder"})
	if err != nil {
		t.Fatal(err)
	}
	podsMade, batches := 0, 0
	for _, p := range pods.Items {
		if !p.CreationTimestamp.Time.Before(stormStart.Truncate(time.Second)) {
			podsMade++
		}
	}
	for _, j := range jobsMade {
		if j.Labels[jobs.LabelBatch] == "true" {
			batches++
		}
	}
	stormFor := use1.cpu - use0.cpu
	t.Logf("storm at %d namespaces: %d services down in %s; outage → WeederArmed (Event time) p50 %s p99 %s max %s; (seen by a 1 s poll) p50 %s p99 %s; not armed after 3 min: %d; not covered by a Job: %d",
		n, len(storm), sent.Round(100*time.Millisecond), percentile(byStamp, .5), percentile(byStamp, .99), percentile(byStamp, 1), percentile(bySeen, .5).Round(100*time.Millisecond), percentile(bySeen, .99).Round(100*time.Millisecond), missing, uncovered)
	t.Logf("storm at %d namespaces: weeder Jobs created %d (%d batch), weeder pods created %d; coordinator API requests %.0f; CPU %.1f s; RSS peak %.1f MiB",
		n, len(jobsMade), batches, podsMade, req1-req0, stormFor, peak/(1<<20))
	if benchInProcess() {
		uncovered = 0 // in-process runs are Jobs in the coordinator's own store, not the API's; the Events name them
	}
	if missing > 0 || uncovered > 0 {
		t.Errorf("%d services without a WeederArmed Event, %d without a covering Job: recoveries would be lost", missing, uncovered)
	}

	// Lone outages during a mass deletion of the namespaces.
	if err := concurrently(storm, func(s benchService) error { return setReady(c, s, true) }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	var nss []string
	for i := 0; i < len(svcs); i += 2 {
		nss = append(nss, svcs[i].ns)
	}
	deleted := time.Now()
	go deleteNamespaces(nss)
	var lonely []time.Duration
	for i := range 5 {
		time.Sleep(3 * time.Second)
		s := lone[2*i] // one service of each lone namespace: each outage is its first
		at := time.Now()
		if err := setReady(c, s, false); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "the lone outage's WeederArmed Event", func() (bool, error) {
			return len(eventsFor(t, s.ns, s.name)["WeederArmed"]) > 0, nil
		})
		lonely = append(lonely, time.Since(at).Round(10*time.Millisecond))
	}
	t.Logf("lone outages during the deletion of %d namespaces (%s after it began): outage → WeederArmed seen (0.1 s poll): %v; p99 %s",
		len(nss), time.Since(deleted).Round(time.Second), lonely, percentile(lonely, .99).Round(100*time.Millisecond))

	// The next count starts clean: no weeder Job of this one holds a place under the cap, and
	// its namespaces are gone (the services-Ready gauge the next count waits on counts them).
	_ = c.BatchV1().Jobs(depwatchNS).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)},
		metav1.ListOptions{LabelSelector: "depwatch.io/kind=weeder"})
	if last {
		return
	}
	var loneNS []string
	for i := 0; i < len(lone); i += 2 {
		loneNS = append(loneNS, lone[i].ns)
	}
	deleteNamespaces(loneNS)
	waitFor(t, 15*time.Minute, "this count's namespaces to be gone", func() (bool, error) {
		list, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "depwatch.io/e2e=true"})
		if err != nil {
			return false, err
		}
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, prefix) {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("its namespaces are gone %s after their deletion began", time.Since(deleted).Round(time.Second))
}

// coordinatorHeap says where the coordinator's resident memory is, from its Go runtime
// metrics: the heap in use, the size at which the next collection starts (what the heap may
// grow to before it) and the heap's free pages not yet returned to the OS.
func coordinatorHeap(t *testing.T) string {
	t.Helper()
	m := lab.scrape(t)
	mib := func(name string) float64 { return m[name] / (1 << 20) }
	return fmt.Sprintf("Go heap in use %.1f MiB, next GC at %.1f MiB, free but not returned %.1f MiB, stacks %.1f MiB",
		mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_next_gc_bytes"),
		mib("go_memstats_heap_idle_bytes")-mib("go_memstats_heap_released_bytes"), mib("go_memstats_stack_inuse_bytes"))
}
