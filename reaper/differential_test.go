package reaper

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// podReaperPicks is an oracle: the pods pod-reaper 2.14 picks from pods under env at now,
// following its documented rules and how its code reads each variable (split on "," and keep
// every piece as it is; label and annotation filters built as label requirements; every
// enabled rule must agree). err is non-nil where pod-reaper fails to start. Written for this
// test, not taken from pod-reaper.
func podReaperPicks(env map[string]string, pods []*corev1.Pod, now time.Time) ([]string, error) {
	get := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	type rule func(*corev1.Pod) bool
	var rules []rule

	if v, ok := get("CHAOS_CHANCE"); ok {
		chance, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, err
		}
		// The roll is in [0,1): with a chance of 0 or less nothing, with 1 or more everything.
		rules = append(rules, func(*corev1.Pod) bool { return chance >= 1 })
	}
	anyReason := func(statuses []corev1.ContainerStatus, reasons []string) bool {
		for _, cs := range statuses {
			if w := cs.State.Waiting; w != nil && slices.Contains(reasons, w.Reason) {
				return true
			}
			if t := cs.State.Terminated; t != nil && slices.Contains(reasons, t.Reason) {
				return true
			}
		}
		return false
	}
	if v, ok := get("CONTAINER_STATUSES"); ok {
		reasons := strings.Split(v, ",")
		rules = append(rules, func(p *corev1.Pod) bool {
			return anyReason(p.Status.ContainerStatuses, reasons) || anyReason(p.Status.InitContainerStatuses, reasons)
		})
	}
	duration := func(name string) (time.Duration, bool, error) {
		v, ok := get(name)
		if !ok {
			return 0, false, nil
		}
		d, err := time.ParseDuration(v)
		return d, true, err
	}
	if d, ok, err := duration("MAX_DURATION"); err != nil {
		return nil, err
	} else if ok {
		rules = append(rules, func(p *corev1.Pod) bool {
			return p.Status.StartTime != nil && time.Unix(p.Status.StartTime.Unix(), 0).Before(now.Add(-d))
		})
	}
	if d, ok, err := duration("MAX_UNREADY"); err != nil {
		return nil, err
	} else if ok {
		rules = append(rules, func(p *corev1.Pod) bool {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					return c.Status != corev1.ConditionTrue && time.Unix(c.LastTransitionTime.Unix(), 0).Before(now.Add(-d))
				}
			}
			return false
		})
	}
	if v, ok := get("POD_STATUSES"); ok {
		reasons := strings.Split(v, ",")
		rules = append(rules, func(p *corev1.Pod) bool { return slices.Contains(reasons, p.Status.Reason) })
	}
	// POD_STATUS_PHASES is what the code reads; POD_PHASE_STATUSES (its README's name) is not
	// read at all.
	if v, ok := get("POD_STATUS_PHASES"); ok {
		phases := strings.Split(v, ",")
		rules = append(rules, func(p *corev1.Pod) bool { return slices.Contains(phases, string(p.Status.Phase)) })
	}
	if len(rules) == 0 {
		return nil, errors.New("no rules were loaded")
	}

	requirement := func(keyName, valuesName string, op selection.Operator) (*labels.Requirement, error) {
		key, keySet := get(keyName)
		values, valuesSet := get(valuesName)
		switch {
		case keySet != valuesSet:
			return nil, errors.New("only one of " + keyName + " and " + valuesName)
		case !keySet:
			return nil, nil
		}
		return labels.NewRequirement(key, op, strings.Split(values, ","))
	}
	exclude, err := requirement("EXCLUDE_LABEL_KEY", "EXCLUDE_LABEL_VALUES", selection.NotIn)
	if err != nil {
		return nil, err
	}
	require, err := requirement("REQUIRE_LABEL_KEY", "REQUIRE_LABEL_VALUES", selection.In)
	if err != nil {
		return nil, err
	}
	annotation, err := requirement("REQUIRE_ANNOTATION_KEY", "REQUIRE_ANNOTATION_VALUES", selection.In)
	if err != nil {
		return nil, err
	}

	var picked []string
next:
	for _, p := range pods {
		for _, r := range []*labels.Requirement{exclude, require} {
			if r != nil && !r.Matches(labels.Set(p.Labels)) {
				continue next
			}
		}
		if annotation != nil && !annotation.Matches(labels.Set(p.Annotations)) {
			continue
		}
		for _, r := range rules {
			if !r(p) {
				continue next
			}
		}
		picked = append(picked, p.Name)
	}
	return picked, nil
}

// depwatchPicks is what depwatch reap picks from the same pods (filters and rules, as a cycle
// and the watch both evaluate them).
func depwatchPicks(env map[string]string, pods []*corev1.Pod, now time.Time) ([]string, error) {
	o, err := LoadOptions(envOf(env))
	if err != nil {
		return nil, err
	}
	s := o
	var picked []string
	for _, p := range pods {
		if _, ok := s.evaluate(p, now); ok {
			picked = append(picked, p.Name)
		}
	}
	return picked, nil
}

// differentialPods are the fixtures: one of each state the rules tell apart.
func differentialPods() []*corev1.Pod {
	withRestarts := func(n int32) podOpt {
		return func(p *corev1.Pod) {
			for i := range p.Status.ContainerStatuses {
				p.Status.ContainerStatuses[i].RestartCount = n
			}
		}
	}
	exitedWith := func(reason string, code int32) podOpt {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}},
			})
		}
	}
	ready := func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-3 * time.Hour))})
	}
	return []*corev1.Pod{
		newPod("ns", "crashloop-waiting", withLabel("app", "a"), crashLooping, withRestarts(3), startedAgo(2*time.Hour)),
		newPod("ns", "backoff-terminated", withLabel("app", "a"), exitedWith("Error", 1), withRestarts(2), startedAgo(2*time.Hour)),
		newPod("ns", "first-exit", withLabel("app", "b"), exitedWith("Completed", 0), startedAgo(time.Minute)),
		newPod("ns", "waiting-no-reason", withLabel("app", "b"), waiting("app", ""), startedAgo(time.Minute)),
		newPod("ns", "oom-first", withLabel("app", "b"), exitedWith("OOMKilled", 137), startedAgo(time.Minute)),
		newPod("ns", "ephemeral-error", withLabel("app", "b"), ready, startedAgo(time.Hour), func(p *corev1.Pod) {
			p.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "debug", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}}
		}),
		newPod("ns", "evicted", phase(corev1.PodFailed), func(p *corev1.Pod) { p.Status.Reason = "Evicted" }),
		newPod("ns", "succeeded", phase(corev1.PodSucceeded), startedAgo(3*time.Hour)),
		newPod("ns", "old", withLabel("app", "a"), withLabel("keep", "true"), ready, startedAgo(2*time.Hour)),
		newPod("ns", "young", withLabel("app", "c"), withLabel("keep", ""), ready, startedAgo(30*time.Minute)),
		newPod("ns", "unready", withLabel("app", "c"), unreadyFor(20*time.Minute), startedAgo(time.Hour)),
		newPod("ns", "unready-no-time", withLabel("app", "c"), startedAgo(time.Hour), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		}),
		newPod("ns", "annotated", withAnnotation("x", "y"), ready, startedAgo(time.Hour)),
		newPod("ns", "no-start", phase(corev1.PodPending)),
	}
}

// Intended differences between depwatch and pod-reaper; each is listed under its name in
// docs/pod-reaper.md.
const (
	diffBackOffTerminated = "backoff-terminated"      // CrashLoopBackOff also matches a terminated container waiting out its back-off
	diffSpacesTrimmed     = "spaces-trimmed"          // spaces around list items are ignored
	diffEmptyItemDropped  = "empty-status-dropped"    // an empty CONTAINER_STATUSES item matches nothing
	diffUnreadyNoTime     = "unready-no-transition"   // MAX_UNREADY needs a transition time to measure from
	diffRefused           = "refused"                 // depwatch refuses what pod-reaper silently misreads
	diffLenient           = "accepted-where-it-fails" // depwatch accepts what pod-reaper fails on
)

// TestDepwatchPicksWhatPodReaperPicks runs every env case through the oracle of pod-reaper's
// rules and through depwatch, over the same fixture pods: the picks are the same, except for
// the intended differences, each asserted as exactly what it is and listed in the docs.
func TestDepwatchPicksWhatPodReaperPicks(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		// differs: the pods whose pick differs, and why ("" key: the whole case differs, e.g.
		// one side refuses to start).
		differs map[string]string
	}{
		{"crash loop, waiting", map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff"},
			map[string]string{"backoff-terminated": diffBackOffTerminated}},
		{"a first exit is no crash loop for either", map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "REQUIRE_LABEL_KEY": "app", "REQUIRE_LABEL_VALUES": "b"}, nil},
		{"literal terminated reasons", map[string]string{"CONTAINER_STATUSES": "Completed,OOMKilled,Error"}, nil},
		{"trailing comma in CONTAINER_STATUSES", map[string]string{"CONTAINER_STATUSES": "OOMKilled,"},
			map[string]string{"waiting-no-reason": diffEmptyItemDropped}},
		{"space after a comma in CONTAINER_STATUSES", map[string]string{"CONTAINER_STATUSES": "Error, OOMKilled"},
			map[string]string{"oom-first": diffSpacesTrimmed}},
		{"pod status reason", map[string]string{"POD_STATUSES": "Evicted"}, nil},
		{"trailing comma in POD_STATUSES", map[string]string{"POD_STATUSES": "Evicted,"}, map[string]string{"": diffRefused}},
		{"phases", map[string]string{"POD_STATUS_PHASES": "Failed,Succeeded"}, nil},
		{"trailing comma in POD_STATUS_PHASES", map[string]string{"POD_STATUS_PHASES": "Failed,"}, nil},
		{"a phase in lower case", map[string]string{"POD_STATUS_PHASES": "failed"}, map[string]string{"": diffRefused}},
		{"the README's phase variable", map[string]string{"POD_PHASE_STATUSES": "Failed", "CHAOS_CHANCE": "1"}, map[string]string{"": diffRefused}},
		{"max duration", map[string]string{"MAX_DURATION": "1h"}, nil},
		{"negative max duration", map[string]string{"MAX_DURATION": "-1h"}, map[string]string{"": diffRefused}},
		{"max unready", map[string]string{"MAX_UNREADY": "10m"}, map[string]string{"unready-no-time": diffUnreadyNoTime}},
		{"chaos always", map[string]string{"CHAOS_CHANCE": "1"}, nil},
		{"chaos never", map[string]string{"CHAOS_CHANCE": "0"}, nil},
		{"chaos above 1", map[string]string{"CHAOS_CHANCE": "1.5"}, map[string]string{"": diffRefused}},
		{"exclude with a trailing comma also excludes the empty value", map[string]string{"CHAOS_CHANCE": "1", "EXCLUDE_LABEL_KEY": "keep", "EXCLUDE_LABEL_VALUES": "true,"}, nil},
		{"empty EXCLUDE_LABEL_VALUES", map[string]string{"CHAOS_CHANCE": "1", "EXCLUDE_LABEL_KEY": "keep", "EXCLUDE_LABEL_VALUES": ""}, nil},
		{"require label values", map[string]string{"CHAOS_CHANCE": "1", "REQUIRE_LABEL_KEY": "app", "REQUIRE_LABEL_VALUES": "a,c"}, nil},
		{"empty REQUIRE_LABEL_VALUES", map[string]string{"CHAOS_CHANCE": "1", "REQUIRE_LABEL_KEY": "keep", "REQUIRE_LABEL_VALUES": ""}, nil},
		{"space after a comma in label values", map[string]string{"CHAOS_CHANCE": "1", "REQUIRE_LABEL_KEY": "app", "REQUIRE_LABEL_VALUES": "a, c"}, map[string]string{"": diffLenient}},
		{"annotation", map[string]string{"CHAOS_CHANCE": "1", "REQUIRE_ANNOTATION_KEY": "x", "REQUIRE_ANNOTATION_VALUES": "y,"}, nil},
		{"rules are ANDed", map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "MAX_DURATION": "1h", "EXCLUDE_LABEL_KEY": "keep", "EXCLUDE_LABEL_VALUES": "true"},
			map[string]string{"backoff-terminated": diffBackOffTerminated}},
		{"no rule", map[string]string{"NAMESPACE": "ns"}, nil},
		{"key without values", map[string]string{"CHAOS_CHANCE": "1", "EXCLUDE_LABEL_KEY": "keep"}, nil},
	}
	pods := differentialPods()
	seen := map[string]bool{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, prErr := podReaperPicks(tc.env, pods, t0)
			got, dwErr := depwatchPicks(tc.env, pods, t0)
			if why, whole := tc.differs[""]; whole {
				seen[why] = true
				switch why {
				case diffRefused:
					if prErr != nil || dwErr == nil {
						t.Fatalf("want pod-reaper to run (err %v) and depwatch to refuse (err %v)", prErr, dwErr)
					}
				case diffLenient:
					if prErr == nil || dwErr != nil {
						t.Fatalf("want pod-reaper to fail (err %v) and depwatch to run (err %v)", prErr, dwErr)
					}
				}
				return
			}
			if (prErr != nil) != (dwErr != nil) {
				t.Fatalf("pod-reaper err %v, depwatch err %v: one starts, the other not", prErr, dwErr)
			}
			for _, p := range pods {
				inWant, inGot := slices.Contains(want, p.Name), slices.Contains(got, p.Name)
				why, intended := tc.differs[p.Name]
				switch {
				case intended && inWant == inGot:
					t.Errorf("pod %s: the intended difference %q did not show (both %v)", p.Name, why, inGot)
				case intended:
					seen[why] = true
				case inWant != inGot:
					t.Errorf("pod %s: pod-reaper picks it: %v, depwatch: %v", p.Name, inWant, inGot)
				}
			}
		})
	}
	doc, err := os.ReadFile("../docs/pod-reaper.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, why := range []string{diffBackOffTerminated, diffSpacesTrimmed, diffEmptyItemDropped, diffUnreadyNoTime, diffRefused, diffLenient} {
		if !seen[why] {
			t.Errorf("intended difference %q is asserted by no case", why)
		}
		if !strings.Contains(string(doc), "`"+why+"`") {
			t.Errorf("intended difference %q is not listed in docs/pod-reaper.md", why)
		}
	}
}
