package termmsg

import (
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
