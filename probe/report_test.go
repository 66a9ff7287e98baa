package probe

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// What EncodeReport writes, DecodeReport reads back unchanged (at second precision).
func TestReportRoundTrip(t *testing.T) {
	end := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		r    Report
	}{
		{"one namespace, healthy", Report{End: end, Results: map[string]int{"healthy": 3}, Ops: map[string]int{"unchanged": 9},
			Namespaces: map[string]NamespaceResult{"shoot--a": {Last: ResultHealthy, Ago: 4 * time.Second}}}},
		{"several, one throttled, one not probed, dry run", Report{End: end, DryRun: true,
			Results: map[string]int{"throttled": 2, "scale-down": 1}, Ops: map[string]int{"would-scale-down": 3},
			Namespaces: map[string]NamespaceResult{
				"shoot--a": {Last: ResultThrottled, Ago: time.Second, Throttled: 2},
				"shoot--b": {Last: ResultScaleDown},
				"shoot--c": {Last: ResultNotProbed},
			}}},
		{"no namespace at all", Report{End: end, Results: map[string]int{}, Ops: map[string]int{}, Namespaces: map[string]NamespaceResult{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := EncodeReport(tc.r)
			got, err := DecodeReport(msg)
			if err != nil {
				t.Fatalf("DecodeReport(%s): %v", msg, err)
			}
			want := tc.r
			if want.Results == nil {
				want.Results = map[string]int{}
			}
			if want.Ops == nil {
				want.Ops = map[string]int{}
			}
			if !got.End.Equal(want.End) {
				t.Errorf("end %s, want %s", got.End, want.End)
			}
			got.End, want.End = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v\nwire %s", got, want, msg)
			}
		})
	}
}

// A shard's report always fits the kubelet's 4 KiB termination message: entries that need no
// follow-up are left out first, and counted.
func TestReportFitsTheTerminationMessage(t *testing.T) {
	r := Report{End: time.Now(), Results: map[string]int{"healthy": 1000}, Namespaces: map[string]NamespaceResult{}}
	for i := range 150 {
		r.Namespaces[fmt.Sprintf("shoot--project-%03d--cluster-name", i)] = NamespaceResult{Last: ResultHealthy, Ago: 3 * time.Second}
	}
	r.Namespaces["shoot--x--throttled"] = NamespaceResult{Last: ResultThrottled, Throttled: 3}
	msg := EncodeReport(r)
	if len(msg) > MaxReportBytes {
		t.Fatalf("report is %d bytes, more than %d", len(msg), MaxReportBytes)
	}
	got, err := DecodeReport(msg)
	if err != nil {
		t.Fatal(err)
	}
	if got.Omitted == 0 || got.Omitted+len(got.Namespaces) != 151 {
		t.Errorf("omitted %d, kept %d, want them to add up to 151 with some omitted", got.Omitted, len(got.Namespaces))
	}
	if e := got.Namespaces["shoot--x--throttled"]; e.Throttled != 3 {
		t.Errorf("the throttled namespace (it carries a back-off) was dropped: %+v", e)
	}
	// Fifty namespaces, the default shard, fit whole.
	small := Report{End: time.Now(), Namespaces: map[string]NamespaceResult{}}
	for i := range 50 {
		small.Namespaces[fmt.Sprintf("shoot--project-%03d--some-longer-cluster-name", i)] = NamespaceResult{Last: ResultHealthy, Ago: 9 * time.Second}
	}
	if got, _ := DecodeReport(EncodeReport(small)); got.Omitted != 0 || len(got.Namespaces) != 50 {
		t.Errorf("a 50-namespace shard did not fit: omitted %d", got.Omitted)
	}
}

func TestDecodeReportRefusesWhatIsNotAReport(t *testing.T) {
	for _, msg := range []string{
		"",
		"invalid probe configuration:\nNAMESPACE: required",
		"namespace=a probes=1 last=healthy resources: scaled-down=0",
		`{"v":2,"end":1,"ns":{}}`,
		`{"v":1,"end":1}`,
		`{"v":1,"end":1,"ns":{"a":"healthy"}}`,
		`{"v":1,"end":1,"ns":{"a":["healthy",-1]}}`,
		`{"v":1,"end":1,"ns":{"a":[]}}`,
		`{"v":1,"end":1,"results":{"healthy":-1},"ns":{}}`,
		`{"v":1,"end":1,"ns":{"a":["healthy",1` + strings.Repeat("0", 30) + `]}}`,
	} {
		if _, err := DecodeReport(msg); !errors.Is(err, ErrNotAReport) {
			t.Errorf("DecodeReport(%q) = %v, want ErrNotAReport", msg, err)
		}
	}
}
