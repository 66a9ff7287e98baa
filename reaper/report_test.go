package reaper

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTerminationMessageRoundTripsTheReportBesideTheSummaryLine(t *testing.T) {
	s := Summary{Cycles: 3, Matched: 5, Reaped: 4, BackOffSkipped: 1,
		BackOffSaved: []time.Duration{500 * time.Millisecond, 10 * time.Second, 37 * time.Second, 290 * time.Second, 301 * time.Second}}
	msg := TerminationMessage(s)
	if first, _, _ := strings.Cut(msg, "\n"); first != s.String() {
		t.Errorf("first line %q, want the summary a person reads, %q", first, s.String())
	}
	if len(msg) > 4000 {
		t.Errorf("the message is %d bytes; the kubelet keeps 4096", len(msg))
	}
	got, err := ReadReport(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := Report{Reaped: 4, BackOffSkipped: 1, SavedSeconds: s.SavedSeconds(),
		// ≤1 s, ≤2, ≤5, ≤10, ≤20, ≤40, ≤80, ≤160, ≤300, more
		SavedCounts: []uint64{1, 0, 0, 1, 0, 1, 0, 0, 1, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("report %+v, want %+v", got, want)
	}
}

func TestTheReportOfAStormFitsTheKubeletsTerminationMessage(t *testing.T) {
	var s Summary
	for i := range 10000 {
		s.BackOffSaved = append(s.BackOffSaved, time.Duration(i%300)*time.Second)
	}
	s.Reaped = len(s.BackOffSaved)
	if msg := TerminationMessage(s); len(msg) > 4000 {
		t.Errorf("a 10,000-pod run's message is %d bytes; the kubelet keeps 4096", len(msg))
	}
}

func TestReadReportRefusesWhatItCannotRead(t *testing.T) {
	for name, msg := range map[string]string{
		"a refused configuration": "depwatch reap: invalid configuration, nothing was done:\n  - RUN_DURATION: ...",
		"the summary alone":       Summary{}.String(),
	} {
		if _, err := ReadReport(msg); !errors.Is(err, ErrNoReport) {
			t.Errorf("%s: err = %v, want ErrNoReport", name, err)
		}
	}
	for name, msg := range map[string]string{
		"broken JSON":        "cycles=1\nreport: {\"reaped\":",
		"other bucket count": "cycles=1\nreport: {\"reaped\":1,\"savedCounts\":[1,0]}",
	} {
		if _, err := ReadReport(msg); err == nil || errors.Is(err, ErrNoReport) {
			t.Errorf("%s: err = %v, want a reading error", name, err)
		}
	}
}
