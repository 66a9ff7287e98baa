package probe

import (
	"fmt"
	"strings"
)

// Result is the outcome of one probe, as the coordinator's metrics name it.
type Result string

const (
	ResultAPIUnreachable Result = "api-unreachable" // no decision: the API server could not be probed
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
	NotStarted, Interrupted                  int // the run was stopped (SIGTERM)
}

func (s *Summary) add(o Outcome) {
	switch o {
	case OutcomeScaledDown, OutcomeWouldScaleDown:
		s.ScaledDown++
	case OutcomeScaledUp, OutcomeWouldScaleUp:
		s.ScaledUp++
	case OutcomeAnnotationsRemoved:
		s.AnnotationsRemoved++
	case OutcomeAlreadyDown, OutcomeAlreadyUp:
		s.Unchanged++
	case OutcomeIgnored:
		s.Ignored++
	case OutcomeOptionalMissing:
		s.OptionalMissing++
	case OutcomeMissing:
		s.Missing++
	case OutcomeFailed:
		s.Failed++
	case OutcomeNotStarted:
		s.NotStarted++
	case OutcomeInterrupted:
		s.Interrupted++
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
		fmt.Fprintf(&b, " (%s)", truncate(s.LastReason, 600))
	}
	var results []string
	for _, r := range []Result{ResultScaleDown, ResultScaleUp, ResultHealthy, ResultSkipped, ResultAPIUnreachable, ResultError} {
		if n := s.Results[r]; n > 0 {
			results = append(results, fmt.Sprintf("%s=%d", r, n))
		}
	}
	if len(results) > 0 {
		fmt.Fprintf(&b, " results: %s;", strings.Join(results, " "))
	}
	fmt.Fprintf(&b, " resources: %s=%d %s=%d annotations-removed=%d unchanged=%d ignored=%d optional-missing=%d missing=%d failed=%d not-started=%d interrupted=%d",
		down, s.ScaledDown, up, s.ScaledUp, s.AnnotationsRemoved, s.Unchanged, s.Ignored, s.OptionalMissing, s.Missing, s.Failed, s.NotStarted, s.Interrupted)
	return b.String()
}
