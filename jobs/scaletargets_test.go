package jobs

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/depwatch/depwatch/probe"
)

// The probe policy's parameters: one key per dependent, <Kind>.<name> (what the policy builds
// from the request), its apiVersion as the value (the policy checks the group).
func TestScaleTargetsDataListsEachDependentByKindAndName(t *testing.T) {
	ref := func(kind, name, apiVersion string) probe.DependentResource {
		return probe.DependentResource{Ref: probe.ResourceRef{Kind: kind, Name: name, APIVersion: apiVersion}}
	}
	for _, c := range []struct {
		name string
		deps []probe.DependentResource
		want map[string]string
	}{
		{"none: nothing admitted", nil, map[string]string{}},
		{"Gardener's", []probe.DependentResource{ref("Deployment", "kube-controller-manager", "apps/v1"),
			ref("Deployment", "machine-controller-manager", "apps/v1")},
			map[string]string{"Deployment.kube-controller-manager": "apps/v1", "Deployment.machine-controller-manager": "apps/v1"}},
		{"the same name, two kinds", []probe.DependentResource{ref("Deployment", "etcd", "apps/v1"), ref("StatefulSet", "etcd", "apps/v1")},
			map[string]string{"Deployment.etcd": "apps/v1", "StatefulSet.etcd": "apps/v1"}},
		{"a dotted name", []probe.DependentResource{ref("StatefulSet", "etcd.main", "apps/v1")}, map[string]string{"StatefulSet.etcd.main": "apps/v1"}},
		{"another group", []probe.DependentResource{ref("Etcd", "main", "druid.gardener.cloud/v1alpha1")}, map[string]string{"Etcd.main": "druid.gardener.cloud/v1alpha1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ScaleTargetsData(c.deps); !maps.Equal(got, c.want) {
				t.Errorf("got %v; want %v", got, c.want)
			}
		})
	}
}

// The parameters only grow: a probe Job launched under an earlier config, or run by hand from
// it, is still admitted for that config's dependents.
func TestUnionScaleTargetsKeepsEveryListedNameAndAddsTheConfigs(t *testing.T) {
	listed := map[string]string{"Deployment.cluster-autoscaler": "apps/v1", "Deployment.etcd": "apps/v1"}
	deps := map[string]string{"Deployment.kube-controller-manager": "apps/v1", "Deployment.etcd": "apps/v1"}
	want := map[string]string{"Deployment.cluster-autoscaler": "apps/v1", "Deployment.etcd": "apps/v1", "Deployment.kube-controller-manager": "apps/v1"}
	if got := UnionScaleTargets(listed, deps); !maps.Equal(got, want) {
		t.Errorf("got %v; want %v", got, want)
	}
	if got := UnionScaleTargets(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("no names, no dependents: got %#v; want empty, not nil (the ConfigMap exists and admits nothing)", got)
	}
}

// Another writer between the read and the update (a second coordinator taking the lead) is
// not overwritten: the update is made again over what it wrote.
func TestWriteScaleTargetsAddsOverAWriteThatCameBetween(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ScaleTargetsName, Namespace: "depwatch", ResourceVersion: "1"},
		Data: map[string]string{"Deployment.a": "apps/v1"}})
	conflicts := 0
	client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		// The other writer's update lands first.
		cm, _ := client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), "depwatch", ScaleTargetsName)
		other := cm.(*corev1.ConfigMap).DeepCopy()
		other.Data["Deployment.b"] = "apps/v1"
		if err := client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("configmaps"), other, "depwatch"); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(corev1.Resource("configmaps"), ScaleTargetsName, nil)
	})
	cm := Template{Namespace: "depwatch"}.ScaleTargets([]probe.DependentResource{{Ref: probe.ResourceRef{Kind: "Deployment", Name: "c", APIVersion: "apps/v1"}}})
	if err := WriteScaleTargets(ctx, client, cm); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().ConfigMaps("depwatch").Get(ctx, ScaleTargetsName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Deployment.a": "apps/v1", "Deployment.b": "apps/v1", "Deployment.c": "apps/v1"}
	if conflicts != 1 || !maps.Equal(got.Data, want) {
		t.Errorf("after %d conflicts: %v; want %v", conflicts, got.Data, want)
	}
}
