package reaper

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/termmsg"
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
	if svc != nil {
		s.addFor(*svc, ServiceSaving{Restarts: 1, Saved: sv.saved}) // zero when not known
	}
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

// add counts s into the run's total; the total never started only if no target did.
func (s *Summary) add(o Summary) {
	s.Cycles += o.Cycles
	s.FailedCycles += o.FailedCycles
	s.Seen += o.Seen
	s.Matched += o.Matched
	s.Reaped += o.Reaped
	s.Skipped += o.Skipped
	s.Gone += o.Gone
	s.Errors += o.Errors
	s.AdmissionRefused += o.AdmissionRefused
	s.Deferred += o.Deferred
	s.BackOffSkipped += o.BackOffSkipped
	s.BackOffSaved = append(s.BackOffSaved, o.BackOffSaved...)
	for svc, sv := range o.ByService {
		s.addFor(svc, sv)
	}
	s.NotStarted = s.NotStarted && o.NotStarted
}

// SavedBackOffBuckets are the upper bounds, in seconds, of the histogram of the back-off each
// restart saved: the kubelet's back-off doubles from 10 s to 300 s (its default maximum; a
// node's maxContainerRestartPeriod can lower it to 1 s), so each step has a bucket of its own.
var SavedBackOffBuckets = []float64{1, 2, 5, 10, 20, 40, 80, 160, 300}

// Report is what the coordinator exports from a finished weeder run (a Job's pod is gone
// before Prometheus would scrape it): written into the termination message by
// TerminationMessage, read back by ReadReport. Its size does not grow with the pods reaped;
// its services are as many as fit the kubelet's 4 KiB.
type Report struct {
	DryRun         bool `json:"dryRun,omitempty"`
	Reaped         int  `json:"reaped"`
	BackOffSkipped int  `json:"backoffSkipped"`
	// AdmissionRefused counts the deletes (or evictions) an admission policy refused: for a
	// weeder, a disagreement between depwatch's policy and its reaper that must be seen.
	AdmissionRefused int `json:"admissionRefused,omitempty"`
	// SavedCounts[i] is the number of restarts whose saved back-off was at most
	// SavedBackOffBuckets[i] seconds (and more than the bound before it); the last entry,
	// one more than there are bounds, counts those above the last bound.
	SavedCounts  []uint64 `json:"savedCounts"`
	SavedSeconds float64  `json:"savedSeconds"`
	// Services: per service ("<namespace>/<name>") whose dependents were restarted, what the
	// restarts saved. A batch run of hundreds of services can name more than 4 KiB holds: those
	// that saved the most are kept, and OtherServices counts the rest (their restarts are in
	// the totals above only).
	Services      map[string]ServiceReport `json:"services,omitempty"`
	OtherServices int                      `json:"otherServices,omitempty"`
}

// ServiceReport is one service's restarts and the back-off they saved, in seconds.
type ServiceReport struct {
	Restarts int     `json:"restarts"`
	Saved    float64 `json:"saved"`
}

// Report is the summary's machine-readable part.
func (s Summary) Report() Report {
	r := Report{DryRun: s.DryRun, Reaped: s.Reaped, BackOffSkipped: s.BackOffSkipped,
		AdmissionRefused: s.AdmissionRefused, SavedCounts: make([]uint64, len(SavedBackOffBuckets)+1), SavedSeconds: s.SavedSeconds()}
	for _, d := range s.BackOffSaved {
		i, _ := slices.BinarySearch(SavedBackOffBuckets, d.Seconds()) // first bound >= d
		r.SavedCounts[i]++
	}
	if len(s.ByService) > 0 {
		r.Services = make(map[string]ServiceReport, len(s.ByService))
		for svc, sv := range s.ByService {
			r.Services[svc.String()] = ServiceReport{Restarts: sv.Restarts, Saved: math.Round(sv.Saved.Seconds()*10) / 10}
		}
	}
	return r
}

// TerminationMessage is a run's termination message (termmsg.Message): the summary line, then
// its report, with as many of its services as fit the kubelet's 4 KiB (those that saved the
// most first).
func TerminationMessage(s Summary) string {
	line := s.String()
	full := s.Report()
	keys := slices.Collect(maps.Keys(full.Services))
	slices.SortFunc(keys, func(a, b string) int {
		x, y := full.Services[a], full.Services[b]
		return cmp.Or(cmp.Compare(y.Saved, x.Saved), cmp.Compare(y.Restarts, x.Restarts), strings.Compare(a, b))
	})
	// Leave out the services that saved the least first: the fewest that make it fit.
	return termmsg.Fit(len(keys), func(leftOut int) string {
		r := full
		r.Services, r.OtherServices = nil, leftOut
		if kept := len(keys) - leftOut; kept > 0 {
			r.Services = make(map[string]ServiceReport, kept)
			for _, k := range keys[:kept] {
				r.Services[k] = full.Services[k]
			}
		}
		return termmsg.Message(line, r)
	})
}

// ReadReport reads the report out of a termination message written by TerminationMessage
// (termmsg.ErrNoReport when it holds none).
func ReadReport(msg string) (Report, error) {
	var r Report
	if err := termmsg.ReadReport(msg, &r); err != nil {
		return Report{}, err
	}
	if len(r.SavedCounts) != len(SavedBackOffBuckets)+1 {
		return Report{}, fmt.Errorf("the weeder report has %d saved back-off buckets, want %d", len(r.SavedCounts), len(SavedBackOffBuckets)+1)
	}
	return r, nil
}
