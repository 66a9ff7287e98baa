//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestSecurityAJobPodSendsItsTokenOnlyToItsOwnCluster: where no admission policy binds (a
// cluster without ValidatingAdmissionPolicy, or a namespace outside the binding), a pod that
// runs `depwatch reap` as a weeder's service account with KUBECONFIG naming a kubeconfig
// written from one of the pod's own annotations, whose server is a listener of the
// attacker's (here: the test's, on the node's loopback), whose credential is the service
// account's token file and which carries an exec credential plugin running `depwatch reap`
// with rules of the attacker's, is admitted and runs on the real kubelet. The run ignores the
// kubeconfig: it says so, talks to the cluster it runs in with its service account, and the
// listener sees no connection, so neither the token nor the plugin ever leaves or runs.
func TestSecurityAJobPodSendsItsTokenOnlyToItsOwnCluster(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := newNamespace(t, "sec-token")
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "depwatch-weeder"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	var connections atomic.Int64
	go func() {
		for {
			c, err := listener.Accept()
			if err != nil {
				return
			}
			connections.Add(1)
			c.Close()
		}
	}()
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: thief
  cluster: {server: "https://%s", insecure-skip-tls-verify: true}
users:
- name: thief
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /depwatch
      args: [reap]
      env: [{name: CONTAINER_STATUSES, value: Completed}, {name: REAP_AT_START, value: "true"}]
      interactiveMode: Never
contexts:
- name: thief
  context: {cluster: thief, user: thief}
current-context: thief
`, listener.Addr())

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "thief", Namespace: ns, Annotations: map[string]string{"kubeconfig": kubeconfig}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "depwatch-weeder",
			RestartPolicy:      corev1.RestartPolicyNever,
			HostNetwork:        true, // the lab has no kube-proxy; it also puts the listener in reach
			Containers: []corev1.Container{{
				Name: "weeder", Image: depwatchImage, ImagePullPolicy: corev1.PullNever, Args: []string{"reap"},
				Env: []corev1.EnvVar{
					{Name: "KUBECONFIG", Value: "/kube/config"},
					{Name: "NAMESPACE", Value: ns},
					{Name: "CONTAINER_STATUSES", Value: "CrashLoopBackOff"},
					{Name: "REAP_AT_START", Value: "true"},
					{Name: "RUN_DURATION", Value: "1s"},
					{Name: "DRY_RUN", Value: "true"},
					{Name: "KUBERNETES_SERVICE_HOST", Value: apiServerHost},
					{Name: "KUBERNETES_SERVICE_PORT", Value: apiServerPort},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "kube", MountPath: "/kube", ReadOnly: true}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{{Name: "kube", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
				Items: []corev1.DownwardAPIVolumeFile{{Path: "config", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['kubeconfig']"}}},
			}}}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the pod was not admitted where no policy binds: %v", err)
	}
	var phase corev1.PodPhase
	waitFor(t, 3*time.Minute, "the thief pod to finish", func() (bool, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, "thief", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	logs := mustKubectl(t, "logs", "-n", ns, "thief")
	t.Logf("the run ended %s; its log:\n%s", phase, logs)
	if n := connections.Load(); n != 0 {
		t.Errorf("the listener named by the pod's kubeconfig saw %d connections: the token left the pod", n)
	}
	if !strings.Contains(logs, "KUBECONFIG is set, and ignored") {
		t.Errorf("the run does not say it ignored KUBECONFIG")
	}
	// It talked to its own cluster: the service account has no rights here, so the API
	// server (not the listener) refused its pod list.
	if !strings.Contains(logs, "forbidden") {
		t.Errorf("the run shows no answer from its own cluster's API server (a forbidden pod list)")
	}
}
