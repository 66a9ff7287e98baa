package podstate

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func readySlice(name string, family discoveryv1.AddressType, ready ...*bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "shoot", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "etcd"}},
		AddressType: family,
	}
	for _, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: r}})
	}
	return s
}

// TestReadyAnyIsAPropertyOfTheServiceAcrossItsSlices: one ready endpoint in any slice makes
// the service Ready. The cases marked "differs from dependency-watchdog" are the intended
// differences documented in docs/coordinator.md (it judges each slice alone and wants every
// endpoint of it ready).
func TestReadyAnyIsAPropertyOfTheServiceAcrossItsSlices(t *testing.T) {
	v4, v6 := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	yes, no := ptr.To(true), ptr.To(false)
	tests := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   bool
	}{
		{"no slice", nil, false},
		{"one slice, every endpoint ready", []*discoveryv1.EndpointSlice{readySlice("a", v4, yes, yes)}, true},
		{"one slice, no endpoint ready", []*discoveryv1.EndpointSlice{readySlice("a", v4, no, no)}, false},
		{"one ready endpoint among not-ready ones (differs from dependency-watchdog: it wants all)", []*discoveryv1.EndpointSlice{readySlice("a", v4, no, yes)}, true},
		{"a slice without endpoints is not Ready (differs from dependency-watchdog: it takes it as ready)", []*discoveryv1.EndpointSlice{readySlice("a", v4)}, false},
		{"ready condition not set counts as ready, the API's contract (differs from dependency-watchdog)", []*discoveryv1.EndpointSlice{readySlice("a", v4, nil)}, true},
		{"ready endpoint only in the second of two slices", []*discoveryv1.EndpointSlice{readySlice("a", v4, no), readySlice("b", v4, yes)}, true},
		{"large service: many slices, none ready", []*discoveryv1.EndpointSlice{readySlice("a", v4, no), readySlice("b", v4, no), readySlice("c", v4)}, false},
		{"dual-stack: only the IPv6 slice ready", []*discoveryv1.EndpointSlice{readySlice("a", v4, no), readySlice("b", v6, yes)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReadyAny.Ready(tc.slices); got != tc.want {
				t.Errorf("ReadyAny.Ready = %v, want %v", got, tc.want)
			}
		})
	}
}

// ep is an endpoint of pod name; ready and terminating nil mean not set.
func ep(name string, ready, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{"10.0.0." + name},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating},
	}
}

func slice(eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{Endpoints: eps}
}

var yes, no = ptr.To(true), ptr.To(false)

// TestReadyWhen: when a service counts as back, for each readyWhen.
func TestReadyWhen(t *testing.T) {
	two := ReadyWhen{Min: 2}
	tests := []struct {
		name           string
		slices         []*discoveryv1.EndpointSlice
		any, all, min2 bool
	}{
		{"no slice", nil, false, false, false},
		{"a slice without endpoints", []*discoveryv1.EndpointSlice{slice()}, false, false, false},
		{"etcd: two of three members ready", []*discoveryv1.EndpointSlice{slice(ep("1", yes, nil), ep("2", yes, nil), ep("3", no, nil))}, true, false, true},
		{"every member ready", []*discoveryv1.EndpointSlice{slice(ep("1", yes, nil), ep("2", yes, nil), ep("3", yes, nil))}, true, true, true},
		{"ready not set counts as ready", []*discoveryv1.EndpointSlice{slice(ep("1", nil, nil), ep("2", nil, nil))}, true, true, true},
		{"a terminating member does not hold all back", []*discoveryv1.EndpointSlice{slice(ep("1", yes, nil), ep("2", no, yes))}, true, true, false},
		{"only terminating members", []*discoveryv1.EndpointSlice{slice(ep("1", no, yes))}, false, false, false},
		{"a terminating member still ready counts", []*discoveryv1.EndpointSlice{slice(ep("1", yes, yes), ep("2", yes, nil))}, true, true, true},
		{"one pod in two slices (dual-stack) counts once", []*discoveryv1.EndpointSlice{slice(ep("1", yes, nil)), slice(ep("1", yes, nil))}, true, true, false},
		{"a duplicate ready in one copy is ready", []*discoveryv1.EndpointSlice{slice(ep("1", no, nil)), slice(ep("1", yes, nil)), slice(ep("2", yes, nil))}, true, true, true},
		{"members across slices", []*discoveryv1.EndpointSlice{slice(ep("1", yes, nil)), slice(ep("2", no, nil))}, true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				w    ReadyWhen
				want bool
			}{{ReadyAny, tt.any}, {ReadyAll, tt.all}, {two, tt.min2}} {
				if got := c.w.Ready(tt.slices); got != c.want {
					t.Errorf("readyWhen %s: Ready = %v, want %v", c.w, got, c.want)
				}
			}
		})
	}
}

// TestParseReadyWhenRoundTrip: ParseReadyWhen reads what String writes, and refuses the rest.
func TestParseReadyWhenRoundTrip(t *testing.T) {
	for _, w := range []ReadyWhen{ReadyAny, ReadyAll, {Min: 2}, {Min: 5}} {
		got, err := ParseReadyWhen(w.String())
		if err != nil || got != w {
			t.Errorf("ParseReadyWhen(%q) = %+v, %v; want %+v", w.String(), got, err, w)
		}
	}
	if got, err := ParseReadyWhen("1"); err != nil || got != ReadyAny {
		t.Errorf(`ParseReadyWhen("1") = %+v, %v; want any`, got, err)
	}
	for _, bad := range []string{"0", "-1", "some", "2.5", "ALL"} {
		if _, err := ParseReadyWhen(bad); err == nil {
			t.Errorf("ParseReadyWhen(%q) accepted", bad)
		}
	}
}

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
