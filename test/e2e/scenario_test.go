//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/depwatch/depwatch/jobs"
)

// The upstream/dependent pair the weeder scenarios use. Both run on the host network and
// talk over loopback: the upstream listens on a port of its own, the dependent exits 1
// whenever it cannot connect to it, so it crash-loops for real while the upstream is down.
// The local overlay's config maps Service "upstream" to pods labelled depwatch.io/e2e=dependent.
const (
	upstreamName   = "upstream"
	dependentName  = "dependent"
	dependentLabel = "depwatch.io/e2e"
	depwatchNS     = "depwatch"
)

var usedPorts sync.Map

// freePort picks a loopback port no other test uses and nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(10000)
		if _, taken := usedPorts.LoadOrStore(port, true); taken {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = ln.Close()
		return port
	}
	t.Fatal("no free loopback port found")
	return 0
}

// hostNetworkDeployment runs testapp on the host network; its pods carry labels plus app=name.
// A pod is Ready while readyAddr (on loopback) accepts TCP connections. The kubelet checks that
// itself: an exec probe every second would start a process in the container each time, and
// with dozens of such pods those execs alone kept both cores of the test machine busy.
func hostNetworkDeployment(name, ns string, replicas int32, labels map[string]string, command []string, readyAddr string) *appsv1.Deployment {
	zero := int64(0)
	withApp := map[string]string{"app": name}
	for k, v := range labels {
		withApp[k] = v
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: withApp},
				Spec: corev1.PodSpec{
					HostNetwork:                   true,
					TerminationGracePeriodSeconds: &zero,
					Containers: []corev1.Container{{
						Name: "app", Image: testappImage, ImagePullPolicy: corev1.PullNever, Command: command,
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
								Host: "127.0.0.1", Port: intstr.FromInt32(int32(mustPort(readyAddr))),
							}},
							PeriodSeconds: 1, TimeoutSeconds: 2, FailureThreshold: 1,
						},
					}},
				},
			},
		},
	}
}

// pair is one upstream Service with its dependent Deployment, in one test namespace.
type pair struct {
	t    *testing.T
	ns   string
	svc  string // the upstream Service; the local config watches "upstream" only
	addr string
	// jobsNS is where the coordinator that weeds this pair runs its Jobs: "" for the lab's
	// namespace (depwatch); a Helm release's own namespace in the chart's test.
	jobsNS string
	// upstreamNS is the upstream's namespace when the dependent in ns depends on another
	// namespace's Service (a depends-on annotation naming `upstreamNS/svc`); "" for ns.
	upstreamNS string
}

func (p *pair) upstreamNamespace() string {
	if p.upstreamNS != "" {
		return p.upstreamNS
	}
	return p.ns
}

// serviceKey is the upstream Service's <namespace>/<name>, as Jobs and logs name it.
func (p *pair) serviceKey() string { return p.upstreamNamespace() + "/" + p.svc }

func (p *pair) jobsNamespace() string {
	if p.jobsNS != "" {
		return p.jobsNS
	}
	return depwatchNS
}

func newPair(t *testing.T, ns string) *pair {
	t.Helper()
	return newPairNamed(t, ns, upstreamName)
}

func newPairNamed(t *testing.T, ns, svcName string) *pair {
	t.Helper()
	p := startPair(t, ns, svcName)
	p.waitServiceReady(true, time.Minute)
	p.startDependent()
	p.waitDependentReady(time.Minute, "")
	return p
}

// startPair creates the Service and its upstream without waiting for them; startDependent
// adds the dependent. Tests that need many pairs start them all before they wait: the
// dependent starts once its upstream serves, or it would begin with crashes of its own.
func startPair(t *testing.T, ns, svcName string) *pair {
	t.Helper()
	p := &pair{t: t, ns: ns, svc: svcName, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"role": svcName},
			Ports:    []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(int32(mustPort(p.addr)))}},
		},
	}
	if _, err := kube.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating service %s/%s: %v", ns, svcName, err)
	}
	p.addUpstream(upstreamName, p.addr)
	return p
}

func (p *pair) startDependent() {
	p.t.Helper()
	p.startDependentNamed(dependentName)
}

// startDependentNamed adds one more dependent Deployment, called name (its pods are labelled
// app=name, and as dependents for the weeder's selector).
func (p *pair) startDependentNamed(name string) {
	p.t.Helper()
	dep := hostNetworkDeployment(name, p.ns, 1, map[string]string{dependentLabel: "dependent"},
		[]string{"/testapp", "depend", p.addr}, p.addr)
	if _, err := kube.AppsV1().Deployments(p.ns).Create(context.Background(), dep, metav1.CreateOptions{}); err != nil {
		p.t.Fatalf("creating deployment %s/%s: %v", p.ns, name, err)
	}
}

// addUpstream runs one more Deployment behind the upstream Service, listening on addr (pods on
// the host network cannot share a port, so each upstream instance has its own).
func (p *pair) addUpstream(name, addr string) {
	p.t.Helper()
	up := hostNetworkDeployment(name, p.ns, 1, map[string]string{"role": p.svc},
		[]string{"/testapp", "serve", addr}, addr)
	if _, err := kube.AppsV1().Deployments(p.ns).Create(context.Background(), up, metav1.CreateOptions{}); err != nil {
		p.t.Fatalf("creating deployment %s/%s: %v", p.ns, name, err)
	}
}

func mustPort(addr string) int {
	_, port, _ := net.SplitHostPort(addr)
	var n int
	fmt.Sscanf(port, "%d", &n)
	return n
}

// serviceReady tells whether any EndpointSlice of the upstream Service has a ready endpoint.
func (p *pair) serviceReady() (bool, error) {
	slices, err := kube.DiscoveryV1().EndpointSlices(p.ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + p.svc,
	})
	if err != nil {
		return false, err
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				return true, nil
			}
		}
	}
	return false, nil
}

func (p *pair) waitServiceReady(ready bool, timeout time.Duration) time.Time {
	p.t.Helper()
	waitFor(p.t, timeout, fmt.Sprintf("service %s/%s ready=%v", p.ns, p.svc, ready), func() (bool, error) {
		got, err := p.serviceReady()
		return err == nil && got == ready, err
	})
	return time.Now()
}

func (p *pair) scaleUpstream(replicas int32) {
	p.t.Helper()
	scaleDeployment(p.t, p.ns, upstreamName, replicas)
}

func scaleDeployment(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := kube.AppsV1().Deployments(ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("scaling deployment %s/%s to %d: %v", ns, name, replicas, err)
	}
}

// waitDependentReady waits for a Ready dependent pod other than notUID and returns it.
func (p *pair) waitDependentReady(timeout time.Duration, notUID types.UID) (corev1.Pod, time.Time) {
	p.t.Helper()
	return waitPodReady(p.t, p.dependent(), timeout, notUID)
}

// waitPodReady waits for a Ready pod of the workload other than notUID (one not being
// deleted) and returns it with the moment it was seen.
func waitPodReady(t *testing.T, w podsOf, timeout time.Duration, notUID types.UID) (corev1.Pod, time.Time) {
	t.Helper()
	var ready corev1.Pod
	waitFor(t, timeout, fmt.Sprintf("a ready pod %s in %s", w.selector, w.ns), func() (bool, error) {
		list, err := kube.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{LabelSelector: w.selector})
		if err != nil {
			return false, err
		}
		for _, pod := range list.Items {
			if pod.DeletionTimestamp == nil && pod.UID != notUID && podReady(pod) {
				ready = pod
				return true, nil
			}
		}
		return false, nil
	})
	return ready, time.Now()
}

func podReady(pod corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// weederJobs lists the weeder Jobs that cover this pair's service (its own, and batch Jobs
// that list it), oldest first.
func (p *pair) weederJobs() []batchv1.Job {
	p.t.Helper()
	list, err := kube.BatchV1().Jobs(p.jobsNamespace()).List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/kind=weeder"})
	if err != nil {
		p.t.Fatalf("listing weeder jobs: %v", err)
	}
	var out []batchv1.Job
	for _, j := range list.Items {
		if slices.Contains(jobs.ReadFacts(&j).Covers(), p.serviceKey()) {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
	})
	return out
}

// jobsCreatedAfter keeps the Jobs created at or after t (API timestamps have 1 s resolution).
func jobsCreatedAfter(jobs []batchv1.Job, t time.Time) []batchv1.Job {
	var out []batchv1.Job
	for _, j := range jobs {
		if !j.CreationTimestamp.Time.Before(t.Truncate(time.Second)) {
			out = append(out, j)
		}
	}
	return out
}

var (
	coordinatorOnce sync.Once
	coordinatorErr  error
	coordinatorUp   bool
)

// ensureCoordinator installs depwatch with `kubectl apply -k manifests/overlays/local`, once
// per suite, and waits for the coordinator to be available. TestMain removes it at the end.
func ensureCoordinator(t *testing.T) {
	t.Helper()
	coordinatorOnce.Do(func() {
		// A previous suite's removal may still be under way: apply into a terminating
		// namespace fails.
		waitFor(t, 2*time.Minute, "namespace depwatch from an earlier run to be gone", func() (bool, error) {
			ns, err := kube.CoreV1().Namespaces().Get(context.Background(), depwatchNS, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return err == nil && ns.DeletionTimestamp == nil, err
		})
		out, err := kubectl(t, "apply", "-k", repoRoot+"/manifests/overlays/local")
		if err != nil {
			coordinatorErr = fmt.Errorf("kubectl apply -k manifests/overlays/local: %v\n%s", err, out)
			return
		}
		coordinatorUp = true
		out, err = kubectl(t, "-n", depwatchNS, "rollout", "status", "deployment/depwatch-coordinator", "--timeout=90s")
		if err != nil {
			coordinatorErr = fmt.Errorf("the coordinator did not become available: %v\n%s", err, out)
			return
		}
		// Available is not yet leading: a test must not begin before the coordinator acts.
		if !lab.leadsWithin(t, minWait) {
			coordinatorErr = fmt.Errorf("timed out after %s waiting for the available coordinator to take the lead", minWait)
		}
	})
	if coordinatorErr != nil {
		logs, _ := kubectl(t, "-n", depwatchNS, "logs", "deployment/depwatch-coordinator", "--tail=50")
		t.Fatalf("%v\ncoordinator logs:\n%s", coordinatorErr, logs)
	}
}

// removeCoordinator undoes ensureCoordinator; TestMain calls it after the suite.
func removeCoordinator() {
	if coordinatorUp {
		_, _ = runKubectl("delete", "-k", repoRoot+"/manifests/overlays/local", "--ignore-not-found", "--wait=false")
	}
}
