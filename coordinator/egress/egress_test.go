package egress

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/jobs"
)

func service(ips ...string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ServiceNamespace, Name: ServiceName},
		Spec: corev1.ServiceSpec{ClusterIPs: ips, Ports: []corev1.ServicePort{
			{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443},
		}},
	}
}

func slice(name string, port int32, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ServiceNamespace, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: ServiceName}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	return s
}

// flat is rules as "cidr,cidr:port,port" strings, for comparing.
func flat(rules []networkingv1.NetworkPolicyEgressRule) []string {
	var out []string
	for _, r := range rules {
		var s string
		for i, to := range r.To {
			if i > 0 {
				s += ","
			}
			s += to.IPBlock.CIDR
		}
		s += ":"
		for i, p := range r.Ports {
			if i > 0 {
				s += ","
			}
			if *p.Protocol != corev1.ProtocolTCP {
				s += string(*p.Protocol) + "/"
			}
			s += p.Port.String()
		}
		out = append(out, s)
	}
	return out
}

func TestRulesAllowTheServiceAndEachEndpointAsSingleHosts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		svc   *corev1.Service
		eps   []*discoveryv1.EndpointSlice
		rules []string
	}{
		{"nothing known yet allows nothing", nil, nil, nil},
		{"the Service's cluster IP on its port, the endpoints on theirs",
			service("10.0.0.1"), []*discoveryv1.EndpointSlice{slice("kubernetes", 6443, "192.168.1.10", "192.168.1.11")},
			[]string{"10.0.0.1/32:443", "192.168.1.10/32,192.168.1.11/32:6443"}},
		{"a dual-stack Service and IPv6 endpoints are single hosts of their own family",
			service("10.0.0.1", "fd00::1"), []*discoveryv1.EndpointSlice{slice("kubernetes-v6", 6443, "fd00:10::5")},
			[]string{"10.0.0.1/32,fd00::1/128:443", "fd00:10::5/128:6443"}},
		{"endpoints of two slices on one port are one rule, sorted and without duplicates",
			service("10.0.0.1"), []*discoveryv1.EndpointSlice{slice("b", 443, "192.168.1.11", "192.168.1.10"), slice("a", 443, "192.168.1.10")},
			[]string{"10.0.0.1/32:443", "192.168.1.10/32,192.168.1.11/32:443"}},
		{"a headless Service's None and a slice without endpoints allow nothing",
			service("None"), []*discoveryv1.EndpointSlice{slice("kubernetes", 6443)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := flat(Rules(tc.svc, tc.eps)); !slices.Equal(got, tc.rules) {
				t.Fatalf("rules = %q, want %q", got, tc.rules)
			}
		})
	}
}

func TestPolicySelectsTheWeederAndProbeJobsAsJobsBuildLabelsThem(t *testing.T) {
	p := Policy("depwatch", Rules(service("10.0.0.1"), nil))
	sel, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{
		MatchLabels: p.Spec.PodSelector.MatchLabels,
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: *p.Spec.PodSelector.MatchExpressions[0].Key,
			Operator: *p.Spec.PodSelector.MatchExpressions[0].Operator, Values: p.Spec.PodSelector.MatchExpressions[0].Values}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind jobs.Kind
		want bool
	}{{jobs.KindWeeder, true}, {jobs.KindProbe, true}} {
		l := labels.Set{jobs.LabelAppName: jobs.AppName, jobs.LabelComponent: string(tc.kind)}
		if sel.Matches(l) != tc.want {
			t.Errorf("%s Job selected = %v, want %v", tc.kind, !tc.want, tc.want)
		}
	}
	if sel.Matches(labels.Set{jobs.LabelAppName: jobs.AppName, jobs.LabelComponent: "coordinator"}) {
		t.Error("the coordinator is selected; its own policy is the install's")
	}
	if len(p.Spec.PolicyTypes) != 1 || p.Spec.PolicyTypes[0] != networkingv1.PolicyTypeEgress {
		t.Errorf("policy types = %v, want Egress only (ingress is the install's policies')", p.Spec.PolicyTypes)
	}
}

func TestKeeperAppliesThePolicyAndFollowsTheEndpoints(t *testing.T) {
	client := fake.NewClientset(service("10.0.0.1"), slice("kubernetes", 6443, "192.168.1.10"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	log := logrus.New()
	log.SetOutput(io.Discard)
	go func() {
		defer close(done)
		Keeper{Client: client, Namespace: "depwatch", Log: log}.Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	waitFor := func(want []string) {
		t.Helper()
		var got []string
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			p, err := client.NetworkingV1().NetworkPolicies("depwatch").Get(ctx, PolicyName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			got = flat(p.Spec.Egress)
			return slices.Equal(got, want), nil
		})
		if err != nil {
			t.Fatalf("policy egress = %q, want %q", got, want)
		}
	}
	waitFor([]string{"10.0.0.1/32:443", "192.168.1.10/32:6443"})

	// The API server moved (a control plane replaced): the policy follows.
	moved := slice("kubernetes", 6443, "192.168.1.20", "192.168.1.21")
	if _, err := client.DiscoveryV1().EndpointSlices(ServiceNamespace).Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor([]string{"10.0.0.1/32:443", "192.168.1.20/32,192.168.1.21/32:6443"})
}
