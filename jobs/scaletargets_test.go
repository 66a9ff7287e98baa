package jobs

import (
	"maps"
	"testing"

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
