package termmsg

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestFitLeavesOutTheFewestPartsThatMakeItFit: the search finds the least count, and one that
// fits where fitting is not steady.
func TestFitLeavesOutTheFewestPartsThatMakeItFit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		total int
		fits  func(int) bool
		want  int
	}{
		{"everything fits", 10, func(int) bool { return true }, 0},
		{"from 7 on", 10, func(k int) bool { return k >= 7 }, 7},
		{"only all left out", 10, func(k int) bool { return k == 10 }, 10},
		{"nothing fits: all left out", 10, func(int) bool { return false }, 10},
		{"not steady (4 fits, 5 not, 6 on): one that fits", 10, func(k int) bool { return k != 5 && k >= 4 }, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tooLong := strings.Repeat("x", MaxBytes+1)
			msg := Fit(tc.total, func(k int) string {
				if !tc.fits(k) {
					return tooLong + strconv.Itoa(k)
				}
				return strconv.Itoa(k)
			})
			got, err := strconv.Atoi(strings.TrimLeft(msg, "x"))
			if err != nil || got != tc.want {
				t.Errorf("Fit left %q out, want %d", strings.TrimLeft(msg, "x"), tc.want)
			}
		})
	}
}

// TestFitEncodesAMessageThatFitsWholeOnce: the common case (a report that fits) costs one
// encoding, not a search (the probe's is a gzip of a shard's JSON).
func TestFitEncodesAMessageThatFitsWholeOnce(t *testing.T) {
	calls := 0
	if msg := Fit(200, func(k int) string { calls++; return strconv.Itoa(k) }); msg != "0" || calls != 1 {
		t.Errorf("Fit = %q after %d encodings, want \"0\" after 1", msg, calls)
	}
}

// TestReadReportIsMessagesInverse: what Message writes, plain or compressed, ReadReport reads
// back, and so the whole-message reports of probe pods of before the one format; a message
// with no report says so.
func TestReadReportIsMessagesInverse(t *testing.T) {
	type report struct {
		Names []string `json:"names"`
	}
	small := report{Names: []string{"a", "b"}}
	big := report{}
	for i := range 600 {
		big.Names = append(big.Names, "shoot--project--cluster-"+strconv.Itoa(i))
	}
	for _, tc := range []struct {
		name       string
		msg        string
		want       report
		compressed bool
	}{
		{"plain", Message("Reaped 2 pods.", small), small, false},
		{"compressed: plain would not fit", Message("Probe run of 600 namespace(s).", big), big, true},
		{"a whole-message report, as probe pods wrote before", `{"names":["a","b"]}`, small, false},
		{"a whole-message compressed report, as probe pods wrote before", strings.TrimPrefix(Message("", big), "\n"+reportLine), big, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.msg) > MaxBytes {
				t.Fatalf("%d bytes: more than the kubelet keeps", len(tc.msg))
			}
			if got := strings.Contains(tc.msg, Compressed); got != tc.compressed {
				t.Errorf("compressed %v, want %v: %q", got, tc.compressed, tc.msg)
			}
			var got report
			if err := ReadReport(tc.msg, &got); err != nil {
				t.Fatal(err)
			}
			if strings.Join(got.Names, ",") != strings.Join(tc.want.Names, ",") {
				t.Errorf("read %v, want %v", got.Names, tc.want.Names)
			}
		})
	}
	for _, msg := range []string{"", "invalid configuration:\n  - RUN_DURATION: must be positive", "Reaped 2 pods."} {
		if err := ReadReport(msg, &report{}); !errors.Is(err, ErrNoReport) {
			t.Errorf("ReadReport(%q) = %v, want ErrNoReport", msg, err)
		}
	}
}
