package jobs

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// problems collects what a validation finds, each problem an error naming its path.
type problems []error

func (p *problems) add(format string, a ...any) { *p = append(*p, fmt.Errorf(format, a...)) }

// validateAffinity checks what the API server would refuse in a Job's affinity, named by
// its path, so that a mistake is refused when the config is loaded (exit 2, or a reload kept
// out) rather than by every Job create during an outage.
func validateAffinity(a *corev1.Affinity, path string) []error {
	if a == nil {
		return nil
	}
	var errs problems
	if na := a.NodeAffinity; na != nil {
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			p := path + ".nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
			if len(req.NodeSelectorTerms) == 0 {
				errs.add("%s.nodeSelectorTerms: must have at least one term", p)
			}
			for i, term := range req.NodeSelectorTerms {
				errs.nodeSelectorTerm(term, fmt.Sprintf("%s.nodeSelectorTerms[%d]", p, i))
			}
		}
		for i, pref := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			p := fmt.Sprintf("%s.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d]", path, i)
			errs.weight(pref.Weight, p)
			errs.nodeSelectorTerm(pref.Preference, p+".preference")
		}
	}
	// PodAffinity and PodAntiAffinity have the same terms.
	type podAffinity struct {
		name      string
		required  []corev1.PodAffinityTerm
		preferred []corev1.WeightedPodAffinityTerm
	}
	var pas []podAffinity
	if pa := a.PodAffinity; pa != nil {
		pas = append(pas, podAffinity{"podAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution})
	}
	if pa := a.PodAntiAffinity; pa != nil {
		pas = append(pas, podAffinity{"podAntiAffinity", pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution})
	}
	for _, pa := range pas {
		for i, term := range pa.required {
			errs.podAffinityTerm(term, fmt.Sprintf("%s.%s.requiredDuringSchedulingIgnoredDuringExecution[%d]", path, pa.name, i))
		}
		for i, w := range pa.preferred {
			p := fmt.Sprintf("%s.%s.preferredDuringSchedulingIgnoredDuringExecution[%d]", path, pa.name, i)
			errs.weight(w.Weight, p)
			errs.podAffinityTerm(w.PodAffinityTerm, p+".podAffinityTerm")
		}
	}
	return errs
}

func (errs *problems) weight(w int32, path string) {
	if w < 1 || w > 100 {
		errs.add("%s.weight: %d: must be 1 to 100", path, w)
	}
}

func (errs *problems) nodeSelectorTerm(term corev1.NodeSelectorTerm, path string) {
	for i, r := range term.MatchExpressions {
		p := fmt.Sprintf("%s.matchExpressions[%d]", path, i)
		for _, m := range validation.IsQualifiedName(r.Key) {
			errs.add("%s.key: %q: %s", p, r.Key, m)
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
			if len(r.Values) == 0 {
				errs.add("%s.values: must not be empty with operator %s", p, r.Operator)
			}
		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				errs.add("%s.values: must be empty with operator %s", p, r.Operator)
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
			if len(r.Values) != 1 {
				errs.add("%s.values: must have exactly one integer with operator %s", p, r.Operator)
			}
		default:
			errs.add("%s.operator: %q: must be In, NotIn, Exists, DoesNotExist, Gt or Lt", p, r.Operator)
		}
	}
	for i, r := range term.MatchFields {
		p := fmt.Sprintf("%s.matchFields[%d]", path, i)
		if r.Key != "metadata.name" {
			errs.add("%s.key: %q: must be metadata.name (the only node field the scheduler matches)", p, r.Key)
		}
		if r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn {
			errs.add("%s.operator: %q: must be In or NotIn", p, r.Operator)
		} else if len(r.Values) != 1 {
			errs.add("%s.values: must have exactly one value", p)
		}
	}
}

func (errs *problems) podAffinityTerm(term corev1.PodAffinityTerm, path string) {
	if term.TopologyKey == "" {
		errs.add("%s.topologyKey: required (e.g. kubernetes.io/hostname)", path)
	} else {
		for _, m := range validation.IsQualifiedName(term.TopologyKey) {
			errs.add("%s.topologyKey: %q: %s", path, term.TopologyKey, m)
		}
	}
	if _, err := metav1.LabelSelectorAsSelector(term.LabelSelector); err != nil {
		errs.add("%s.labelSelector: %v", path, err)
	}
	if _, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector); err != nil {
		errs.add("%s.namespaceSelector: %v", path, err)
	}
}
