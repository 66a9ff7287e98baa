package reaper

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/depwatch/depwatch/internal/termmsg"
)

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
