//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// massDeletionNamespaces × the two configured service names (etcd-main-client,
// kube-apiserver) are deleted at once: a seed losing many control planes together.
const massDeletionNamespaces = 100

// createControlPlaneNamespaces makes n namespaces, each with the two configured services
// Ready as API objects only (no pods), as a seed's shoot namespaces look to the coordinator.
func createControlPlaneNamespaces(t *testing.T, n int) []string {
	t.Helper()
	ctx := context.Background()
	prefix := "e2e-mass-" + rand.String(4)
	names := make([]string, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		names[i] = fmt.Sprintf("%s-%03d", prefix, i)
		wg.Go(func() {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{"depwatch.io/e2e": "true"}}}
			if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() { deleteNamespaces(names) })
	select {
	case err := <-errs:
		t.Fatalf("creating the control-plane namespaces: %v", err)
	default:
	}
	for _, ns := range names {
		createReadyService(t, ns, "etcd-main-client")
		createReadyService(t, ns, "kube-apiserver")
	}
	return names
}

// deleteNamespaces deletes them all at once, without waiting.
func deleteNamespaces(names []string) {
	var wg sync.WaitGroup
	for _, ns := range names {
		wg.Go(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
	wg.Wait()
}

// TestOutagesDuringAMassDeletionAreArmedAtOnceAndRecovered: while 200 configured Services
// go away with their 100 namespaces, two real upstream/dependent pairs, one made before the
// deletion and one during it, go down and come back with their dependents in
// CrashLoopBackOff. Each is armed while the deletion is still under way, not behind it (a
// deleted service without a weeder costs the coordinator no API call, so the deletion queues
// nothing in front of it; how soon is in the log), its dependent is restarted by the weeder
// at the return, before the kubelet's own restart, and the service's Events say so. It runs
// in the quiet phase, in a group of its own: deleting 100 namespaces loads the API server and
// the controller manager for a minute, and the armed-during-the-deletion check needs the
// deletion to last.
func TestOutagesDuringAMassDeletionAreArmedAtOnceAndRecovered(t *testing.T) {
	quiet(t, "deletion")
	ensureCoordinator(t)
	mass := createControlPlaneNamespaces(t, massDeletionNamespaces)
	before := newPair(t, newNamespace(t, "mass-before"))
	time.Sleep(5 * time.Second) // the coordinator has seen the services Ready before they go

	deleted := time.Now()
	deleteNamespaces(mass)
	t.Logf("deletion of %d namespaces (%d configured Services) requested", len(mass), 2*len(mass))
	// The namespace controller deletes EndpointSlices some seconds into each namespace's
	// deletion: the outages begin once the coordinator is receiving the gone services.
	prefix := mass[0][:len(mass[0])-3]
	waitFor(t, 2*time.Minute, "the first tenth of the deleted services' EndpointSlices to be gone", func() (bool, error) {
		left, err := slicesLeftIn(prefix)
		return err == nil && left <= 2*len(mass)*9/10, err
	})
	t.Logf("the deleted services' EndpointSlices began to go %s after the deletion", time.Since(deleted).Round(time.Second))

	t.Run("group", func(t *testing.T) {
		t.Run("pair created before the deletion", func(t *testing.T) {
			t.Parallel()
			before.t = t
			outageDuringBacklog(t, before, prefix)
		})
		t.Run("pair created during the deletion", func(t *testing.T) {
			t.Parallel()
			outageDuringBacklog(t, newPair(t, newNamespace(t, "mass-during")), prefix)
		})
	})
	gone := 0
	for _, ns := range mass {
		if _, err := kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err != nil {
			gone++
		}
	}
	t.Logf("%d of %d namespaces gone %s after the deletion began", gone, len(mass), time.Since(deleted).Round(time.Second))
}

// slicesLeftIn counts the test-made EndpointSlices left in the namespaces named prefix*.
func slicesLeftIn(prefix string) (int, error) {
	left, err := kube.DiscoveryV1().EndpointSlices("").List(context.Background(), metav1.ListOptions{LabelSelector: "endpointslice.kubernetes.io/managed-by=e2e.depwatch.io"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range left.Items {
		if strings.HasPrefix(s.Namespace, prefix) {
			n++
		}
	}
	return n, nil
}

// outageDuringBacklog takes the pair's upstream down, waits for its armed weeder and for the
// dependent's back-off to outlast the rest of the test's steps, brings the upstream back and
// checks that the weeder, not the kubelet, restarted the dependent.
func outageDuringBacklog(t *testing.T, p *pair, massPrefix string) {
	outageStart := p.beginOutage()
	downAt := p.waitServiceReady(false, time.Minute)
	job := p.waitArmedJob(outageStart, 90*time.Second)
	t.Logf("%s/%s: armed weeder Job %s created %s after the service went down", p.ns, p.svc, job.Name, job.CreationTimestamp.Sub(downAt.Truncate(time.Second)))
	// Not a place behind the deletion: the outage was armed while the deleted namespaces'
	// EndpointSlices were still going (seen now, so still there when the Job was created).
	if left, err := slicesLeftIn(massPrefix); err == nil && left == 0 {
		t.Errorf("%s/%s: the armed weeder came only after every deleted service's EndpointSlice was gone: the outage waited behind the deletion", p.ns, p.svc)
	}
	// 30 s or more of back-off left: the return and the weeder's restart fit in it with a
	// wide margin, so the kubelet cannot restart the dependent first.
	cl := p.waitCrashLoop(30*time.Second, 4*time.Minute)
	requireBackOffAhead(t, cl, 20*time.Second, "bringing the upstream back")
	p.scaleUpstream(1)
	p.waitServiceReady(true, time.Minute)
	ready, took := p.restartedByWeeder(cl)
	t.Logf("%s: upstream Ready → dependent %s Ready in %s (kubelet's own restart due at %s)", p.ns, ready.Name, took, clock(cl.kubeletRestart))
	if ev := eventsFor(t, p.ns, p.svc)["WeederArmed"]; len(ev) != 1 {
		t.Errorf("WeederArmed events on %s/%s: %d, want one saying the weeder was armed", p.ns, p.svc, len(ev))
	}
}
