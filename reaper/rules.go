package reaper

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/depwatch/depwatch/internal/envconf"
)

// Rule is one reaping rule, shaped like pod-reaper's: it loads itself from the environment and
// then judges pods. A pod is reaped only when every enabled rule matches.
type Rule interface {
	// Name is the environment variable that enables the rule, e.g. CONTAINER_STATUSES.
	Name() string
	// Decide reports whether the rule wants the pod reaped and, when it does, why, in words a
	// person on call understands (e.g. `container "app" is waiting with reason CrashLoopBackOff`).
	Decide(pod *corev1.Pod, now time.Time) (match bool, reason string)
}

// serverSideRule is implemented by rules that can also be expressed as a field selector, so the
// API server filters for them and fewer pods travel over the wire. Decide still runs: the field
// selector only narrows, it never decides.
type serverSideRule interface {
	FieldSelector() fields.Selector
}

// ruleLoader loads one rule from the environment. It returns nil when the rule's variable is
// unset and records a problem in e when the value is bad.
type ruleLoader func(e *envconf.Reader) Rule

// ruleLoaders lists every rule. CHAOS_CHANCE is last because rules are evaluated in this order
// and stop at the first miss: the dice are only rolled for pods every other rule agrees on, so
// CHAOS_CHANCE=0.5 with CONTAINER_STATUSES reaps about half of the crash-looping pods.
var ruleLoaders = []ruleLoader{
	loadContainerStatusesRule,
	loadPodStatusesRule,
	loadPodPhasesRule,
	loadAgeRule("MAX_DURATION", "has been running", runningSince),
	loadAgeRule("MAX_UNREADY", "has not been ready", unreadySince),
	loadChaosRule,
}

func loadRules(e *envconf.Reader) []Rule {
	var rules []Rule
	for _, load := range ruleLoaders {
		if r := load(e); r != nil {
			rules = append(rules, r)
		}
	}
	return rules
}

// decide applies every rule (AND). It returns the reasons of all rules when the pod matches;
// when it does not, reasons is nil and nothing was allocated for it.
func decide(pod *corev1.Pod, rules []Rule, now time.Time) (bool, []string) {
	if len(rules) == 0 {
		return false, nil // no rule enabled means "reap nothing", never "reap everything"
	}
	var reasons []string
	for _, r := range rules {
		ok, reason := r.Decide(pod, now)
		if !ok {
			return false, nil
		}
		if reasons == nil {
			reasons = make([]string, 0, len(rules))
		}
		reasons = append(reasons, reason)
	}
	return true, reasons
}
