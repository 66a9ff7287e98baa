package podstate

import (
	"context"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestSliceFollowerHoldsTheNamedServicesSlimAndIndexed: the one EndpointSlice follower the
// weeder and the reaper share lists only the named services' slices (server-side), in its
// namespace, slimmed, and tells the services it holds; given no name it holds nothing.
func TestSliceFollowerHoldsTheNamedServicesSlimAndIndexed(t *testing.T) {
	slice := func(ns, svc string) runtime.Object {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-x",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}, Annotations: map[string]string{"a": "b"}}}
	}
	objs := []runtime.Object{slice("shoot", "etcd"), slice("shoot", "kube-apiserver"), slice("shoot", "other"), slice("garden", "etcd")}
	tests := []struct {
		name, namespace, selector string
		names, want               []string
	}{
		{"two names in one namespace", "shoot", "kubernetes.io/service-name in (etcd,kube-apiserver)", []string{"etcd", "kube-apiserver"}, []string{"shoot/etcd", "shoot/kube-apiserver"}},
		{"one name in every namespace", "", "kubernetes.io/service-name=etcd", []string{"etcd"}, []string{"garden/etcd", "shoot/etcd"}},
		{"no name", "", noService, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			factory, inf, sel, err := SliceFollower(fake.NewClientset(objs...), tt.namespace, tt.names)
			if err != nil {
				t.Fatal(err)
			}
			if sel != tt.selector {
				t.Errorf("selector %q, want %q", sel, tt.selector)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); factory.Shutdown() }()
			factory.Start(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("no sync")
			}
			if got := FollowedServices(inf); !slices.Equal(got, tt.want) {
				t.Errorf("followed %v, want %v", got, tt.want)
			}
			for _, o := range inf.GetStore().List() {
				if o.(*discoveryv1.EndpointSlice).Annotations != nil {
					t.Errorf("%s cached whole, not slim", o.(*discoveryv1.EndpointSlice).Name)
				}
			}
		})
	}
}
