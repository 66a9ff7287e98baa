package reaper

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/depwatch/depwatch/internal/envconf"
)

// loadSelectors builds the OR-ed label selectors: one per LABEL_SELECTORS entry (or a single
// one without LABEL_SELECTORS), each ANDed with LABEL_SELECTOR and the KEY/VALUES filters.
// The result is never empty; it may be labels.Everything() only when no label filter is set.
func loadSelectors(e *envconf.Reader) []labels.Selector {
	var base labels.Requirements
	if r := labelPair(e, "EXCLUDE_LABEL_KEY", "EXCLUDE_LABEL_VALUES", selection.NotIn); r != nil {
		base = append(base, *r)
	}
	if r := labelPair(e, "REQUIRE_LABEL_KEY", "REQUIRE_LABEL_VALUES", selection.In); r != nil {
		base = append(base, *r)
	}
	if v, ok := e.Get("LABEL_SELECTOR"); ok {
		if sel, err := labels.Parse(v); err != nil {
			e.Fail("LABEL_SELECTOR", v, "not a valid label selector: %v", err)
		} else {
			reqs, _ := sel.Requirements()
			base = append(base, reqs...)
		}
	}

	entries, set := parseLabelSelectors(e)
	if !set || len(entries) == 0 { // unset, or set but invalid (already reported)
		return []labels.Selector{labels.NewSelector().Add(base...)}
	}
	out := make([]labels.Selector, 0, len(entries))
	for _, reqs := range entries {
		out = append(out, labels.NewSelector().Add(base...).Add(reqs...))
	}
	return out
}

// LabelSelectorsValue writes the LABEL_SELECTORS variable that parseLabelSelectors reads back.
func LabelSelectorsValue(selectors []string) string {
	raw, _ := json.Marshal(selectors) // []string always marshals
	return string(raw)
}

// parseLabelSelectors reads LABEL_SELECTORS, a JSON list of selector strings (JSON rather than
// one-per-line so that an entry can never be split or merged by accident). Every entry must
// select something: an empty list or an empty entry is an error, because an empty selector
// means "every pod" and a templating slip must not turn a weeder into a cluster-wide reaper.
func parseLabelSelectors(e *envconf.Reader) ([]labels.Requirements, bool) {
	const name = envLabelSelectors
	v, ok := e.Get(name)
	if !ok {
		return nil, false
	}
	var raw []string
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		e.Fail(name, v, `must be a JSON list of label selectors, e.g. ["app=a","app=b"]: %v`, err)
		return nil, true
	}
	if len(raw) == 0 {
		e.Fail(name, v, "must list at least one label selector")
		return nil, true
	}
	out := make([]labels.Requirements, 0, len(raw))
	bad := false
	for i, s := range raw {
		sel, err := labels.Parse(s)
		switch {
		case err != nil:
			e.Fail(name, v, "entry %d (%q) is not a valid label selector: %v", i, s, err)
			bad = true
		case sel.Empty():
			e.Fail(name, v, "entry %d (%q) is empty and would select every pod", i, s)
			bad = true
		default:
			reqs, _ := sel.Requirements()
			out = append(out, reqs)
		}
	}
	if bad {
		return nil, true
	}
	return out, true
}

// labelPair turns a KEY/VALUES pair into a label requirement.
func labelPair(e *envconf.Reader, keyName, valuesName string, op selection.Operator) *labels.Requirement {
	key, values, ok := pair(e, keyName, valuesName)
	if !ok {
		return nil
	}
	r, err := labels.NewRequirement(key, op, values)
	if err != nil {
		e.Fail(keyName, key, "with %s=%q is not a valid label requirement: %v", valuesName, strings.Join(values, ","), err)
		return nil
	}
	return r
}

// pair reads a KEY/VALUES pair; ok=false when it is unset or bad. Setting only one half is an
// error (pod-reaper silently ignored the filter and so reaped more than intended).
func pair(e *envconf.Reader, keyName, valuesName string) (key string, values []string, ok bool) {
	keySet, valuesSet := e.IsSet(keyName), e.IsSet(valuesName)
	switch {
	case keySet && !valuesSet:
		v, _ := e.Lookup(keyName)
		e.Fail(keyName, v, "%s must be set too", valuesName)
	case !keySet && valuesSet:
		v, _ := e.Lookup(valuesName)
		e.Fail(valuesName, v, "%s must be set too", keyName)
	}
	if !keySet || !valuesSet {
		return "", nil, false
	}
	key, keyOK := e.Get(keyName)
	values, valuesOK := list(e, valuesName, emptyIsAValue)
	return key, values, keyOK && valuesOK
}

// annotationFilter is REQUIRE_ANNOTATION_KEY/VALUES. The API cannot filter on annotations, so
// it is checked client-side, before the rules.
type annotationFilter struct {
	key    string
	values []string
}

func loadAnnotationFilter(e *envconf.Reader) *annotationFilter {
	key, values, ok := pair(e, "REQUIRE_ANNOTATION_KEY", "REQUIRE_ANNOTATION_VALUES")
	if !ok {
		return nil
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		e.Fail("REQUIRE_ANNOTATION_KEY", key, "not a valid annotation key: %s", strings.Join(errs, "; "))
		return nil
	}
	return &annotationFilter{key: key, values: values}
}

func (a *annotationFilter) admits(pod *corev1.Pod) bool {
	if a == nil {
		return true
	}
	v, ok := pod.Annotations[a.key]
	return ok && slices.Contains(a.values, v)
}

func (a *annotationFilter) String() string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%s in (%s)", a.key, strings.Join(a.values, ","))
}
