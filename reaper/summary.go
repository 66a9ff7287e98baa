package reaper

import (
	"fmt"
	"time"
)

// Summary is what a run did. Counts add up over every cycle and watch event of the run.
type Summary struct {
	Cycles       int // cycles that listed pods successfully
	FailedCycles int // cycles that could not list pods
	Seen         int // pods listed by the cycles (server-side filtered)
	Matched      int // pods every rule agreed on (cycles and watch; a UID once per cycle)
	Reaped       int // pods deleted or evicted; in a dry run, pods that would have been
	Skipped      int // evictions refused (HTTP 429, e.g. a PodDisruptionBudget)
	Gone         int // pods that disappeared before they could be reaped (not an error)
	Errors       int // failed deletes/evictions (failed cycles are in FailedCycles)
	// AdmissionRefused: of Errors, the deletes or evictions an admission policy refused.
	AdmissionRefused int
	// Deferred: matched pods left alone because REAP_COOLDOWN had not passed since their
	// owner's pods were last reaped (each pod counted once per round of its owner).
	Deferred int
	DryRun   bool
	// NotStarted: START_WHEN_READY's service never became Ready during the run (MAX_WAIT
	// passed, or SIGTERM came first): nothing was listed or reaped.
	NotStarted bool
	// BackOffSkipped: matched pods in a crash-loop back-off that the kubelet ended sooner than
	// BACKOFF_FLOOR, left to it (each back-off counted once).
	BackOffSkipped int
	// BackOffSaved: for each pod restarted in crash-loop back-off, the back-off it had left.
	BackOffSaved []time.Duration
	// ByService: per service the run followed (START_WHEN_READY, each of TARGETS), its
	// dependents' restarts and the back-off they saved; nil in a dry run and in a run that
	// follows no service.
	ByService map[ServiceRef]ServiceSaving
}

// ServiceSaving is what the restarts of one service's dependents were worth.
type ServiceSaving struct {
	Restarts int           // dependents deleted or evicted
	Saved    time.Duration // the back-off those restarts saved, of those whose status said it
}

// countRestart counts a pod restarted for svc (nil: a run that follows no service) with its
// saving, into the run's total and its service's.
func (s *Summary) countRestart(svc *ServiceRef, sv saving) {
	if sv.known {
		s.BackOffSaved = append(s.BackOffSaved, sv.saved)
	}
	if svc == nil {
		return
	}
	one := ServiceSaving{Restarts: 1}
	if sv.known {
		one.Saved = sv.saved
	}
	s.addFor(*svc, one)
}

// addFor adds sv to svc's part of the summary.
func (s *Summary) addFor(svc ServiceRef, sv ServiceSaving) {
	if s.ByService == nil {
		s.ByService = map[ServiceRef]ServiceSaving{}
	}
	e := s.ByService[svc]
	e.Restarts += sv.Restarts
	e.Saved += sv.Saved
	s.ByService[svc] = e
}

// SavedSeconds is the back-off the run's restarts saved, in all.
func (s Summary) SavedSeconds() float64 {
	var total time.Duration
	for _, d := range s.BackOffSaved {
		total += d
	}
	return total.Seconds()
}

// String is one line, for the exit log line and /dev/termination-log.
func (s Summary) String() string {
	prefix, reaped := "", "reaped"
	if s.DryRun {
		prefix, reaped = "dry run, nothing changed: ", "would-reap"
	}
	if s.NotStarted {
		prefix = "never started (the START_WHEN_READY service was not Ready), nothing reaped: " + prefix
	}
	return fmt.Sprintf("%scycles=%d failed-cycles=%d seen=%d matched=%d %s=%d skipped=%d gone=%d errors=%d deferred=%d backoff-skipped=%d backoff-saved=%.0fs",
		prefix, s.Cycles, s.FailedCycles, s.Seen, s.Matched, reaped, s.Reaped, s.Skipped, s.Gone, s.Errors, s.Deferred, s.BackOffSkipped, s.SavedSeconds())
}
