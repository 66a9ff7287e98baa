package probe

import (
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
)

// newEnv is the reader of probe's variables (the settings table): an empty value is refused
// unless the table says it means unset, spaces around a boolean are ignored, and a problem
// quotes at most maxShown bytes of a value.
func newEnv(lookup func(string) (string, bool)) *envconf.Reader {
	return &envconf.Reader{Lookup: lookup, Vars: settings, Empty: envconf.EmptyRefused, TrimBools: true, MaxShown: maxShown}
}

// maxShown bounds how much of a value a problem quotes (DEPENDENT_RESOURCES can be long).
const maxShown = 200

func shorten(s string) string { return envconf.Shorten(s, maxShown) }

// positiveDuration parses a Go duration > 0 (ok=false when unset or bad).
func positiveDuration(e *envconf.Reader, name, v string) (time.Duration, bool) {
	d, err := envconf.Duration(v)
	switch {
	case err != nil:
		e.Fail(name, v, "must be a Go duration such as 30s, 1m or 1h30m")
		return 0, false
	case d <= 0:
		e.Fail(name, v, "must be greater than 0")
		return 0, false
	}
	return d, true
}

// fraction parses a number in (0,1]. NaN and infinities are rejected explicitly: NaN compares
// false against everything and would silently disable the decision.
func fraction(e *envconf.Reader, name string) (float64, bool) {
	v, ok := e.Get(name)
	if !ok {
		return 0, false
	}
	f, ok := envconf.Float(v)
	if !ok || f <= 0 || f > 1 {
		e.Fail(name, v, "must be a number greater than 0 and at most 1")
		return 0, false
	}
	return f, true
}
