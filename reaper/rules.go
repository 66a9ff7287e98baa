package reaper

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/depwatch/depwatch/internal/podstate"
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

// ruleLoaders lists every rule by its variable; a loader returns nil when the variable is
// unset and records a problem in e when the value is bad. CHAOS_CHANCE is last because rules
// are evaluated in this order and stop at the first miss: the dice are only rolled for pods
// every other rule agrees on, so CHAOS_CHANCE=0.5 with CONTAINER_STATUSES reaps about half of
// the crash-looping pods.
var ruleLoaders = []struct {
	name string
	load func(e *envconf.Reader, name string) Rule
}{
	{envContainerStatuses, loadContainerStatusesRule},
	{"POD_STATUSES", loadPodStatusesRule},
	{"POD_STATUS_PHASES", loadPodPhasesRule},
	{"MAX_DURATION", loadAgeRule("has been running", runningSince)},
	{"MAX_UNREADY", loadAgeRule("has not been ready", unreadySince)},
	{"CHAOS_CHANCE", loadChaosRule},
}

// loadRules loads the enabled rules; anySet reports whether a rule variable is set at all, so
// a rule with a bad value is reported once (for its value) rather than also as "no rule is
// enabled".
func loadRules(e *envconf.Reader) (rules []Rule, anySet bool) {
	for _, l := range ruleLoaders {
		anySet = anySet || e.IsSet(l.name)
		if r := l.load(e, l.name); r != nil {
			rules = append(rules, r)
		}
	}
	return rules, anySet
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

// podStatusesRule (POD_STATUSES) matches on the pod's status.reason, e.g. Evicted or
// NodeLost.
type podStatusesRule struct {
	reasons []string
}

func loadPodStatusesRule(e *envconf.Reader, name string) Rule {
	reasons, ok := list(e, name, emptyRefused)
	if !ok {
		return nil
	}
	return podStatusesRule{reasons: reasons}
}

func (podStatusesRule) Name() string { return "POD_STATUSES" }

func (r podStatusesRule) Decide(pod *corev1.Pod, _ time.Time) (bool, string) {
	if slices.Contains(r.reasons, pod.Status.Reason) {
		return true, fmt.Sprintf("pod status reason is %s", pod.Status.Reason)
	}
	return false, ""
}

// knownPhases are all pod phases; the field selector for POD_STATUS_PHASES excludes the ones
// not asked for, because the API's field selectors have `!=` but no `in`.
var knownPhases = []corev1.PodPhase{
	corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown,
}

// podPhasesRule (POD_STATUS_PHASES) matches on status.phase.
type podPhasesRule struct {
	phases []corev1.PodPhase
}

func loadPodPhasesRule(e *envconf.Reader, name string) Rule {
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
			e.Fail(name, raw, "unknown phase %q; phases are Pending, Running, Succeeded, Failed, Unknown", v)
			return nil
		}
		r.phases = append(r.phases, corev1.PodPhase(v))
	}
	return r
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

// ageRule is MAX_DURATION or MAX_UNREADY: it matches pods whose clock has run for longer than
// the duration. The two differ only in when the clock starts (since); a pod whose clock has
// not started never matches: there is nothing to measure from.
type ageRule struct {
	name  string
	max   time.Duration
	since func(*corev1.Pod) (time.Time, bool)
	state string // what the clock measures, in the reason: "has been running"
}

func loadAgeRule(state string, since func(*corev1.Pod) (time.Time, bool)) func(*envconf.Reader, string) Rule {
	return func(e *envconf.Reader, name string) Rule {
		d, ok := duration(e, name)
		if !ok {
			return nil
		}
		return ageRule{name: name, max: d, since: since, state: state}
	}
}

func (r ageRule) Name() string { return r.name }

func (r ageRule) Decide(pod *corev1.Pod, now time.Time) (bool, string) {
	from, ok := r.since(pod)
	if !ok {
		return false, ""
	}
	age := now.Sub(from)
	if age <= r.max {
		return false, ""
	}
	return true, fmt.Sprintf("pod %s for %s, longer than %s %s", r.state, age.Round(time.Second), r.name, r.max)
}

// runningSince (MAX_DURATION) is status.startTime (when the kubelet accepted the pod). Pods
// without a start time have not started.
func runningSince(pod *corev1.Pod) (time.Time, bool) {
	if pod.Status.StartTime == nil {
		return time.Time{}, false
	}
	return pod.Status.StartTime.Time, true
}

// unreadySince (MAX_UNREADY) is the Ready condition's lastTransitionTime while it is not True.
// Pods without a Ready condition (not scheduled yet) or without a transition time have no
// start to measure from.
func unreadySince(pod *corev1.Pod) (time.Time, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue || c.LastTransitionTime.IsZero() {
				return time.Time{}, false
			}
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// chaosRule (CHAOS_CHANCE) matches a pod with the given probability.
type chaosRule struct {
	chance float64
	// roll returns a number in [0,1); tests replace it. The default, rand.Float64, is safe for
	// concurrent use.
	roll func() float64
}

// loadChaosRule reads a float in [0,1]; NaN and infinities are refused explicitly because they
// would compare false against any roll and silently disable or enable the rule.
func loadChaosRule(e *envconf.Reader, name string) Rule {
	v, ok := e.Get(name)
	if !ok {
		return nil
	}
	chance, ok := envconf.Float(v)
	if !ok || chance < 0 || chance > 1 {
		e.Fail(name, v, "must be a number between 0 and 1")
		return nil
	}
	return chaosRule{chance: chance, roll: rand.Float64}
}

func (chaosRule) Name() string { return "CHAOS_CHANCE" }

func (r chaosRule) Decide(*corev1.Pod, time.Time) (bool, string) {
	roll := r.roll()
	if roll >= r.chance {
		return false, ""
	}
	return true, fmt.Sprintf("chaos chance %g was hit (rolled %.3f)", r.chance, roll)
}

// ReasonCrashLoopBackOff is CONTAINER_STATUSES' value that asks for podstate.CrashLoopBackOff,
// the kubelet's waiting reason for a container it holds back after repeated crashes.
const ReasonCrashLoopBackOff = podstate.ReasonCrashLoopBackOff

// containerStatusesRule (CONTAINER_STATUSES) matches a pod when any regular or init container
// is waiting or terminated with one of the listed reasons, as pod-reaper reads it. Init
// containers count because a pod stuck in an init container's CrashLoopBackOff is just as stuck
// (dependency-watchdog ignores them; depwatch does not). Ephemeral containers do not count,
// as in pod-reaper: a `kubectl debug` container that exited with Error must not get the pod it
// debugged killed. CrashLoopBackOff also matches a container the kubelet still reports as
// terminated while it waits out the back-off (see podstate.CrashLoopBackOff).
type containerStatusesRule struct {
	reasons []string
}

func loadContainerStatusesRule(e *envconf.Reader, name string) Rule {
	reasons, ok := list(e, name, emptyMatchesNothing)
	if !ok {
		return nil
	}
	return containerStatusesRule{reasons: reasons}
}

func (containerStatusesRule) Name() string { return envContainerStatuses }

func (r containerStatusesRule) Decide(pod *corev1.Pod, _ time.Time) (bool, string) {
	if slices.Contains(r.reasons, ReasonCrashLoopBackOff) {
		if reason, ok := podstate.CrashLoopBackOff(pod); ok {
			return true, reason
		}
	}
	groups := []struct {
		kind     string
		statuses []corev1.ContainerStatus
	}{
		{"init container", pod.Status.InitContainerStatuses},
		{"container", pod.Status.ContainerStatuses},
	}
	for _, g := range groups {
		for i := range g.statuses {
			cs := &g.statuses[i]
			if w := cs.State.Waiting; w != nil && slices.Contains(r.reasons, w.Reason) {
				return true, fmt.Sprintf("%s %q is waiting with reason %s", g.kind, cs.Name, w.Reason)
			}
			if t := cs.State.Terminated; t != nil && slices.Contains(r.reasons, t.Reason) {
				return true, fmt.Sprintf("%s %q terminated with reason %s", g.kind, cs.Name, t.Reason)
			}
		}
	}
	return false, ""
}
