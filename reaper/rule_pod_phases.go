package reaper

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/depwatch/depwatch/internal/envconf"
)

// knownPhases are all pod phases; the field selector for POD_STATUS_PHASES excludes the ones
// not asked for, because the API's field selectors have `!=` but no `in`.
var knownPhases = []corev1.PodPhase{
	corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown,
}

// podPhasesRule (POD_STATUS_PHASES) matches on status.phase.
type podPhasesRule struct {
	phases []corev1.PodPhase
}

func loadPodPhasesRule(e *envconf.Reader) Rule {
	const name = "POD_STATUS_PHASES"
	values, ok := list(e, name, emptyMatchesNothing)
	if !ok {
		return nil
	}
	r := podPhasesRule{}
	for _, v := range values {
		// An unknown phase (e.g. lower-case "failed") would never match anything; pod-reaper
		// accepted it silently, depwatch says so.
		if !slices.Contains(knownPhases, corev1.PodPhase(v)) {
			raw, _ := e.Get(name)
			e.Fail(name, raw, "unknown phase %q; phases are %s", v, phaseList())
			return nil
		}
		r.phases = append(r.phases, corev1.PodPhase(v))
	}
	return r
}

func phaseList() string {
	s := make([]string, len(knownPhases))
	for i, p := range knownPhases {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

func (podPhasesRule) Name() string { return "POD_STATUS_PHASES" }

func (r podPhasesRule) Decide(pod *corev1.Pod, _ time.Time) (bool, string) {
	if slices.Contains(r.phases, pod.Status.Phase) {
		return true, fmt.Sprintf("pod phase is %s", pod.Status.Phase)
	}
	return false, ""
}

// FieldSelector is `status.phase!=X` for every phase not in the set.
func (r podPhasesRule) FieldSelector() fields.Selector {
	var sels []fields.Selector
	for _, p := range knownPhases {
		if !slices.Contains(r.phases, p) {
			sels = append(sels, fields.OneTermNotEqualSelector("status.phase", string(p)))
		}
	}
	return fields.AndSelectors(sels...)
}
