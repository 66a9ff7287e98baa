//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator/egress"
)

// TestSecurityNetworkPoliciesConfineDepwatchsJobs: the base's NetworkPolicies are installed in
// depwatch's namespace, the coordinator keeps the Jobs' egress to the real API server's
// addresses (coordinator/egress), and where the cluster enforces NetworkPolicies, a pod with a weeder's or
// a probe Job's labels there cannot connect to a pod that a pod without them reaches. The
// local cluster enforces none (its network plugin is CNI's bridge, hack/cluster-up.sh), and
// depwatch's pods run on the host network there, which NetworkPolicies never select: the test
// finds that out with a deny-all policy of its own, and says so when it skips.
// manifests/policies_test.go checks, without a cluster, that each policy selects the pods it
// is written for.
func TestSecurityNetworkPoliciesConfineDepwatchsJobs(t *testing.T) {
	parallel(t)
	ensureCoordinator(t)
	ctx := context.Background()
	for _, name := range []string{"depwatch-coordinator", "depwatch-weeder", "depwatch-probe"} {
		if _, err := kube.NetworkingV1().NetworkPolicies(depwatchNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("NetworkPolicy %s/%s: %v", depwatchNS, name, err)
		}
	}
	// The Jobs' way to the API server, kept by the coordinator: the real Service's and
	// endpoints' addresses, each a single host.
	svc, err := kube.CoreV1().Services(egress.ServiceNamespace).Get(ctx, egress.ServiceName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slices, err := kube.DiscoveryV1().EndpointSlices(egress.ServiceNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + egress.ServiceName})
	if err != nil {
		t.Fatal(err)
	}
	var eps []*discoveryv1.EndpointSlice
	for i := range slices.Items {
		eps = append(eps, &slices.Items[i])
	}
	want := egress.Rules(svc, eps)
	if len(want) == 0 {
		t.Fatalf("the kubernetes Service gives no egress rule: %+v", svc.Spec)
	}
	if len(eps) == 0 {
		// The local cluster's API server listens on loopback, which cannot be an endpoint
		// (hack/cluster-up.sh: --endpoint-reconciler-type none): its cluster IP alone.
		t.Logf("the kubernetes Service has no EndpointSlice here; the policy allows its cluster IP alone")
	}
	var got []networkingv1.NetworkPolicyEgressRule
	waitFor(t, 2*time.Minute, "the coordinator to apply NetworkPolicy "+egress.PolicyName, func() (bool, error) {
		np, err := kube.NetworkingV1().NetworkPolicies(depwatchNS).Get(ctx, egress.PolicyName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got = np.Spec.Egress
		return equality.Semantic.DeepEqual(got, want), nil
	})
	for _, r := range got {
		for _, to := range r.To {
			if to.IPBlock == nil || !(strings.HasSuffix(to.IPBlock.CIDR, "/32") || strings.HasSuffix(to.IPBlock.CIDR, "/128")) {
				t.Errorf("%s allows %+v, not a single host", egress.PolicyName, to)
			}
		}
	}

	// Does this cluster enforce NetworkPolicies? A pod reaches one listener, and then one
	// behind a deny-all ingress policy.
	ns := newNamespace(t, "sec-netpol")
	const port = 8080
	open := listener(t, ns, "open")
	if !connects(t, ns, "baseline", nil, open, port) {
		t.Skip("a pod cannot reach another pod here at all, so NetworkPolicies cannot be told at work")
	}
	guarded := listener(t, ns, "guarded")
	denyAll := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if _, err := kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, denyAll, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if connects(t, ns, "enforcement", nil, guarded, port) {
		t.Skip("this cluster does not enforce NetworkPolicies: a pod reached another through a deny-all policy. " +
			"The local cluster's network plugin is CNI's bridge (hack/cluster-up.sh), which enforces none, and " +
			"depwatch's pods run on the host network there, which NetworkPolicies never select. On a cluster that " +
			"enforces them this test checks that depwatch's Jobs reach no other pod")
	}

	if !connects(t, depwatchNS, "netpol-control", map[string]string{"app": "netpol-control"}, open, port) {
		t.Fatalf("a pod in %s without depwatch's labels cannot reach %s:%d either: nothing to compare with", depwatchNS, open, port)
	}
	for _, kind := range []string{"weeder", "probe"} {
		labels := map[string]string{"app.kubernetes.io/name": "depwatch", "app.kubernetes.io/component": kind}
		if connects(t, depwatchNS, "netpol-"+kind, labels, open, port) {
			t.Errorf("a pod with a %s Job's labels in %s reached a pod at %s:%d; its NetworkPolicy allows only the API server", kind, depwatchNS, open, port)
		}
	}
}

// listener runs a pod (not on the host network) that accepts TCP connections on 8080 and
// returns its IP once it is Ready.
func listener(t *testing.T, ns, name string) string {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{
				Name: "serve", Image: testappImage, ImagePullPolicy: corev1.PullNever,
				Command:        []string{"/testapp", "serve", ":8080"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
			}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	waitFor(t, 2*time.Minute, "listener "+ns+"/"+name+" to be Ready", func() (bool, error) {
		p, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip = p.Status.PodIP
		return podReady(*p) && ip != "", nil
	})
	return ip
}

// connects runs, in ns, a pod with labels (not on the host network, under the namespace's
// default service account, restricted as depwatch's namespace requires) that tries once to
// connect to ip:port, and says whether it did: testapp depend runs on when it connects, and
// exits 1 when it cannot. The pod is removed.
func connects(t *testing.T, ns, name string, labels map[string]string, ip string, port int) bool {
	t.Helper()
	ctx := context.Background()
	name = dnsName(name)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To(int64(0)),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "connect", Image: testappImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/testapp", "depend", fmt.Sprintf("%s:%d", ip, port)},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	var connected bool
	waitFor(t, 2*time.Minute, "pod "+ns+"/"+name+" to connect or give up", func() (bool, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			return true, nil
		}
		if p.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		out, err := kubectl(t, "-n", ns, "logs", name)
		connected = strings.Contains(out, "is up, running")
		return connected, err
	})
	t.Logf("pod %s/%s with labels %v connecting to %s:%d: connected %v", ns, name, labels, ip, port, connected)
	return connected
}
