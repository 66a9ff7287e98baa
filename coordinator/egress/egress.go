// Package egress keeps the NetworkPolicy that lets depwatch's Jobs reach their own API server,
// and nothing else on its ports.
//
// A weeder or probe Job talks to the API server of the cluster it runs in, and a probe Job
// also to the probed control planes (a rule of the install's own, by pod selector). Where the
// API server's endpoints are depends on the cluster, and a NetworkPolicy sees the endpoint a
// connection goes to, not the Service's address: an install cannot write them, so the
// coordinator does. It follows the `kubernetes` Service's EndpointSlices in `default` and
// applies one policy, PolicyName, in the Jobs' namespace: egress to the Service's cluster IPs
// on its ports and to each endpoint's address on the endpoints' ports, each as a single-host
// ipBlock. Gardener's own networking controller keeps a policy of this shape for its seeds'
// components; this one is depwatch's, for clusters of any kind.
package egress

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

const (
	// PolicyName is the NetworkPolicy the coordinator keeps in the Jobs' namespace.
	PolicyName = "depwatch-jobs-apiserver"
	// FieldManager owns the policy's fields (server-side apply).
	FieldManager = "depwatch-coordinator"
	// ServiceNamespace and ServiceName name the API server's Service in every cluster.
	ServiceNamespace = "default"
	ServiceName      = "kubernetes"
)

// Components are the Jobs the policy selects (their app.kubernetes.io/component label).
var Components = []string{"weeder", "probe"}

// Rules is the policy's egress for the API server's Service and its EndpointSlices: the
// Service's cluster IPs on its ports, and every endpoint address on its slice's ports, each
// address a single host (/32, /128). Sorted and without duplicates, so an unchanged
// Service gives equal rules. Empty when nothing is known yet.
func Rules(svc *corev1.Service, eps []*discoveryv1.EndpointSlice) []networkingv1.NetworkPolicyEgressRule {
	var rules []networkingv1.NetworkPolicyEgressRule
	if svc != nil {
		var ports []int32
		for _, p := range svc.Spec.Ports {
			if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
				ports = append(ports, p.Port)
			}
		}
		rules = appendRule(rules, svc.Spec.ClusterIPs, ports)
	}
	// One rule per set of ports, holding every address of the slices with those ports.
	ports, addrs := map[string][]int32{}, map[string][]string{}
	for _, s := range eps {
		var ps []int32
		for _, p := range s.Ports {
			if p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
				ps = append(ps, *p.Port)
			}
		}
		key := fmt.Sprint(sets.List(sets.New(ps...)))
		ports[key] = ps
		for _, e := range s.Endpoints {
			addrs[key] = append(addrs[key], e.Addresses...)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ports)) {
		rules = appendRule(rules, addrs[k], ports[k])
	}
	return rules
}

// appendRule adds egress to addrs (each a single host) on TCP ports, if both are known.
func appendRule(rules []networkingv1.NetworkPolicyEgressRule, addrs []string, ports []int32) []networkingv1.NetworkPolicyEgressRule {
	var cidrs []string
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.IsUnspecified() {
			continue // "None" (a headless Service), or not an address
		}
		cidrs = append(cidrs, netip.PrefixFrom(ip, ip.BitLen()).String())
	}
	cidrs, ports = sets.List(sets.New(cidrs...)), sets.List(sets.New(ports...))
	if len(cidrs) == 0 || len(ports) == 0 {
		return rules
	}
	r := networkingv1.NetworkPolicyEgressRule{}
	for _, c := range cidrs {
		r.To = append(r.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	tcp := corev1.ProtocolTCP
	for _, p := range ports {
		port := intstr.FromInt32(p)
		r.Ports = append(r.Ports, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &port})
	}
	return append(rules, r)
}

// Policy is the NetworkPolicy, as applied, for rules in namespace: it selects depwatch's
// weeder and probe pods (as jobs.Build labels them) and allows them egress by rules alone.
func Policy(namespace string, rules []networkingv1.NetworkPolicyEgressRule) *networkingv1ac.NetworkPolicyApplyConfiguration {
	spec := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector().
			WithMatchLabels(map[string]string{jobs.LabelAppName: jobs.AppName}).
			WithMatchExpressions(metav1ac.LabelSelectorRequirement().
				WithKey(jobs.LabelComponent).WithOperator(metav1.LabelSelectorOpIn).WithValues(Components...))).
		WithPolicyTypes(networkingv1.PolicyTypeEgress)
	for _, r := range rules {
		rule := networkingv1ac.NetworkPolicyEgressRule()
		for _, to := range r.To {
			rule.WithTo(networkingv1ac.NetworkPolicyPeer().WithIPBlock(networkingv1ac.IPBlock().WithCIDR(to.IPBlock.CIDR)))
		}
		for _, p := range r.Ports {
			rule.WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(*p.Protocol).WithPort(*p.Port))
		}
		spec.WithEgress(rule)
	}
	return networkingv1ac.NetworkPolicy(PolicyName, namespace).
		WithLabels(map[string]string{jobs.LabelAppName: jobs.AppName, jobs.LabelManagedBy: FieldManager}).
		WithSpec(spec)
}

// Keeper applies the policy whenever the API server's Service or endpoints change.
type Keeper struct {
	Client    kubernetes.Interface
	Namespace string // the Jobs' namespace
	Log       logrus.FieldLogger
	// Resync re-applies the policy this often even without a change, restoring one a person
	// edited or deleted (0: every 10 minutes).
	Resync time.Duration
}

// Run keeps the policy until ctx ends. A failed apply is logged and retried on the next
// change or resync; Run returns when ctx ends, its informer stopped.
func (k Keeper) Run(ctx context.Context) {
	if k.Resync <= 0 {
		k.Resync = 10 * time.Minute
	}
	log := k.Log.WithFields(logrus.Fields{"namespace": k.Namespace, "name": PolicyName, "kind": "NetworkPolicy"})
	factory := informers.NewSharedInformerFactoryWithOptions(k.Client, 0,
		informers.WithNamespace(ServiceNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelServiceName + "=" + ServiceName
		}))
	slicesInf := factory.Discovery().V1().EndpointSlices()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := slicesInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke,
	}); err != nil {
		log.WithError(err).Error("Cannot follow the API server's endpoints; the Jobs' egress policy is not kept.")
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), slicesInf.Informer().HasSynced) {
		return
	}
	var applied []networkingv1.NetworkPolicyEgressRule
	resync := time.NewTicker(k.Resync)
	defer resync.Stop()
	poke(nil)
	for {
		select {
		case <-ctx.Done():
			return
		case <-resync.C:
			applied = nil
		case <-changed:
		}
		svc, err := k.Client.CoreV1().Services(ServiceNamespace).Get(ctx, ServiceName, metav1.GetOptions{})
		if err != nil {
			log.WithError(err).Warn("Cannot read the kubernetes Service; the Jobs' egress to the API server is kept as it was.")
			svc = nil
		}
		ss, _ := slicesInf.Lister().EndpointSlices(ServiceNamespace).List(labels.Everything())
		rules := Rules(svc, ss)
		if len(rules) == 0 || reflect.DeepEqual(rules, applied) {
			continue
		}
		err = wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: time.Second, Factor: 2, Steps: 5}, func(ctx context.Context) (bool, error) {
			_, err := k.Client.NetworkingV1().NetworkPolicies(k.Namespace).Apply(ctx, Policy(k.Namespace, rules),
				metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
			if err != nil {
				log.WithError(err).Warn("Cannot apply the Jobs' egress policy; retrying.")
			}
			return err == nil, nil
		})
		if err != nil {
			if ctx.Err() == nil {
				log.Error("Gave up applying the Jobs' egress policy until the API server's endpoints change or the next resync: on a cluster that enforces NetworkPolicies, new Jobs may not reach the API server.")
			}
			continue
		}
		applied = rules
		log.WithFields(logrus.Fields{"action": "applied", "rules": describe(rules)}).
			Info("The Jobs' egress to the API server follows its Service and endpoints.")
	}
}

// describe says where the rules let the Jobs connect, for a log line.
func describe(rules []networkingv1.NetworkPolicyEgressRule) string {
	var s []string
	for _, r := range rules {
		var to []string
		for _, peer := range r.To {
			to = append(to, peer.IPBlock.CIDR)
		}
		on := ""
		for _, p := range r.Ports {
			on += " " + p.Port.String()
		}
		s = append(s, strings.Join(to, ",")+" on"+on)
	}
	return strings.Join(s, "; ")
}
