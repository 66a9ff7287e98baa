//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	vap "github.com/depwatch/depwatch/internal/admission"
)

// TestSecurityAWeedersTokenDeletesOnlyCrashLoopingPods: with a token minted for
// depwatch-weeder, as a thief who took it from a weeder pod would use it, the lab's policy
// depwatch-weeder-deletes refuses deleting a Running pod and a Completed pod, and evicting a
// crash-looping one (the test grants the eviction right in its namespace, so the refusal is
// the policy's, not RBAC's: the weeder's own RBAC grants none), each with a message naming
// the rule; the admin's same requests are admitted (dry runs), so the refusals are the
// policy's. Deleting the crash-looping pod with the weeder's token is admitted.
func TestSecurityAWeedersTokenDeletesOnlyCrashLoopingPods(t *testing.T) {
	parallel(t)
	ensureCoordinator(t)
	ctx := context.Background()
	ns := newNamespace(t, "sec-actions")
	weeder := serviceAccountClient(t, depwatchNS, "depwatch-weeder")

	// The right to evict here, which the weeder's ClusterRole no longer grants.
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "evict"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "evict"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "evict"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: depwatchNS, Name: "depwatch-weeder"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	sleepingPod(t, ns, "running", map[string]string{"app": "running"})
	completed := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "completed", Namespace: ns},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To(int64(0)),
			Containers: []corev1.Container{{Name: "app", Image: testappImage, ImagePullPolicy: corev1.PullNever, Command: []string{"/testapp", "exit", "0"}}}},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, completed, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crashingPod(t, ns, "crashing", map[string]string{"app": "crashing"})
	for name, phase := range map[string]corev1.PodPhase{"running": corev1.PodRunning, "completed": corev1.PodSucceeded} {
		waitFor(t, 2*time.Minute, "pod "+name+" "+string(phase), func() (bool, error) {
			p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == phase, err
		})
	}
	waitCrashLoopBackOff(t, ns, "crashing")

	client := func(as string, token kubernetes.Interface) kubernetes.Interface {
		if as == "admin" {
			return kube
		}
		return token
	}
	dryDelete := metav1.DeleteOptions{DryRun: dryRun}
	for _, c := range []struct {
		name    string
		do      func(as string) error
		message string
	}{
		{"delete-running", func(as string) error {
			return client(as, weeder).CoreV1().Pods(ns).Delete(ctx, "running", dryDelete)
		}, "may delete a pod only while it is crash-looping"},
		{"delete-completed", func(as string) error {
			return client(as, weeder).CoreV1().Pods(ns).Delete(ctx, "completed", dryDelete)
		}, "may delete a pod only while it is crash-looping"},
		{"evict-crash-looping", func(as string) error {
			return client(as, weeder).CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{
				ObjectMeta: metav1.ObjectMeta{Name: "crashing", Namespace: ns}, DeleteOptions: &dryDelete})
		}, "may not evict pods"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.do("weeder")
			if !vap.Refused(err) || vap.Policy(err) != "depwatch-weeder-deletes" || !apierrors.IsForbidden(err) {
				t.Fatalf("with the weeder's token: %v; want a refusal by depwatch-weeder-deletes", err)
			}
			if msg, _ := vap.Message(err); !strings.Contains(msg, "depwatch-weeder "+c.message) || !strings.Contains(msg, ns+"/") {
				t.Errorf("the refusal %q does not say %q and name the pod", msg, "depwatch-weeder "+c.message)
			}
			if err := c.do("admin"); err != nil {
				t.Errorf("the admin's same request (a dry run): %v; want it admitted, so the refusal is the policy's", err)
			}
		})
	}

	// What a weeder is for: the crash-looping pod's delete is admitted. (The container exits
	// at once, so it is Running, and not crash-looping, only for an instant of each restart:
	// a delete that meets that instant is refused and made again.)
	waitFor(t, time.Minute, "the weeder's token deleting the crash-looping pod", func() (bool, error) {
		err := weeder.CoreV1().Pods(ns).Delete(ctx, "crashing", metav1.DeleteOptions{})
		if vap.Refused(err) {
			t.Logf("refused at a restart, trying again: %v", err)
			return false, nil
		}
		return err == nil, err
	})
}
