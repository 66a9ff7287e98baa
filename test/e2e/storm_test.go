//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// stormRate and stormUpdates: EndpointSlice updates per second, and how many (a minute's
// worth at that rate; a loaded machine takes longer to send them, and the storm lasts until
// they are all sent: the test counts updates, it does not time them). stormMaxFor only ends a
// storm that cannot make progress.
const (
	stormRate    = 200
	stormUpdates = 60 * stormRate
	stormMaxFor  = 5 * time.Minute
	// stormIdleFor: how long the coordinator's idle CPU is measured before the storm.
	stormIdleFor = 7 * time.Second
)

// coordinatorUsage reads the coordinator's own process metrics: CPU seconds used so far,
// resident memory, and Jobs launched so far.
type usage struct {
	cpu      float64
	rss      float64
	launched float64
}

func coordinatorUsage(t *testing.T) usage {
	t.Helper()
	samples := lab.scrape(t)
	if samples == nil {
		t.Fatal("the coordinator's metrics cannot be read")
	}
	u := usage{cpu: samples["process_cpu_seconds_total"], rss: samples["process_resident_memory_bytes"]}
	for name, v := range samples {
		if strings.HasPrefix(name, "depwatch_coordinator_jobs_launched_total{") {
			u.launched += v
		}
	}
	return u
}

// stormSlice is an EndpointSlice the test owns (selectorless Service, so no controller
// fights over it) with n endpoints, the first `ready` of them ready.
func stormSlice(ns, svc string, n, ready int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: svc + "-storm", Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc,
			discoveryv1.LabelManagedBy:   "e2e.depwatch.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("tcp"), Port: ptr.To(int32(80))}},
	}
	for i := range n {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.88.250.%d", i+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(i < ready)},
		})
	}
	return s
}

// createReadyService makes a selectorless Service with an EndpointSlice of its own (4
// endpoints, all ready): Ready without pods, and no controller manages the slice.
func createReadyService(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Port: 80}}},
	}
	created, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating service %s/%s: %v", ns, name, err)
	}
	// Owned by its Service, as the EndpointSlice controller's slices are (the coordinator
	// takes the Service's UID for its Events from there).
	slice := stormSlice(ns, name, 4, 4)
	slice.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: created.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	if _, err := kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the endpoint slice of %s/%s: %v", ns, name, err)
	}
}

// stormSlicesPerService: a Service of the storm has this many EndpointSlices (one the
// Service owns from createReadyService, the rest extra), so the storm's writes spread over
// many objects. Writes to one object are made one at a time: concurrent patches of the same
// object conflict and are retried inside the API server until they time out, which measures
// the API server, not the coordinator.
const stormSlicesPerService = 4

// addStormSlices gives the Service more EndpointSlices of the storm's kind (all ready) and
// returns the names of all its storm slices.
func addStormSlices(t *testing.T, ns, svc string) []string {
	t.Helper()
	names := []string{svc + "-storm"}
	for k := 1; k < stormSlicesPerService; k++ {
		slice := stormSlice(ns, svc, 4, 4)
		slice.Name = fmt.Sprintf("%s-storm-%d", svc, k)
		if _, err := kube.DiscoveryV1().EndpointSlices(ns).Create(context.Background(), slice, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating endpoint slice %s/%s: %v", ns, slice.Name, err)
		}
		names = append(names, slice.Name)
	}
	return names
}

// TestEndpointSliceStormLaunchesNothingAndKeepsTheCoordinatorFlat: for a minute, 200
// EndpointSlice updates per second: half on ten Services the config does not name (their
// readiness flaps), half on a Service named like a configured one ("upstream") whose endpoints
// churn while it stays Ready. No Job is launched. The coordinator's CPU and resident memory
// through the storm are figures in the log (docs/benchmarks.md: under half a core on average,
// under 32 MiB of growth), not the test's verdict: a busy machine changes them. It runs in the
// quiet phase, beside only the RBAC listing (which launches nothing): it counts the lab
// coordinator's launches as a whole.
func TestEndpointSliceStormLaunchesNothingAndKeepsTheCoordinatorFlat(t *testing.T) {
	quiet(t, "storm")
	ensureCoordinator(t)
	waitEarlierNamespacesGone(t)
	ns := newNamespace(t, "storm")
	ctx := context.Background()
	names := []string{upstreamName}
	for i := range 10 {
		names = append(names, fmt.Sprintf("unrelated-%d", i))
	}
	slices := map[string][]string{} // Service → its storm slices
	for _, name := range names {
		createReadyService(t, ns, name)
		slices[name] = addStormSlices(t, ns, name)
	}
	lockOf := map[string]*sync.Mutex{}
	for _, ss := range slices {
		for _, sl := range ss {
			lockOf[sl] = &sync.Mutex{}
		}
	}
	// Its own client: the storm must not be slowed by the suite's client-side rate limit.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 2*stormRate, 2*stormRate
	storm := kubernetes.NewForConfigOrDie(cfg)

	// The baseline only feeds the logged idle figure and the start of the memory and launch
	// counts: a few seconds for the new objects to settle and a few to measure are enough,
	// and the quiet phase, which nothing else may share, is shorter for it.
	time.Sleep(3 * time.Second)
	idleFrom := coordinatorUsage(t)
	time.Sleep(stormIdleFor)
	idleTo := coordinatorUsage(t)

	var sent, failed atomic.Int64
	stormCtx, stop := context.WithTimeout(ctx, stormMaxFor)
	defer stop()
	// One pacer hands out stormRate updates a second to a sender per slice: an update waits
	// on the API server and etcd, so throughput needs many in flight, not a fast loop.
	updates := make(chan int)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(updates)
		tick := time.NewTicker(time.Second / stormRate)
		defer tick.Stop()
		for i := range stormUpdates {
			select {
			case <-stormCtx.Done():
				return
			case <-tick.C:
			}
			select {
			case updates <- i:
			case <-stormCtx.Done():
				return
			}
		}
	}()
	for range len(lockOf) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range updates {
				// Every other update goes to the watched name, the rest to the ten others.
				name, ready := upstreamName, 1+(i/2)%4 // keeps 1..4 ready endpoints
				if i%2 == 1 {
					name, ready = names[1+(i/2)%10], (i/20%2)*4 // flaps: none ready, all ready
				}
				slice := slices[name][(i/2)%stormSlicesPerService]
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.depwatch.io/tick":"%d"}},"endpoints":%s}`,
					i, endpointsJSON(4, ready))
				lockOf[slice].Lock()
				_, err := storm.DiscoveryV1().EndpointSlices(ns).Patch(stormCtx, slice, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				lockOf[slice].Unlock()
				if err != nil {
					if stormCtx.Err() == nil && failed.Add(1) == 1 {
						t.Logf("first failed update: %v", err)
					}
					continue
				}
				sent.Add(1)
			}
		}()
	}
	stormStart := time.Now()
	senders := make(chan struct{})
	go func() { wg.Wait(); close(senders) }()
	mid := make([]usage, 0, 6)
	for done := false; !done; {
		select {
		case <-senders:
			done = true
		case <-time.After(10 * time.Second):
			mid = append(mid, coordinatorUsage(t))
		}
	}
	stormFor := time.Since(stormStart)
	stormTo := coordinatorUsage(t)

	rate := float64(sent.Load()) / stormFor.Seconds()
	idleCPU := (idleTo.cpu - idleFrom.cpu) / stormIdleFor.Seconds()
	stormCPU := (stormTo.cpu - idleTo.cpu) / stormFor.Seconds()
	peak := stormTo.rss
	for _, u := range mid {
		peak = max(peak, u.rss)
	}
	const mib = 1 << 20
	t.Logf("storm: %d updates in %s (%.0f/s, %d failed); coordinator CPU %.3f cores idle, %.3f cores in the storm; RSS %.1f MiB before, %.1f MiB peak, %.1f MiB after",
		sent.Load(), stormFor.Round(time.Second), rate, failed.Load(), idleCPU, stormCPU, idleTo.rss/mib, peak/mib, stormTo.rss/mib)

	if sent.Load() < stormUpdates*9/10 {
		t.Errorf("the storm got only %d of its %d updates through (%d failed, %s): it proves too little", sent.Load(), stormUpdates, failed.Load(), stormFor.Round(time.Second))
	}
	if n := stormTo.launched - idleFrom.launched; n != 0 {
		t.Errorf("the coordinator launched %.0f Job(s) during the storm, want none", n)
	}
	list, err := kube.BatchV1().Jobs(depwatchNS).List(ctx, metav1.ListOptions{LabelSelector: "depwatch.io/namespace=" + ns})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d Job(s) launched for the storm's namespace, first %s", len(list.Items), list.Items[0].Name)
	}
}

// endpointsJSON is the endpoints list of a storm slice: n endpoints, the first ready of them
// ready.
func endpointsJSON(n, ready int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"addresses":["10.88.250.%d"],"conditions":{"ready":%v}}`, i+1, i < ready)
	}
	b.WriteByte(']')
	return b.String()
}
