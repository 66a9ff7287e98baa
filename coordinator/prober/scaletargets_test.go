package prober

import (
	"context"
	"io"
	"maps"
	"testing"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/depwatch/depwatch/jobs"
)

const twoDependentsConfig = `
prober:
  kubeConfigSecretName: shoot-access
  dependentResourceInfos:
    - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
      scaleUp: {level: 1, timeout: 30s}
      scaleDown: {level: 0, timeout: 40s}
    - ref: {kind: StatefulSet, name: machine-controller-manager, apiVersion: apps/v1}
      optional: true
      scaleUp: {level: 0, timeout: 30s}
      scaleDown: {level: 1, timeout: 40s}
`

// The leader adds its config's dependents to the probe policy's parameters before it probes,
// labelled as the coordinator-configmaps policy admits it, and keeps the names an earlier
// config wrote: a probe Job launched under that config may still be scaling them back up.
func TestTheLeaderAddsItsDependentsToTheProbePolicysParameters(t *testing.T) {
	mine := map[string]string{"Deployment.kube-controller-manager": "apps/v1", "StatefulSet.machine-controller-manager": "apps/v1"}
	for _, c := range []struct {
		name     string
		existing *corev1.ConfigMap
		want     map[string]string
	}{
		{"none yet", nil, mine},
		{"an earlier config's, kept", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: jobs.ScaleTargetsName, Namespace: "depwatch"},
			Data: map[string]string{"Deployment.cluster-autoscaler": "apps/v1"}},
			map[string]string{"Deployment.cluster-autoscaler": "apps/v1", "Deployment.kube-controller-manager": "apps/v1", "StatefulSet.machine-controller-manager": "apps/v1"}},
		{"another ConfigMap beside it, untouched", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "depwatch-probe-shard-0", Namespace: "depwatch"},
			Data: map[string]string{"namespaces": "shoot--a"}}, mine},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newProbeHarnessWith(t, twoDependentsConfig)
			if c.existing != nil {
				if _, err := h.client.CoreV1().ConfigMaps("depwatch").Create(context.Background(), c.existing, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			h.c.writeScaleTargets(context.Background())
			cm, err := h.client.CoreV1().ConfigMaps("depwatch").Get(context.Background(), jobs.ScaleTargetsName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(cm.Data, c.want) {
				t.Errorf("data %v; want %v", cm.Data, c.want)
			}
			if cm.Labels[jobs.LabelKind] != jobs.KindScaleTargets || cm.Labels[jobs.LabelManagedBy] != "depwatch-coordinator" {
				t.Errorf("labels %v: the coordinator-configmaps policy admits only depwatch.io/kind=%s, managed by depwatch-coordinator", cm.Labels, jobs.KindScaleTargets)
			}
			if c.existing != nil && c.existing.Name != jobs.ScaleTargetsName {
				other, err := h.client.CoreV1().ConfigMaps("depwatch").Get(context.Background(), c.existing.Name, metav1.GetOptions{})
				if err != nil || !maps.Equal(other.Data, c.existing.Data) {
					t.Errorf("ConfigMap %s: %v, %v; want it untouched", c.existing.Name, other, err)
				}
			}
		})
	}
}

// A coordinator without a prober creates the parameters empty where there are none (no probe
// may write anything) and leaves the names an earlier config wrote.
func TestACoordinatorWithoutAProberLeavesTheListedNames(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	for _, c := range []struct {
		name     string
		existing map[string]string
		want     map[string]string
	}{
		{"none yet: created empty", nil, map[string]string{}},
		{"an earlier config's: kept", map[string]string{"Deployment.kube-controller-manager": "apps/v1"}, map[string]string{"Deployment.kube-controller-manager": "apps/v1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := fake.NewClientset()
			if c.existing != nil {
				if _, err := client.CoreV1().ConfigMaps("depwatch").Create(context.Background(), &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: jobs.ScaleTargetsName, Namespace: "depwatch"}, Data: c.existing}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			KeepScaleTargets(context.Background(), client, jobs.Template{Namespace: "depwatch"}.ScaleTargets(nil), log)
			cm, err := client.CoreV1().ConfigMaps("depwatch").Get(context.Background(), jobs.ScaleTargetsName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(cm.Data, c.want) {
				t.Errorf("data %v; want %v", cm.Data, c.want)
			}
		})
	}
}

// Where the service account may not write ConfigMaps (gardenlet's, under the image swap), the
// leader says so once and goes on probing: no retry loop, no error.
func TestTheLeaderGoesOnWhereItMayNotWriteTheProbePolicysParameters(t *testing.T) {
	client := fake.NewClientset()
	writes := 0
	client.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		writes++
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, jobs.ScaleTargetsName, nil)
	})
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	KeepScaleTargets(ctx, client, jobs.Template{Namespace: "garden"}.ScaleTargets(nil), log)
	if writes != 1 {
		t.Errorf("%d writes; want 1 (refused by RBAC: not retried)", writes)
	}
}
