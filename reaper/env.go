package reaper

import (
	"slices"
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
)

// newEnv is the reader of reap's variables (the settings table): an empty value is read as
// pod-reaper reads it, handed to the variable's parser, unless the table says otherwise;
// booleans are read exactly as pod-reaper does; values are quoted whole in problems, as they
// always were. Its warnings are values pod-reaper accepts and depwatch accepts with the same
// meaning, but that are odd enough to say so (Run logs them at start).
func newEnv(lookup func(string) (string, bool)) *envconf.Reader {
	return &envconf.Reader{Lookup: lookup, Vars: settings, Empty: envconf.EmptyParsed}
}

// The typed readers below return ok=false when the variable is unset or its value is bad (the
// problem is then recorded); ok=true means the value is set and valid.

// duration parses a non-negative Go duration.
func duration(e *envconf.Reader, name string) (time.Duration, bool) {
	v, ok := e.Get(name)
	if !ok {
		return 0, false
	}
	d, err := envconf.Duration(v)
	switch {
	case err != nil:
		e.Fail(name, v, "must be a Go duration such as 90s, 10m or 1h30m")
		return 0, false
	case d < 0:
		e.Fail(name, v, "must not be negative")
		return 0, false
	}
	return d, true
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
func list(e *envconf.Reader, name string, empty emptyItem) ([]string, bool) {
	v, ok := e.Get(name)
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
				e.Fail(name, v, "has an empty item (a trailing comma, \",,\" or an empty value): pod-reaper reads it as \"no status reason\", which matches almost every running pod; remove it")
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
		e.Warn(name, v, "spaces around items are ignored")
	}
	if blank {
		switch {
		case empty == emptyIsAValue:
			e.Warn(name, v, "has an empty item (a trailing comma or an empty value): it stands for the empty value, as in pod-reaper (a label or annotation that is set to \"\")")
		case len(out) == 0:
			e.Warn(name, v, "lists nothing: the rule matches no pod, so nothing is reaped (as in pod-reaper)")
		default:
			e.Warn(name, v, "has an empty item (a trailing comma?): ignored")
		}
	}
	return out, true
}
