package reaper

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// env reads settings and collects every problem instead of stopping at the first one, so a
// person fixing a manifest sees all mistakes in one go.
type env struct {
	lookup   func(string) (string, bool)
	problems []string
}

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
func (e *env) fail(name, value, format string, args ...any) {
	e.problems = append(e.problems, fmt.Sprintf("%s=%q: %s", name, value, fmt.Sprintf(format, args...)))
}

// boolean accepts exactly strconv.ParseBool's syntax, like pod-reaper; "yes" or "" are errors
// rather than a silent false, because DRY_RUN=yes meaning "not a dry run" would be dangerous.
func (e *env) boolean(name string) bool {
	v, ok := e.get(name)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, v, "must be one of 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False")
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
	d, err := time.ParseDuration(strings.TrimSpace(v))
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
	n, err := strconv.Atoi(strings.TrimSpace(v))
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
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
		e.fail(name, v, "must be a number between 0 and 1")
		return 0, false
	}
	return f, true
}

// list splits a comma-separated value. An empty item (including an empty value) is an error: a
// set variable with nothing in it is a mistake, never "any".
func (e *env) list(name string) ([]string, bool) {
	v, ok := e.get(name)
	if !ok {
		return nil, false
	}
	parts := strings.Split(v, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if parts[i] == "" {
			e.fail(name, v, "must be a comma-separated list without empty items")
			return nil, false
		}
	}
	return parts, true
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
