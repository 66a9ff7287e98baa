package probe

import (
	"bytes"
	"compress/gzip"
	"encoding/ascii85"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/termmsg"
)

// What EncodeReport writes, DecodeReport reads back unchanged (at second precision); so are
// the two forms probe pods wrote before the one format of termination messages (an upgrade
// finds their pods): the plain JSON of version 1 and the compressed version 2, both without
// a summary line.
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
		for form, encode := range map[string]func(Report) string{"one format": EncodeReport, "plain version 1": encodePlainV1, "compressed version 2": encodeCompressedV2} {
			t.Run(tc.name+", "+form, func(t *testing.T) {
				msg := encode(tc.r)
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
}

// encodePlainV1 is what EncodeReport wrote before version 2 (plain JSON), for reports that
// fit whole.
func encodePlainV1(r Report) string { return oldWire(r, 1) }

// encodeCompressedV2 is what EncodeReport wrote before the one format: the JSON compressed,
// with no summary line.
func encodeCompressedV2(r Report) string { return compressed(oldWire(r, 2)) }

func oldWire(r Report, v int) string {
	w := wireReport{V: v, End: r.End.Unix(), DryRun: r.DryRun, Omitted: r.Omitted,
		Results: nonZero(r.Results), Ops: nonZero(r.Ops), Namespaces: map[string]json.RawMessage{}}
	for ns, e := range r.Namespaces {
		w.Namespaces[ns] = encodeEntry(e)
	}
	b, _ := json.Marshal(w)
	return string(b)
}

// A report as a version-1 probe pod wrote it (before the upgrade) still reads.
func TestDecodeReportReadsAVersion1Report(t *testing.T) {
	msg := `{"v":1,"end":1777636800,"results":{"healthy":3,"throttled":1},"ops":{"unchanged":3},"ns":{"shoot--a--b":["healthy",4],"shoot--c--d":["throttled",1,2],"shoot--e--f":["not-probed"]},"omitted":2}`
	got, err := DecodeReport(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := Report{End: time.Unix(1777636800, 0), Omitted: 2,
		Results: map[string]int{"healthy": 3, "throttled": 1}, Ops: map[string]int{"unchanged": 3},
		Namespaces: map[string]NamespaceResult{
			"shoot--a--b": {Last: ResultHealthy, Ago: 4 * time.Second},
			"shoot--c--d": {Last: ResultThrottled, Ago: time.Second, Throttled: 2},
			"shoot--e--f": {Last: ResultNotProbed},
		}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// gardenerNames are n distinct control-plane namespace names as Gardener makes them,
// shoot--<project, 4-9 characters>--<shoot, 6-15 characters>, random from seed.
func gardenerNames(seed uint64, n int) []string {
	rnd := rand.New(rand.NewPCG(seed, seed))
	word := func(min, max int) string {
		const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
		b := make([]byte, min+rnd.IntN(max-min+1))
		for i := range b {
			b[i] = chars[rnd.IntN(len(chars))]
		}
		b[0] = chars[rnd.IntN(26)]
		return string(b)
	}
	seen := map[string]bool{}
	var names []string
	for len(names) < n {
		name := "shoot--" + word(4, 9) + "--" + word(6, 15)
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return names
}

// A shard at the coordinator's maximum of 200 namespaces (prober.MaxNamespacesPerProbeJob),
// all healthy (the steady state), reports every namespace, none left out, even with names
// as random as Gardener allows and every shoot in a project of its own (the worst case for
// compression: real names share words and projects).
func TestReportOfAFullShardOfGardenerNamespacesFitsWhole(t *testing.T) {
	const fullShard = 200
	for seed := range uint64(50) {
		rnd := rand.New(rand.NewPCG(seed, 1))
		r := Report{End: time.Now(), Results: map[string]int{"healthy": 3000}, Ops: map[string]int{"unchanged": 9000},
			Namespaces: map[string]NamespaceResult{}}
		for _, ns := range gardenerNames(seed, fullShard) {
			r.Namespaces[ns] = NamespaceResult{Last: ResultHealthy, Ago: time.Duration(rnd.IntN(11)) * time.Second}
		}
		msg := EncodeReport(r)
		got, err := DecodeReport(msg)
		if err != nil {
			t.Fatal(err)
		}
		if got.Omitted != 0 || len(got.Namespaces) != fullShard || len(msg) > termmsg.MaxBytes {
			t.Errorf("seed %d: %d bytes, omitted %d, kept %d; want all %d within %d bytes", seed, len(msg), got.Omitted, len(got.Namespaces), fullShard, termmsg.MaxBytes)
		}
	}
}

// A report always fits the kubelet's 4 KiB termination message: when even compressed it does
// not, entries that need no follow-up are left out first, and counted.
func TestReportTooLongEvenCompressedDropsTheLeastNeededFirst(t *testing.T) {
	r := Report{End: time.Now(), Results: map[string]int{"healthy": 1000}, Namespaces: map[string]NamespaceResult{}}
	names := gardenerNames(7, 1000)
	for _, ns := range names {
		r.Namespaces[ns] = NamespaceResult{Last: ResultHealthy, Ago: 3 * time.Second}
	}
	needed := map[string]NamespaceResult{}
	for i, ns := range names[:30] {
		needed[ns] = NamespaceResult{Last: ResultThrottled, Ago: time.Second, Throttled: 1 + i%4}
		if i%2 == 0 {
			needed[ns] = NamespaceResult{Last: ResultScaleDown, Ago: 2 * time.Second}
		}
		r.Namespaces[ns] = needed[ns]
	}
	msg := EncodeReport(r)
	if len(msg) > termmsg.MaxBytes {
		t.Fatalf("report is %d bytes, more than %d", len(msg), termmsg.MaxBytes)
	}
	got, err := DecodeReport(msg)
	if err != nil {
		t.Fatal(err)
	}
	if got.Omitted == 0 || got.Omitted+len(got.Namespaces) != len(names) {
		t.Errorf("omitted %d, kept %d, want them to add up to %d with some omitted", got.Omitted, len(got.Namespaces), len(names))
	}
	for ns, e := range needed {
		if got.Namespaces[ns] != e {
			t.Errorf("%s (it carries a back-off or a decision) was dropped or changed: %+v, want %+v", ns, got.Namespaces[ns], e)
		}
	}
	if len(got.Namespaces) <= len(needed) {
		t.Errorf("kept %d entries: no healthy one, though the compressed form has room for hundreds", len(got.Namespaces))
	}
}

// compressed is termmsg.Compressed and Ascii85 of gzip of s, as a probe pod of before the one
// format wrote its report, or a hostile or broken pod could.
func compressed(s string) string {
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	out := make([]byte, ascii85.MaxEncodedLen(z.Len()))
	return termmsg.Compressed + string(out[:ascii85.Encode(out, z.Bytes())])
}

// A compressed report that inflates far past any shard's (a gzip bomb) is refused, not read
// into memory.
func TestDecodeReportRefusesAGzipBomb(t *testing.T) {
	bomb := compressed(`{"v":2,"end":1,"ns":{}` + strings.Repeat(" ", 4<<20) + `}`)
	if len(bomb) > termmsg.MaxBytes {
		t.Fatalf("the bomb is %d bytes: it would not pass the kubelet", len(bomb))
	}
	if _, err := DecodeReport(bomb); !errors.Is(err, ErrNotAReport) || !strings.Contains(err.Error(), "more than") {
		t.Errorf("DecodeReport(bomb) = %v, want ErrNotAReport for its size", err)
	}
}

func TestDecodeReportRefusesWhatIsNotAReport(t *testing.T) {
	for _, msg := range []string{
		"",
		"invalid probe configuration:\nNAMESPACE: required",
		"namespace=a probes=1 last=healthy resources: scaled-down=0",
		`{"v":1,"end":1}`,
		`{"v":1,"end":1,"ns":{"a":"healthy"}}`,
		`{"v":1,"end":1,"ns":{"a":["healthy",-1]}}`,
		`{"v":1,"end":1,"ns":{"a":[]}}`,
		`{"v":1,"end":1,"results":{"healthy":-1},"ns":{}}`,
		`{"v":1,"end":1,"ns":{"a":["healthy",1` + strings.Repeat("0", 30) + `]}}`,
		compressed(`{"v":3,"end":1,"ns":{}}`),       // a newer probe's
		compressed(`{"v":2,"end":1,"ns":{"a":[]}}`), // a bad entry
		compressed(`not json`),
		termmsg.Compressed + "not Ascii85: \x00 ~~~",
		"report: " + termmsg.Compressed + "87cURD]i,\"Ebo80", // Ascii85 of "Hello World", not gzip
		compressed(`{"v":2,"end":1,"ns":{}}`)[:20],           // cut short
		"Probe run of 1 namespace(s): probes healthy=1.\nreport: " + `{"v":3,"end":1,"ns":{}}`,
	} {
		if _, err := DecodeReport(msg); !errors.Is(err, ErrNotAReport) {
			t.Errorf("DecodeReport(%q) = %v, want ErrNotAReport", msg, err)
		}
	}
}

// The summary line a person reads names the run's namespaces, its probes' results and its
// scale operations, zero counts left out.
func TestReportSummaryLine(t *testing.T) {
	for _, tc := range []struct {
		r    Report
		want string
	}{
		{Report{Results: map[string]int{"healthy": 3, "throttled": 0}, Ops: map[string]int{"unchanged": 0},
			Namespaces: map[string]NamespaceResult{"a": {}, "b": {}}, Omitted: 1},
			"Probe run of 3 namespace(s): probes healthy=3."},
		{Report{DryRun: true, Results: map[string]int{"scale-down": 1, "healthy": 2}, Ops: map[string]int{"would-scale-down": 3},
			Namespaces: map[string]NamespaceResult{"a": {}}},
			"Probe run of 1 namespace(s) (dry run): probes healthy=2, scale-down=1; scale operations would-scale-down=3."},
		{Report{}, "Probe run of 0 namespace(s): probes none."},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
		if got := strings.SplitN(EncodeReport(tc.r), "\n", 2)[0]; got != tc.want {
			t.Errorf("the message's first line %q, want the summary %q", got, tc.want)
		}
	}
}

// The summary line counts a refused write among the failures, and already-down and
// already-up as unchanged.
func TestSummaryLine(t *testing.T) {
	s := Summary{Namespace: "ns", Probes: 2, Last: ResultScaleDown, LastReason: "x", Results: map[Result]int{ResultScaleDown: 2},
		Outcomes: map[Outcome]int{OutcomeScaledDown: 3, OutcomeAlreadyUp: 1, OutcomeAlreadyDown: 1, OutcomeFailed: 1, OutcomeAdmissionRefused: 1}}
	want := "namespace=ns probes=2 last=scale-down (x) results: scale-down=2; resources: scaled-down=3 scaled-up=0 annotations-removed=0 unchanged=2 ignored=0 optional-missing=0 missing=0 failed=2 not-started=0 interrupted=0 blocked=0"
	if got := s.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if ops := s.Ops(); ops["failed"] != 1 || ops["admission-refused"] != 1 || ops["unchanged"] != 2 {
		t.Errorf("ops = %v", ops)
	}
}
