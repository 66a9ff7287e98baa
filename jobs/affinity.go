package jobs

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// validateAffinity checks what the API server would refuse in a Job's affinity, named by
// its path, so that a mistake is refused when the config is loaded (exit 2, or a reload kept
// out) rather than by every Job create during an outage.
func validateAffinity(a *corev1.Affinity, path string) []error {
	if a == nil {
		return nil
	}
	var errs []error
	if na := a.NodeAffinity; na != nil {
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			p := path + ".nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
			if len(req.NodeSelectorTerms) == 0 {
				errs = append(errs, fmt.Errorf("%s.nodeSelectorTerms: must have at least one term", p))
			}
			for i, term := range req.NodeSelectorTerms {
				errs = append(errs, validateNodeSelectorTerm(term, fmt.Sprintf("%s.nodeSelectorTerms[%d]", p, i))...)
			}
		}
		for i, pref := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			p := fmt.Sprintf("%s.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d]", path, i)
			errs = append(errs, validateWeight(pref.Weight, p)...)
			errs = append(errs, validateNodeSelectorTerm(pref.Preference, p+".preference")...)
		}
	}
	for _, named := range []struct {
		name string
		pa   *podAffinity
	}{{"podAffinity", podAffinityOf(a.PodAffinity)}, {"podAntiAffinity", podAntiAffinityOf(a.PodAntiAffinity)}} {
		name, pa := named.name, named.pa
		if pa == nil {
			continue
		}
		for i, term := range pa.required {
			errs = append(errs, validatePodAffinityTerm(term, fmt.Sprintf("%s.%s.requiredDuringSchedulingIgnoredDuringExecution[%d]", path, name, i))...)
		}
		for i, w := range pa.preferred {
			p := fmt.Sprintf("%s.%s.preferredDuringSchedulingIgnoredDuringExecution[%d]", path, name, i)
			errs = append(errs, validateWeight(w.Weight, p)...)
			errs = append(errs, validatePodAffinityTerm(w.PodAffinityTerm, p+".podAffinityTerm")...)
		}
	}
	return errs
}

// podAffinity is what PodAffinity and PodAntiAffinity have in common.
type podAffinity struct {
	required  []corev1.PodAffinityTerm
	preferred []corev1.WeightedPodAffinityTerm
}

func podAffinityOf(a *corev1.PodAffinity) *podAffinity {
	if a == nil {
		return nil
	}
	return &podAffinity{a.RequiredDuringSchedulingIgnoredDuringExecution, a.PreferredDuringSchedulingIgnoredDuringExecution}
}

func podAntiAffinityOf(a *corev1.PodAntiAffinity) *podAffinity {
	if a == nil {
		return nil
	}
	return &podAffinity{a.RequiredDuringSchedulingIgnoredDuringExecution, a.PreferredDuringSchedulingIgnoredDuringExecution}
}

func validateWeight(w int32, path string) []error {
	if w < 1 || w > 100 {
		return []error{fmt.Errorf("%s.weight: %d: must be 1 to 100", path, w)}
	}
	return nil
}

func validateNodeSelectorTerm(term corev1.NodeSelectorTerm, path string) []error {
	var errs []error
	for i, r := range term.MatchExpressions {
		p := fmt.Sprintf("%s.matchExpressions[%d]", path, i)
		for _, m := range validation.IsQualifiedName(r.Key) {
			errs = append(errs, fmt.Errorf("%s.key: %q: %s", p, r.Key, m))
		}
		errs = append(errs, validateNodeOperator(r, p)...)
	}
	for i, r := range term.MatchFields {
		p := fmt.Sprintf("%s.matchFields[%d]", path, i)
		if r.Key != "metadata.name" {
			errs = append(errs, fmt.Errorf("%s.key: %q: must be metadata.name (the only node field the scheduler matches)", p, r.Key))
		}
		if r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn {
			errs = append(errs, fmt.Errorf("%s.operator: %q: must be In or NotIn", p, r.Operator))
		} else if len(r.Values) != 1 {
			errs = append(errs, fmt.Errorf("%s.values: must have exactly one value", p))
		}
	}
	return errs
}

func validateNodeOperator(r corev1.NodeSelectorRequirement, path string) []error {
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			return []error{fmt.Errorf("%s.values: must not be empty with operator %s", path, r.Operator)}
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			return []error{fmt.Errorf("%s.values: must be empty with operator %s", path, r.Operator)}
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			return []error{fmt.Errorf("%s.values: must have exactly one integer with operator %s", path, r.Operator)}
		}
	default:
		return []error{fmt.Errorf("%s.operator: %q: must be In, NotIn, Exists, DoesNotExist, Gt or Lt", path, r.Operator)}
	}
	return nil
}

func validatePodAffinityTerm(term corev1.PodAffinityTerm, path string) []error {
	var errs []error
	if term.TopologyKey == "" {
		errs = append(errs, fmt.Errorf("%s.topologyKey: required (e.g. kubernetes.io/hostname)", path))
	} else {
		for _, m := range validation.IsQualifiedName(term.TopologyKey) {
			errs = append(errs, fmt.Errorf("%s.topologyKey: %q: %s", path, term.TopologyKey, m))
		}
	}
	for _, sel := range []struct {
		name string
		sel  *metav1.LabelSelector
	}{{"labelSelector", term.LabelSelector}, {"namespaceSelector", term.NamespaceSelector}} {
		if _, err := metav1.LabelSelectorAsSelector(sel.sel); err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %v", path, sel.name, err))
		}
	}
	return errs
}
