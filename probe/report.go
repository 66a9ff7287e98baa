package probe

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/event"
	"github.com/depwatch/depwatch/internal/termmsg"
)

// ReportVersion is written into every report; DecodeReport reads it and version 1 (the same
// JSON, which probe pods wrote without a summary line before the one format of
// internal/termmsg) and refuses any other, so a coordinator never misreads a report of a
// newer probe.
const ReportVersion = 2

// Report is the structured result of one `depwatch probe` run, written as the pod's
// termination message by EncodeReport (termmsg.Message: its String, then its JSON) and read
// back by the coordinator with DecodeReport.
// Totals cover every namespace; each namespace has its own entry with the result of its
// last probe and when that was, so one Job's report serves every namespace it probed.
type Report struct {
	// End is when the run finished (second precision).
	End    time.Time
	DryRun bool
	// Results counts every probe of the run by result; Ops counts the scale operations by
	// outcome (scaled-down, scaled-up, ..., would-scale-* in a dry run). Zero counts are
	// left out.
	Results map[string]int
	Ops     map[string]int
	// Namespaces: one entry per namespace, by name.
	Namespaces map[string]NamespaceResult
	// Omitted counts the namespaces left out of Namespaces to fit termmsg.MaxBytes (healthy
	// ones first: their entries carry no back-off).
	Omitted int
}

// NamespaceResult is one namespace's part of a Report.
type NamespaceResult struct {
	Last Result
	// Ago is how long before End the namespace's last probe finished (0 with ResultNotProbed).
	Ago time.Duration
	// Throttled is the number of throttled (429) probes in a row at the end of the run: the
	// coordinator continues the back-off from there.
	Throttled int
}

// wireReport is Report's JSON. A namespace's entry is a short array,
// [last result, seconds since its last probe, throttled in a row (left out when 0)]: short
// JSON, and repetitive, which gzip turns into about 15 bytes a namespace.
type wireReport struct {
	V          int                        `json:"v"`
	End        int64                      `json:"end"`
	DryRun     bool                       `json:"dryRun,omitempty"`
	Results    map[string]int             `json:"results,omitempty"`
	Ops        map[string]int             `json:"ops,omitempty"`
	Namespaces map[string]json.RawMessage `json:"ns"`
	Omitted    int                        `json:"omitted,omitempty"`
}

func encodeEntry(r NamespaceResult) json.RawMessage {
	e := []any{string(ResultNotProbed)}
	if r.Last != ResultNotProbed && r.Last != "" {
		e = []any{string(r.Last), int64(r.Ago.Round(time.Second) / time.Second)}
		if r.Throttled > 0 {
			e = append(e, r.Throttled)
		}
	}
	b, _ := json.Marshal(e)
	return b
}

func decodeEntry(ns string, raw json.RawMessage) (NamespaceResult, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) == 0 || len(parts) > 3 {
		return NamespaceResult{}, fmt.Errorf("namespace %q: want [result, seconds ago, throttled], got %s", ns, shorten(string(raw)))
	}
	var r NamespaceResult
	var last string
	if err := json.Unmarshal(parts[0], &last); err != nil || last == "" {
		return NamespaceResult{}, fmt.Errorf("namespace %q: the result is not a string: %s", ns, shorten(string(parts[0])))
	}
	r.Last = Result(last)
	if len(parts) > 1 {
		var s int64
		if err := json.Unmarshal(parts[1], &s); err != nil || s < 0 || s > maxAgoSeconds {
			return NamespaceResult{}, fmt.Errorf("namespace %q: seconds ago is not a small non-negative integer: %s", ns, shorten(string(parts[1])))
		}
		r.Ago = time.Duration(s) * time.Second
	}
	if len(parts) > 2 {
		if err := json.Unmarshal(parts[2], &r.Throttled); err != nil || r.Throttled < 0 {
			return NamespaceResult{}, fmt.Errorf("namespace %q: throttled is not a non-negative integer: %s", ns, shorten(string(parts[2])))
		}
	}
	return r, nil
}

// EncodeReport writes r as the termination message, at most termmsg.MaxBytes long
// (termmsg.Message: the summary line, then the JSON, compressed when plain would not fit).
// When even that does not fit, the namespaces whose last probe needs no follow-up (healthy,
// skipped, scale-up, not probed) are left out first, largest names first, and counted in
// "omitted".
func EncodeReport(r Report) string {
	w := wireReport{V: ReportVersion, End: r.End.Unix(), DryRun: r.DryRun, Omitted: r.Omitted,
		Results: nonZero(r.Results), Ops: nonZero(r.Ops), Namespaces: map[string]json.RawMessage{}}
	for ns, e := range r.Namespaces {
		w.Namespaces[ns] = encodeEntry(e)
	}
	// Drop entries, least needed first: the fewest that make it fit. The compressed size
	// shrinks (near enough) steadily with each entry dropped.
	names := slices.Collect(maps.Keys(r.Namespaces))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(dropPriority(r.Namespaces[a].Last)-dropPriority(r.Namespaces[b].Last), len(b)-len(a), strings.Compare(a, b))
	})
	without := func(n int) string {
		d := w
		d.Namespaces = maps.Clone(w.Namespaces)
		for _, ns := range names[:n] {
			delete(d.Namespaces, ns)
		}
		d.Omitted += n
		return termmsg.Message(r.String(), d)
	}
	return termmsg.Fit(len(names), without)
}

// dropPriority: lower is dropped first when a report is too long.
func dropPriority(r Result) int {
	switch r {
	case ResultHealthy, ResultSkipped, ResultNotProbed, ResultScaleUp:
		return 0
	case ResultAPIUnreachable:
		return 1
	}
	return 2 // throttled (carries the back-off), scale-down, error
}

// nonZero is m without its zero counts (never nil).
func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}

// maxAgoSeconds bounds an entry's age (a year): larger is not from a probe run.
const maxAgoSeconds = 366 * 24 * 3600

// ErrNotAReport: the message is not a probe report (the run refused its configuration, was
// killed before writing it, or is from a newer depwatch).
var ErrNotAReport = errors.New("not a probe report")

// DecodeReport reads what EncodeReport wrote (the inverse: DecodeReport(EncodeReport(r)) is r
// at second precision, zero counts left out), and the reports probe pods wrote before the one
// format (termmsg.ReadReport).
func DecodeReport(msg string) (Report, error) {
	var w wireReport
	if err := termmsg.ReadReport(msg, &w); err != nil {
		return Report{}, fmt.Errorf("%w: %v", ErrNotAReport, err)
	}
	if w.V != ReportVersion && w.V != 1 {
		return Report{}, fmt.Errorf("%w: version %d, this depwatch reads versions 1 and %d", ErrNotAReport, w.V, ReportVersion)
	}
	if w.Namespaces == nil {
		return Report{}, fmt.Errorf("%w: no \"ns\" field", ErrNotAReport)
	}
	r := Report{End: time.Unix(w.End, 0), DryRun: w.DryRun, Omitted: w.Omitted,
		Namespaces: map[string]NamespaceResult{}}
	counted := map[string]map[string]int{"results": w.Results, "ops": w.Ops}
	for _, name := range []string{"results", "ops"} {
		for k, v := range counted[name] {
			if v < 0 {
				return Report{}, fmt.Errorf("%w: %s[%q] = %d is negative", ErrNotAReport, name, k, v)
			}
		}
	}
	r.Results, r.Ops = nonZero(w.Results), nonZero(w.Ops)
	for ns, raw := range w.Namespaces {
		e, err := decodeEntry(ns, raw)
		if err != nil {
			return Report{}, fmt.Errorf("%w: %v", ErrNotAReport, err)
		}
		r.Namespaces[ns] = e
	}
	return r, nil
}

// String is the report's summary line, what a person reads in `kubectl describe pod`: its
// namespaces, its probes' results and its scale operations.
func (r Report) String() string {
	dry := ""
	if r.DryRun {
		dry = " (dry run)"
	}
	line := fmt.Sprintf("Probe run of %d namespace(s)%s: probes %s", len(r.Namespaces)+r.Omitted, dry, joinCounts(nonZero(r.Results), "%[1]s=%[2]d"))
	if ops := nonZero(r.Ops); len(ops) > 0 {
		line += "; scale operations " + joinCounts(ops, "%[1]s=%[2]d")
	}
	return line + "."
}

// joinCounts is m's entries in key order, each as format (of the key and its count), joined
// by ", "; "none" when m is empty.
func joinCounts(m map[string]int, format string) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf(format, k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// Ops counts the summary's scale operations by outcome, as the coordinator's metrics name them:
// the outcomes' own names (a dry run's are the would-scale-* ones), already-down and already-up
// together as "unchanged".
func (s Summary) Ops() map[string]int {
	ops := map[string]int{}
	for o, n := range s.Outcomes {
		if o == OutcomeAlreadyDown || o == OutcomeAlreadyUp {
			o = "unchanged"
		}
		ops[string(o)] += n
	}
	return nonZero(ops)
}

// Result is the outcome of one probe, as the coordinator's metrics name it.
type Result string

const (
	ResultAPIUnreachable Result = "api-unreachable" // no decision: the API server could not be probed
	ResultThrottled      Result = "throttled"       // no decision: an API server answered 429; the next probe backs off
	ResultSkipped        Result = "skipped"         // no decision: the leases cannot tell (one candidate)
	ResultScaleDown      Result = "scale-down"      // scale-down decided
	ResultScaleUp        Result = "scale-up"        // scale-up decided and something was (or would be) scaled up
	ResultHealthy        Result = "healthy"         // scale-up decided, everything was up already
	ResultError          Result = "error"           // the probe could not run: Secret, kubeconfig, credentials
	// ResultNotProbed is a namespace the run did not probe at all: its first probe was not
	// due before the run ended (NAMESPACE_SETTINGS notBefore), or the run was stopped before it.
	ResultNotProbed Result = "not-probed"
)

// Summary is what a run did; the counts add up over every probe of the run.
type Summary struct {
	Namespace  string
	DryRun     bool
	Probes     int
	Last       Result // the last probe's result
	LastReason string

	Results  map[Result]int  // probes by result
	Outcomes map[Outcome]int // the dependents' outcomes
}

// String is one line, for the final log line and /dev/termination-log.
func (s Summary) String() string {
	var b strings.Builder
	down, up := "scaled-down", "scaled-up"
	if s.DryRun {
		b.WriteString("dry run, nothing changed: ")
		down, up = "would-scale-down", "would-scale-up"
	}
	fmt.Fprintf(&b, "namespace=%s probes=%d last=%s", s.Namespace, s.Probes, s.Last)
	if s.LastReason != "" {
		fmt.Fprintf(&b, " (%s)", event.Truncate(s.LastReason, 600))
	}
	var results []string
	for _, r := range []Result{ResultScaleDown, ResultScaleUp, ResultHealthy, ResultSkipped, ResultAPIUnreachable, ResultThrottled, ResultError} {
		if n := s.Results[r]; n > 0 {
			results = append(results, fmt.Sprintf("%s=%d", r, n))
		}
	}
	if len(results) > 0 {
		fmt.Fprintf(&b, " results: %s;", strings.Join(results, " "))
	}
	ops := s.Ops() // failed counts the admission-refused writes too
	fmt.Fprintf(&b, " resources: %s=%d %s=%d annotations-removed=%d unchanged=%d ignored=%d optional-missing=%d missing=%d failed=%d not-started=%d interrupted=%d blocked=%d",
		down, ops[down], up, ops[up], ops["annotations-removed"], ops["unchanged"], ops["ignored"], ops["optional-missing"], ops["missing"],
		ops["failed"]+ops["admission-refused"], ops["not-started"], ops["interrupted"], ops["blocked"])
	return b.String()
}

// Throttling back-off: dependency-watchdog waits a fixed 10s after a 429, which is no back-off
// at all at its default 10s interval. depwatch doubles it for each throttled probe in a row,
// up to maxThrottleBackoff, so a throttled API server sees fewer and fewer probes.
const (
	baseThrottleBackoff = 10 * time.Second
	maxThrottleBackoff  = 5 * time.Minute
)

// ThrottleBackoff is the least time before the next probe after n throttled probes in a row
// (n >= 1): 10s, 20s, 40s, ... at most 5m; 0 for n <= 0.
func ThrottleBackoff(n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return min(baseThrottleBackoff<<min(n-1, 5), maxThrottleBackoff) // 10s<<5 is past the cap
}
