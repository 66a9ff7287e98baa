//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	vap "github.com/depwatch/depwatch/internal/admission"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// TestSecurityAProbesTokenScalesOnlyTheConfiguredDependentsBackAndForth: with a token minted
// for depwatch-probe, as a thief who took it from a probe pod would use it, the lab's
// policies refuse scaling a Deployment no prober config names (depwatch-probe-targets, which
// reads the dependents the coordinator wrote into ConfigMap depwatch/depwatch-scale-targets),
// scaling a named one to 7, storing a raised count, writing another annotation on it, and
// writing its scale subresource (depwatch-probe-scales), each with a message naming the rule; the admin's same requests are admitted (dry runs). The probe's own
// sequence, made with the token as probe/scale.go makes it (retried on conflict) (store the replicas and the
// marker, scale to 0, scale back to the stored count, remove the annotations), is admitted.
func TestSecurityAProbesTokenScalesOnlyTheConfiguredDependentsBackAndForth(t *testing.T) {
	parallel(t)
	ensureCoordinator(t)
	ctx := context.Background()
	ns := newNamespace(t, "sec-probe")
	token := serviceAccountClient(t, depwatchNS, "depwatch-probe")

	// A Deployment the running config names, from what the coordinator wrote.
	var named string
	waitFor(t, time.Minute, "the coordinator to write the probe policy's parameters", func() (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(depwatchNS).Get(ctx, jobs.ScaleTargetsName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for k, v := range cm.Data {
			if name, ok := strings.CutPrefix(k, "Deployment."); ok && v == "apps/v1" {
				named = name
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("the config names Deployment %s", named)
	for _, name := range []string{named, "not-a-dependent"} {
		d := sleeper(name, ns)
		d.Spec.Replicas = ptr.To(int32(1))
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	client := func(as string) kubernetes.Interface {
		if as == "admin" {
			return kube
		}
		return token
	}
	patch := func(as, name, body string, opts metav1.PatchOptions) error {
		_, err := client(as).AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, []byte(body), opts)
		return err
	}
	dry := metav1.PatchOptions{DryRun: dryRun}
	for _, c := range []struct {
		name, policy, message string
		do                    func(as string) error
	}{
		{"scale-a-deployment-the-config-does-not-name", "depwatch-probe-targets", "may scale and annotate only the dependents the prober config lists",
			func(as string) error { return patch(as, "not-a-dependent", `{"spec":{"replicas":0}}`, dry) }},
		{"scale-a-named-deployment-to-7", "depwatch-probe-scales", "may scale Deployment " + ns + "/" + named + " only to 0",
			func(as string) error { return patch(as, named, `{"spec":{"replicas":7}}`, dry) }},
		{"store-a-raised-count", "depwatch-probe-scales", "may set the dependency-watchdog.gardener.cloud/replicas annotation",
			func(as string) error {
				return patch(as, named, `{"metadata":{"annotations":{"`+probe.AnnotationReplicas+`":"7"}}}`, dry)
			}},
		{"write-another-annotation", "depwatch-probe-scales", "may change only the annotations",
			func(as string) error {
				return patch(as, named, `{"metadata":{"annotations":{"example.com/other":"x"}}}`, dry)
			}},
		{"scale-through-the-scale-subresource", "depwatch-probe-scales", "may not write the scale subresource",
			func(as string) error {
				// A patch (the probe's RBAC grants patch, not update, on the subresource).
				_, err := client(as).AppsV1().Deployments(ns).Patch(ctx, named, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), dry, "scale")
				return err
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.do("probe")
			if !vap.Refused(err) || vap.Policy(err) != c.policy || !apierrors.IsForbidden(err) {
				t.Fatalf("with the probe's token: %v; want a refusal by %s", err, c.policy)
			}
			if msg, _ := vap.Message(err); !strings.Contains(msg, "depwatch-probe "+c.message) {
				t.Errorf("the refusal %q does not say %q", msg, "depwatch-probe "+c.message)
			}
			if err := c.do("admin"); err != nil {
				t.Errorf("the admin's same request (a dry run): %v; want it admitted, so the refusal is the policy's", err)
			}
		})
	}

	// What a probe is for, as probe/scale.go writes it, each step with the resourceVersion
	// it read as a precondition.
	get := func() *appsv1.Deployment {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, named, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, step := range []struct{ name, body string }{
		{"store the replicas and the marker", `{"metadata":{"resourceVersion":%q,"annotations":{"` + probe.AnnotationReplicas + `":"1","` + probe.AnnotationMeltdownProtection + `":""}}}`},
		{"scale down to 0", `{"metadata":{"resourceVersion":%q},"spec":{"replicas":0}}`},
		{"scale up to the stored count", `{"metadata":{"resourceVersion":%q},"spec":{"replicas":1}}`},
		{"remove the annotations", `{"metadata":{"resourceVersion":%q,"annotations":{"` + probe.AnnotationReplicas + `":null,"` + probe.AnnotationMeltdownProtection + `":null}}}`},
	} {
		// Retried on a conflict, as the probe retries (the Deployment controller writes too).
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			return patch("probe", named, fmt.Sprintf(step.body, get().ResourceVersion), metav1.PatchOptions{})
		}); err != nil {
			t.Fatalf("the probe's own step %q with its token: %v", step.name, err)
		}
	}
	d := get()
	if _, stored := d.Annotations[probe.AnnotationReplicas]; *d.Spec.Replicas != 1 || stored {
		t.Errorf("after the probe's sequence: %d replicas, annotations %v; want 1 and none of the probe's", *d.Spec.Replicas, d.Annotations)
	}
}
