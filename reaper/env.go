package reaper

import (
	"slices"
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
)

// env reads settings and collects every problem instead of stopping at the first one, so a
// person fixing a manifest sees all mistakes in one go. Its warnings are values pod-reaper
// accepts and depwatch accepts with the same meaning, but that are odd enough to say so (Run
// logs them at start). Values are quoted whole in problems, as they always were.
type env struct {
	envconf.Reader
}

func newEnv(lookup func(string) (string, bool)) *env {
	return &env{envconf.Reader{Lookup: lookup}}
}

// lookup reads the variable as it is set, without its default.
func (e *env) lookup(name string) (string, bool) { return e.Lookup(name) }

// warn records an accepted but odd value, in the format of fail.
func (e *env) warn(name, value, format string, args ...any) { e.Warn(name, value, format, args...) }

// get returns the variable's value; unset variables fall back to their default from the
// settings table (ok reports whether the result is a value at all).
func (e *env) get(name string) (string, bool) {
	if v, ok := e.lookup(name); ok {
		return v, true
	}
	for _, s := range settings {
		if s.name == name && s.def != "" {
			return s.def, true
		}
	}
	return "", false
}

// fail records a problem in the one format every message uses: NAME="value": what is wrong.
func (e *env) fail(name, value, format string, args ...any) { e.Fail(name, value, format, args...) }

// boolean accepts exactly strconv.ParseBool's syntax, like pod-reaper; "yes" or "" are errors
// rather than a silent false, because DRY_RUN=yes meaning "not a dry run" would be dangerous.
func (e *env) boolean(name string) bool {
	v, ok := e.get(name)
	if !ok {
		return false
	}
	b, ok := envconf.Bool(v)
	if !ok {
		e.fail(name, v, envconf.BoolProblem)
		return false
	}
	return b
}

// isSet reports whether the variable is set or has a default.
func (e *env) isSet(name string) bool {
	_, ok := e.get(name)
	return ok
}

// The typed readers below return ok=false when the variable is unset or its value is bad (the
// problem is then recorded); ok=true means the value is set and valid.

// duration parses a non-negative Go duration.
func (e *env) duration(name string) (time.Duration, bool) {
	v, ok := e.get(name)
	if !ok {
		return 0, false
	}
	d, err := envconf.Duration(v)
	switch {
	case err != nil:
		e.fail(name, v, "must be a Go duration such as 90s, 10m or 1h30m")
		return 0, false
	case d < 0:
		e.fail(name, v, "must not be negative")
		return 0, false
	}
	return d, true
}

// integer parses a base-10 int.
func (e *env) integer(name string) (int, bool) {
	v, ok := e.get(name)
	if !ok {
		return 0, false
	}
	n, err := envconf.Int(v)
	if err != nil {
		e.fail(name, v, "must be an integer")
		return 0, false
	}
	return n, true
}

// probability parses a float in [0,1]; NaN and infinities are rejected explicitly because
// they would compare false against any roll and silently disable or enable the rule.
func (e *env) probability(name string) (float64, bool) {
	v, ok := e.get(name)
	if !ok {
		return 0, false
	}
	f, ok := envconf.Float(v)
	if !ok || f < 0 || f > 1 {
		e.fail(name, v, "must be a number between 0 and 1")
		return 0, false
	}
	return f, true
}

// emptyItem says what an empty item of a comma-separated list means (a trailing comma, ",,"
// or an empty value all make one: pod-reaper splits on "," and keeps every piece).
type emptyItem int

const (
	// emptyIsAValue: the empty string is a value like any other, as in pod-reaper: for label
	// and annotation values it means "set to the empty value". Kept.
	emptyIsAValue emptyItem = iota
	// emptyMatchesNothing: in pod-reaper the empty item matches a reason or phase the API
	// practically never reports empty, so it changes nothing. Dropped.
	emptyMatchesNothing
	// emptyRefused: in pod-reaper the empty item matches almost every pod (POD_STATUSES: a
	// running pod has no status reason), surely not what a trailing comma meant. Refused.
	emptyRefused
)

// list splits a comma-separated value the way pod-reaper does, with two tolerances: spaces
// around an item are ignored (pod-reaper kept them, so "A, B" never matched B and a label
// value " b" failed), and an empty item means what the variable's emptyItem says. ok=false
// means unset or refused.
func (e *env) list(name string, empty emptyItem) ([]string, bool) {
	v, ok := e.get(name)
	if !ok {
		return nil, false
	}
	parts := strings.Split(v, ",")
	out := make([]string, 0, len(parts))
	spaced, blank := false, false
	for _, p := range parts {
		t := strings.TrimSpace(p)
		spaced = spaced || t != p
		if t == "" {
			blank = true
			switch empty {
			case emptyRefused:
				e.fail(name, v, "has an empty item (a trailing comma, \",,\" or an empty value): pod-reaper reads it as \"no status reason\", which matches almost every running pod; remove it")
				return nil, false
			case emptyMatchesNothing:
				continue
			}
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if spaced {
		e.warn(name, v, "spaces around items are ignored")
	}
	if blank {
		switch {
		case empty == emptyIsAValue:
			e.warn(name, v, "has an empty item (a trailing comma or an empty value): it stands for the empty value, as in pod-reaper (a label or annotation that is set to \"\")")
		case len(out) == 0:
			e.warn(name, v, "lists nothing: the rule matches no pod, so nothing is reaped (as in pod-reaper)")
		default:
			e.warn(name, v, "has an empty item (a trailing comma?): ignored")
		}
	}
	return out, true
}

// nonEmpty returns a set value that must not be empty.
func (e *env) nonEmpty(name string) (string, bool) {
	v, ok := e.get(name)
	if ok && strings.TrimSpace(v) == "" {
		e.fail(name, v, "must not be empty (unset it instead)")
		return "", false
	}
	return v, ok
}
