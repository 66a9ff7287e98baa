package reaper

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/termmsg"
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

func TestTheReportSaysWhatEachServicesRestartsSaved(t *testing.T) {
	pg, redis := ServiceRef{Namespace: "data", Name: "postgres"}, ServiceRef{Namespace: "shop", Name: "redis"}
	var s Summary
	s.countRestart(&pg, saving{known: true, saved: 40*time.Second + 260*time.Millisecond})
	s.countRestart(&pg, saving{}) // a back-off the kubelet's message did not say: restarted, nothing counted as saved
	s.countRestart(&redis, saving{known: true, saved: 9 * time.Second})
	s.countRestart(nil, saving{known: true, saved: time.Second}) // a run that follows no service
	var total Summary
	total.add(s)
	total.add(Summary{ByService: map[ServiceRef]ServiceSaving{pg: {Restarts: 1, Saved: 10 * time.Second}}}) // another target of the same service
	got, err := ReadReport(TerminationMessage(total))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ServiceReport{"data/postgres": {Restarts: 3, Saved: 50.3}, "shop/redis": {Restarts: 1, Saved: 9}}
	if !reflect.DeepEqual(got.Services, want) || got.OtherServices != 0 {
		t.Errorf("services %+v (other %d), want %+v", got.Services, got.OtherServices, want)
	}
}

// A batch run of 3,000 services with long names: the report, compressed, names those that
// saved the most, counts the rest, and the message fits what the kubelet keeps.
func TestTheReportOfABigBatchKeepsTheServicesThatSavedTheMost(t *testing.T) {
	const services = 3000
	s := Summary{ByService: map[ServiceRef]ServiceSaving{}}
	for i := range services {
		ref := ServiceRef{Namespace: fmt.Sprintf("shoot--project-with-a-long-name--cluster-%04d", i), Name: "kube-apiserver"}
		s.ByService[ref] = ServiceSaving{Restarts: 1, Saved: time.Duration(i) * time.Second}
		s.Reaped++
	}
	msg := TerminationMessage(s)
	if len(msg) > termmsg.MaxBytes {
		t.Fatalf("the message is %d bytes; the kubelet keeps %d", len(msg), termmsg.MaxBytes)
	}
	got, err := ReadReport(msg)
	if err != nil {
		t.Fatal(err)
	}
	kept := len(got.Services)
	if kept < 100 || got.OtherServices == 0 || kept+got.OtherServices != services {
		t.Fatalf("the report names %d services and counts %d others; want most of what fits, some left out, and %d in all", kept, got.OtherServices, services)
	}
	for i := services - kept; i < services; i++ { // the ones that saved the most
		key := fmt.Sprintf("shoot--project-with-a-long-name--cluster-%04d/kube-apiserver", i)
		if sv, ok := got.Services[key]; !ok || sv.Saved != float64(i) {
			t.Errorf("%s: %+v, %v; want it named with %ds saved", key, sv, ok, i)
		}
	}
	t.Logf("%d of %d services named in %d bytes", kept, services, len(msg))
}

func TestReadReportRefusesWhatItCannotRead(t *testing.T) {
	for name, msg := range map[string]string{
		"a refused configuration": "depwatch reap: invalid configuration, nothing was done:\n  - RUN_DURATION: ...",
		"the summary alone":       Summary{}.String(),
	} {
		if _, err := ReadReport(msg); !errors.Is(err, termmsg.ErrNoReport) {
			t.Errorf("%s: err = %v, want ErrNoReport", name, err)
		}
	}
	for name, msg := range map[string]string{
		"broken JSON":        "cycles=1\nreport: {\"reaped\":",
		"other bucket count": "cycles=1\nreport: {\"reaped\":1,\"savedCounts\":[1,0]}",
	} {
		if _, err := ReadReport(msg); err == nil || errors.Is(err, termmsg.ErrNoReport) {
			t.Errorf("%s: err = %v, want a reading error", name, err)
		}
	}
}
