package jobs

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// placedTemplate is a template of an installation whose image sits in a private registry and
// whose Jobs must run on dedicated, tainted nodes.
func placedTemplate() Template {
	tpl := resolved()
	tpl.Image = "registry.example.com/depwatch:v1"
	tpl.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "regcred-mirror"}}
	tpl.NodeSelector = map[string]string{"pool": "infra"}
	tpl.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	tpl.PriorityClassName = "infra-critical"
	tpl.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		}}},
	}}
	return tpl
}

// Every kind of Job (a weeder, a batch weeder, a probe shard) can pull from the private
// registry and lands where the template places it: the pod spec carries the template's pull
// secrets, node selector, tolerations, affinity and priority class, as copies.
func TestEveryJobCarriesTheTemplatesPullSecretsAndPlacement(t *testing.T) {
	batch, err := WeederBatch(WeederSpec{WatchDuration: time.Minute, TriggerTime: t0},
		[]WeederTarget{{Namespace: "a", Service: "etcd", Selectors: apiserverSelectors()}, {Namespace: "b", Service: "etcd", Selectors: apiserverSelectors()}})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := Probe(probeSpec())
	if err != nil {
		t.Fatal(err)
	}
	for name, spec := range map[string]Spec{"weeder": weederSpec(t, "ns", "svc", t0), "batch weeder": batch, "probe": probe} {
		t.Run(name, func(t *testing.T) {
			tpl := placedTemplate()
			j, err := Build(tpl, spec)
			if err != nil {
				t.Fatal(err)
			}
			p := j.Spec.Template.Spec
			want := placedTemplate()
			for _, c := range []struct {
				field     string
				got, want any
			}{
				{"imagePullSecrets", p.ImagePullSecrets, want.ImagePullSecrets},
				{"nodeSelector", p.NodeSelector, want.NodeSelector},
				{"tolerations", p.Tolerations, want.Tolerations},
				{"affinity", p.Affinity, want.Affinity},
				{"priorityClassName", p.PriorityClassName, want.PriorityClassName},
				{"image", p.Containers[0].Image, want.Image},
			} {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%s: the pod spec has %+v, the template %+v", c.field, c.got, c.want)
				}
			}
			// The Job holds copies: a template changed by a reload never changes a built Job.
			tpl.ImagePullSecrets[0].Name = "changed"
			tpl.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values[0] = "arm64"
			tpl.Tolerations[0].Value = "changed"
			if !reflect.DeepEqual(p.ImagePullSecrets, want.ImagePullSecrets) || !reflect.DeepEqual(p.Affinity, want.Affinity) || !reflect.DeepEqual(p.Tolerations, want.Tolerations) {
				t.Errorf("the Job shares its pull secrets, affinity or tolerations with the template")
			}
		})
	}
}

// Without them in the template a Job has no pull secrets and no affinity: the cluster's
// defaults apply, as before.
func TestJobsWithoutPlacementHaveNone(t *testing.T) {
	j, err := Build(resolved(), weederSpec(t, "ns", "svc", t0))
	if err != nil {
		t.Fatal(err)
	}
	p := j.Spec.Template.Spec
	if p.ImagePullSecrets != nil || p.Affinity != nil || p.NodeSelector != nil || p.Tolerations != nil || p.PriorityClassName != "" {
		t.Errorf("placement without a template's say: pull secrets %v affinity %v nodeSelector %v tolerations %v priority %q",
			p.ImagePullSecrets, p.Affinity, p.NodeSelector, p.Tolerations, p.PriorityClassName)
	}
}

// A pull secret or an affinity the API server would refuse is refused with the config, by
// its path and value, instead of failing every Job create during an outage.
func TestTemplateRefusesBadPullSecretsAndAffinity(t *testing.T) {
	nodeTerm := func(r corev1.NodeSelectorRequirement) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{r}}}}}}
	}
	cases := []struct {
		name string
		tpl  Template
		want string
	}{
		{"pull secret without a name", Template{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "ok"}, {}}}, "jobTemplate.imagePullSecrets[1].name: required"},
		{"pull secret with a bad name", Template{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "Reg_Cred"}}}, `jobTemplate.imagePullSecrets[0].name: "Reg_Cred"`},
		{"no node selector term", Template{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}},
			"jobTemplate.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: must have at least one term"},
		{"unknown node operator", Template{Affinity: nodeTerm(corev1.NodeSelectorRequirement{Key: "pool", Operator: "Is", Values: []string{"infra"}})},
			`jobTemplate.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: "Is"`},
		{"In without values", Template{Affinity: nodeTerm(corev1.NodeSelectorRequirement{Key: "pool", Operator: corev1.NodeSelectorOpIn})},
			"nodeSelectorTerms[0].matchExpressions[0].values: must not be empty with operator In"},
		{"preferred weight out of range", Template{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 0}}}}},
			"jobTemplate.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: 0: must be 1 to 100"},
		{"pod anti-affinity without a topology key", Template{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}}}},
			"jobTemplate.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: required"},
		{"pod affinity with a bad selector", Template{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}}}}}}},
			"jobTemplate.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.tpl.Validate("jobTemplate")
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("errs = %v, want one naming %q", errs, tc.want)
			}
		})
	}
	if errs := placedTemplate().Validate("jobTemplate"); len(errs) != 0 {
		t.Errorf("a valid placement refused: %v", errs)
	}
}
