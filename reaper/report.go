package reaper

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// SavedBackOffBuckets are the upper bounds, in seconds, of the histogram of the back-off each
// restart saved: the kubelet's back-off doubles from 10 s to 300 s (its default maximum; a
// node's maxContainerRestartPeriod can lower it to 1 s), so each step has a bucket of its own.
var SavedBackOffBuckets = []float64{1, 2, 5, 10, 20, 40, 80, 160, 300}

// reportPrefix starts the termination message's second line, the report a coordinator reads;
// the first line is the summary a person reads in `kubectl describe pod`.
const reportPrefix = "report: "

// Report is what the coordinator exports from a finished weeder run (a Job's pod is gone
// before Prometheus would scrape it): written into the termination message by
// TerminationMessage, read back by ReadReport. Its size does not grow with the pods reaped,
// so it always fits the kubelet's 4 KiB.
type Report struct {
	DryRun         bool `json:"dryRun,omitempty"`
	Reaped         int  `json:"reaped"`
	BackOffSkipped int  `json:"backoffSkipped"`
	// SavedCounts[i] is the number of restarts whose saved back-off was at most
	// SavedBackOffBuckets[i] seconds (and more than the bound before it); the last entry,
	// one more than there are bounds, counts those above the last bound.
	SavedCounts  []uint64 `json:"savedCounts"`
	SavedSeconds float64  `json:"savedSeconds"`
}

// Report is the summary's machine-readable part.
func (s Summary) Report() Report {
	r := Report{DryRun: s.DryRun, Reaped: s.Reaped, BackOffSkipped: s.BackOffSkipped,
		SavedCounts: make([]uint64, len(SavedBackOffBuckets)+1), SavedSeconds: s.SavedSeconds()}
	for _, d := range s.BackOffSaved {
		i, _ := slices.BinarySearch(SavedBackOffBuckets, d.Seconds()) // first bound >= d
		r.SavedCounts[i]++
	}
	return r
}

// TerminationMessage is a run's termination message: the summary line, then its report.
func TerminationMessage(s Summary) string {
	b, err := json.Marshal(s.Report())
	if err != nil { // a struct of numbers: cannot happen
		return s.String()
	}
	return s.String() + "\n" + reportPrefix + string(b)
}

// ErrNoReport: the message has no report line (a run that refused its configuration, an
// older depwatch, or a container killed before it wrote one).
var ErrNoReport = errors.New("no weeder report in the termination message")

// ReadReport reads the report out of a termination message written by TerminationMessage.
func ReadReport(msg string) (Report, error) {
	for _, line := range strings.Split(msg, "\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), reportPrefix)
		if !ok {
			continue
		}
		var r Report
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			return Report{}, fmt.Errorf("reading the weeder report %q: %w", data, err)
		}
		if len(r.SavedCounts) != len(SavedBackOffBuckets)+1 {
			return Report{}, fmt.Errorf("the weeder report has %d saved back-off buckets, want %d", len(r.SavedCounts), len(SavedBackOffBuckets)+1)
		}
		return r, nil
	}
	return Report{}, ErrNoReport
}
