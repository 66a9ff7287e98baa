package probe

import (
	"fmt"
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/event"
)

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
)

// Summary is what a run did; the counts add up over every probe of the run.
type Summary struct {
	Namespace  string
	DryRun     bool
	Probes     int
	Last       Result // the last probe's result
	LastReason string

	Results map[Result]int // probes by result

	ScaledDown, ScaledUp, AnnotationsRemoved int // in a dry run: would have been
	Unchanged                                int // already down / already up
	Ignored, OptionalMissing                 int
	Missing, Failed                          int // failures: the run exits non-zero
	// AdmissionRefused: of Failed, the writes an admission policy refused (reported apart).
	AdmissionRefused        int
	NotStarted, Interrupted int // the run was stopped (SIGTERM)
	Blocked                 int // not started: an earlier level failed
}

// add counts o in each counter it belongs to.
func (s *Summary) add(o Outcome) {
	for _, n := range map[Outcome][]*int{
		OutcomeScaledDown: {&s.ScaledDown}, OutcomeWouldScaleDown: {&s.ScaledDown},
		OutcomeScaledUp: {&s.ScaledUp}, OutcomeWouldScaleUp: {&s.ScaledUp},
		OutcomeAnnotationsRemoved: {&s.AnnotationsRemoved},
		OutcomeAlreadyDown:        {&s.Unchanged}, OutcomeAlreadyUp: {&s.Unchanged},
		OutcomeIgnored: {&s.Ignored}, OutcomeOptionalMissing: {&s.OptionalMissing}, OutcomeMissing: {&s.Missing},
		OutcomeFailed: {&s.Failed}, OutcomeAdmissionRefused: {&s.Failed, &s.AdmissionRefused},
		OutcomeNotStarted: {&s.NotStarted}, OutcomeInterrupted: {&s.Interrupted}, OutcomeBlocked: {&s.Blocked},
	}[o] {
		*n++
	}
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
	fmt.Fprintf(&b, " resources: %s=%d %s=%d annotations-removed=%d unchanged=%d ignored=%d optional-missing=%d missing=%d failed=%d not-started=%d interrupted=%d blocked=%d",
		down, s.ScaledDown, up, s.ScaledUp, s.AnnotationsRemoved, s.Unchanged, s.Ignored, s.OptionalMissing, s.Missing, s.Failed, s.NotStarted, s.Interrupted, s.Blocked)
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
