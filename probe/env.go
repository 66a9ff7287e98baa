package probe

import (
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
)

// env reads settings and collects every problem instead of stopping at the first one, so a
// person fixing a manifest sees all mistakes in one go.
type env struct {
	envconf.Reader
}

func newEnv(lookup func(string) (string, bool)) *env {
	return &env{envconf.Reader{Lookup: lookup, MaxShown: maxShown}}
}

// maxShown bounds how much of a value a problem quotes (DEPENDENT_RESOURCES can be long).
const maxShown = 200

// lookup reads the variable as it is set, without its default.
func (e *env) lookup(name string) (string, bool) { return e.Lookup(name) }

// fail records a problem in the one format every message uses: NAME="value": what is wrong.
func (e *env) fail(name, value, format string, args ...any) { e.Fail(name, value, format, args...) }

func shorten(s string) string { return envconf.Shorten(s, maxShown) }

// get returns the variable's value, or its default from the settings table when it is unset.
// A required variable that is unset or empty is recorded as a problem (ok=false).
func (e *env) get(name string) (string, bool) {
	var s setting
	for _, c := range settings {
		if c.name == name {
			s = c
		}
	}
	v, set := e.lookup(name)
	switch {
	case !set && s.required:
		e.Add(name + ": required, not set")
		return "", false
	case !set && s.def == "":
		return "", false
	case !set:
		return s.def, true
	case strings.TrimSpace(v) == "":
		if s.required {
			e.fail(name, v, "required, must not be empty")
		} else {
			e.fail(name, v, "must not be empty (unset it to get the default %q)", s.def)
		}
		return "", false
	}
	return v, true
}

// optional returns a value where empty means unset (SCHEDULE, RUN_DURATION).
func (e *env) optional(name string) (string, bool) {
	v, ok := e.lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", false
	}
	return v, true
}

// boolean accepts exactly strconv.ParseBool's syntax: DRY_RUN=yes meaning "not a dry run"
// would be dangerous, so anything else is an error.
func (e *env) boolean(name string) bool {
	v, ok := e.get(name)
	if !ok {
		return false
	}
	b, ok := envconf.Bool(strings.TrimSpace(v))
	if !ok {
		e.fail(name, v, envconf.BoolProblem)
		return false
	}
	return b
}

// positiveDuration parses a Go duration > 0 (ok=false when unset or bad).
func (e *env) positiveDuration(name, v string) (time.Duration, bool) {
	d, err := envconf.Duration(v)
	switch {
	case err != nil:
		e.fail(name, v, "must be a Go duration such as 30s, 1m or 1h30m")
		return 0, false
	case d <= 0:
		e.fail(name, v, "must be greater than 0")
		return 0, false
	}
	return d, true
}

// fraction parses a number in (0,1]. NaN and infinities are rejected explicitly: NaN compares
// false against everything and would silently disable the decision.
func (e *env) fraction(name string) (float64, bool) {
	v, ok := e.get(name)
	if !ok {
		return 0, false
	}
	f, ok := envconf.Float(v)
	if !ok || f <= 0 || f > 1 {
		e.fail(name, v, "must be a number greater than 0 and at most 1")
		return 0, false
	}
	return f, true
}

// hasProblem says whether a problem about the variable name was recorded already.
func (e *env) hasProblem(name string) bool { return e.Has(name) }
