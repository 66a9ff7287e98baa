// Package envconf holds what the engines' environment contracts (reaper, probe) share: the one
// reader of their variables (defaults, required ones, what an empty value means: the engines
// differ only in that data), the collection of problems in the one format every message uses,
// `NAME="value": what is wrong`, the strict value parsers both engines apply, and their
// inverses, which write the values a Job's environment carries. Each engine keeps its own
// table of variables (names, defaults, descriptions) and its own messages.
package envconf

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
)

// Lookup reads one variable (os.LookupEnv in production).
type Lookup func(string) (string, bool)

// Empty is what a variable set to the empty value (or to spaces only) means. The engines
// differ: reap reads it as pod-reaper does, as a value like any other that its parser refuses
// in its own words (DRY_RUN="" is not a boolean), and refuses it outright for the variables
// where pod-reaper silently matched everything; probe refuses it, but for the optional
// variables where empty means unset.
type Empty int

const (
	// EmptyAsReader: the zero value, the Reader's own rule (Reader.Empty).
	EmptyAsReader Empty = iota
	// EmptyParsed: the empty value goes to the variable's parser like any other.
	EmptyParsed
	// EmptyRefused: a problem of its own, `must not be empty (...)`.
	EmptyRefused
	// EmptyUnset: as if the variable were not set: its default, if any.
	EmptyUnset
)

// Var is one variable of an engine: its default, its rule for the empty value, and its line in
// the engine's Usage. An engine's table of them is the single source of both, so the help text
// cannot drift from the reader.
type Var struct {
	Name, Default, Desc string
	// Required: unset, or set to the empty value, is a problem.
	Required bool
	Empty    Empty
	// Job: the coordinator writes it into the Jobs it launches (the engine's JobEnvNames, which
	// the admission policy on those Jobs admits). An engine whose every variable a Job may
	// carry (probe) needs not say it.
	Job bool
}

// Reader collects every problem instead of stopping at the first one, so a person fixing a
// manifest sees all mistakes in one go.
type Reader struct {
	Lookup Lookup
	// Vars are the engine's variables; one not listed has no default and the Reader's rule.
	Vars []Var
	// Empty is what an empty value means for a variable whose Var does not say.
	Empty Empty
	// TrimBools ignores spaces around a boolean (probe); reap reads one exactly as pod-reaper's
	// strconv.ParseBool does, so " true" is refused there.
	TrimBools bool
	// MaxShown bounds how much of a value a problem quotes (a JSON document can be long);
	// 0 quotes it whole.
	MaxShown int
	Problems []string
	// Warnings are accepted values odd enough to say so, in the format of Problems.
	Warnings []string
}

func (r *Reader) variable(name string) Var {
	for _, v := range r.Vars {
		if v.Name == name {
			return v
		}
	}
	return Var{Name: name}
}

func blank(v string) bool { return strings.TrimSpace(v) == "" }

// rule is what an empty value of v means: its own rule, else the Reader's.
func (r *Reader) rule(v Var) Empty {
	if v.Empty == EmptyAsReader {
		return r.Empty
	}
	return v.Empty
}

// Get returns the variable's value as set, else its default; ok=false: it has neither, or it
// is set to an empty value its rule refuses (the problem is then recorded), or a required one
// is unset (recorded too).
func (r *Reader) Get(name string) (string, bool) {
	v := r.variable(name)
	raw, set := r.Lookup(name)
	if set && blank(raw) {
		rule := r.rule(v)
		switch {
		case v.Required || rule == EmptyRefused:
			r.refuseEmpty(v, raw)
			return "", false
		case rule == EmptyUnset:
			set = false
		}
	}
	switch {
	case set:
		return raw, true
	case v.Required:
		r.once(name + ": required, not set")
		return "", false
	}
	return v.Default, v.Default != ""
}

// NonEmpty is Get for a use where the empty value cannot mean anything, whatever the
// variable's rule says elsewhere (reap's NAMESPACE="" is every namespace, but beside TARGETS
// it is a slip).
func (r *Reader) NonEmpty(name string) (string, bool) {
	v, ok := r.Get(name)
	if ok && blank(v) {
		r.refuseEmpty(r.variable(name), v)
		return "", false
	}
	return v, ok
}

// IsSet reports whether the variable has a value, set or its default, without judging it.
func (r *Reader) IsSet(name string) bool {
	v := r.variable(name)
	raw, set := r.Lookup(name)
	unset := blank(raw) && r.rule(v) == EmptyUnset
	return set && !unset || v.Default != ""
}

// refuseEmpty records that v is set to the empty value raw.
func (r *Reader) refuseEmpty(v Var, raw string) {
	var p string
	switch {
	case v.Required:
		p = r.format(v.Name, raw, "required, must not be empty")
	case v.Default != "":
		p = r.format(v.Name, raw, "must not be empty (unset it to get the default %q)", v.Default)
	default:
		p = r.format(v.Name, raw, "must not be empty (unset it instead)")
	}
	r.once(p)
}

// once records a problem of Get's own once, however often the variable is read.
func (r *Reader) once(p string) {
	if !slices.Contains(r.Problems, p) {
		r.Problems = append(r.Problems, p)
	}
}

// Bool reads a boolean variable (false when it has no value or a bad one, which is recorded).
func (r *Reader) Bool(name string) bool {
	v, ok := r.Get(name)
	if !ok {
		return false
	}
	parsed := v
	if r.TrimBools {
		parsed = strings.TrimSpace(v)
	}
	b, ok := Bool(parsed)
	if !ok {
		r.Fail(name, v, BoolProblem)
	}
	return b
}

// Usage writes every variable with its default and description, then the notes.
func Usage(w io.Writer, vars []Var, notes ...string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tDESCRIPTION")
	for _, v := range vars {
		def := v.Default
		switch {
		case v.Required:
			def = "(required)"
		case def == "":
			def = "(unset)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Name, def, v.Desc)
	}
	for _, n := range notes {
		fmt.Fprintln(tw, n)
	}
	_ = tw.Flush()
}

// Fail records a problem: NAME="value": what is wrong.
func (r *Reader) Fail(name, value, format string, args ...any) {
	r.Problems = append(r.Problems, r.format(name, value, format, args...))
}

// Warn records an accepted but odd value, in the format of Fail.
func (r *Reader) Warn(name, value, format string, args ...any) {
	r.Warnings = append(r.Warnings, r.format(name, value, format, args...))
}

// Add records a problem that quotes no value (e.g. `NAME: required, not set`).
func (r *Reader) Add(problem string) { r.Problems = append(r.Problems, problem) }

// Has says whether a problem about the variable name was recorded already.
func (r *Reader) Has(name string) bool {
	for _, p := range r.Problems {
		if strings.HasPrefix(p, name+"=") || strings.HasPrefix(p, name+":") {
			return true
		}
	}
	return false
}

func (r *Reader) format(name, value, format string, args ...any) string {
	if r.MaxShown > 0 {
		value = Shorten(value, r.MaxShown)
	}
	return fmt.Sprintf("%s=%q: %s", name, value, fmt.Sprintf(format, args...))
}

// Shorten cuts s to at most max bytes (still valid UTF-8) and marks the cut with "...".
func Shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "..."
}

// BoolProblem is what a value Bool refuses is told.
const BoolProblem = "must be one of 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False"

// Bool accepts exactly strconv.ParseBool's syntax (pod-reaper's), untrimmed: "yes" or "" are
// refused rather than read as a silent false, because DRY_RUN=yes meaning "not a dry run"
// would be dangerous. FormatBool writes it.
func Bool(v string) (bool, bool) {
	b, err := strconv.ParseBool(v)
	return b, err == nil
}

// Duration parses a Go duration, spaces around it ignored. FormatDuration writes it.
func Duration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("parsing duration: %w", err)
	}
	return d, nil
}

// Int parses a base-10 int, spaces around it ignored. FormatInt writes it.
func Int(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("parsing integer: %w", err)
	}
	return n, nil
}

// Float parses a finite number, spaces around it ignored. NaN and infinities are refused:
// NaN compares false against everything and would silently disable a rule or decision, and
// no setting means an infinite fraction. FormatFloat writes it.
func Float(v string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// FormatBool is the inverse of Bool.
func FormatBool(b bool) string { return strconv.FormatBool(b) }

// FormatDuration is the inverse of Duration.
func FormatDuration(d time.Duration) string { return d.String() }

// FormatInt is the inverse of Int.
func FormatInt(n int) string { return strconv.Itoa(n) }

// FormatFloat is the inverse of Float: the shortest form that reads back as the same number.
func FormatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Writer builds a Job's environment in the order its variables are set.
type Writer struct {
	vars []corev1.EnvVar
}

// Set adds a variable.
func (w *Writer) Set(name, value string) {
	w.vars = append(w.vars, corev1.EnvVar{Name: name, Value: value})
}

// Env is what was set, in order.
func (w *Writer) Env() []corev1.EnvVar { return w.vars }

// LookupIn reads variables from a container's environment as a run would see them: the last
// value of a name wins (valueFrom is not resolved and reads as unset).
func LookupIn(env []corev1.EnvVar) Lookup {
	return func(name string) (string, bool) {
		v, ok := "", false
		for _, e := range env {
			if e.Name == name && e.ValueFrom == nil {
				v, ok = e.Value, true
			}
		}
		return v, ok
	}
}

// ConfigError lists every configuration problem, one per line and nothing else, so the caller
// can present them as it likes (depwatch prints one bullet per problem under its own
// heading). main exits 2 on it.
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	return strings.Join(e.Problems, "\n")
}

// CronParser accepts the engines' schedules (SCHEDULE), pod-reaper's syntax: five fields, an
// optional leading seconds field, and descriptors such as @every 1m or @hourly.
var CronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule parses spec, the value of name as its engine reads it, and quotes value in its
// problems. robfig/cron v3.0.1 panics on some inputs (a time-zone prefix without a space, e.g.
// "TZ=UTC"), so a panic becomes a problem: bad input must never crash the process. A schedule
// that never fires (30 February) is refused too. nil: a problem was recorded.
func (r *Reader) Schedule(name, value, spec string) (s cron.Schedule) {
	defer func() {
		if p := recover(); p != nil {
			r.Fail(name, value, "not a valid cron schedule")
			s = nil
		}
	}()
	s, err := CronParser.Parse(spec)
	if err != nil {
		r.Fail(name, value, "not a valid cron schedule: %v", err)
		return nil
	}
	if s.Next(time.Now()).IsZero() {
		r.Fail(name, value, "never fires")
		return nil
	}
	return s
}

// WithoutValue is problem, as Fail formats it (`NAME="value": what is wrong`), with no part
// of the value: `NAME: invalid value`. The fault is dropped too, since a parser's words can
// quote the value (robfig/cron lists the fields it found). A problem that quotes no value
// (`NAME: required, not set`) is returned as it is. What a Job's container leaves as its
// termination message can be read by whoever may get the pod (the coordinator among them),
// and a value can have come from a Secret; the log, behind pods/log, keeps the whole problem.
func WithoutValue(problem string) string {
	name, rest, ok := strings.Cut(problem, "=")
	if !ok || strings.ContainsAny(name, " :\"") {
		return problem
	}
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil || !strings.HasPrefix(rest[len(quoted):], ": ") {
		return problem
	}
	return name + ": invalid value"
}
