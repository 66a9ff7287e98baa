// Package termmsg fits a run's report into its container's termination message, the one
// place a Job's pod hands the coordinator what it did: the weeder's (package reaper) and the
// probe's (package probe) alike.
package termmsg

import "sort"

// MaxBytes is what the kubelet keeps of a container's termination message (4 KiB): a report
// written there must fit, or its reader would get a truncated, unreadable one.
const MaxBytes = 4096

// Fit is encode(k) for the fewest k in [0, total] parts left out (the least needed first, as
// the caller orders them) that is at most MaxBytes long; encode(total) when none is. It
// assumes a message shrinks, near enough, as parts are left out: it searches for that k, then
// makes sure of it, trying later ones in turn. A message that fits whole is encoded once.
func Fit(total int, encode func(leftOut int) string) string {
	if m := encode(0); len(m) <= MaxBytes {
		return m
	}
	for k := sort.Search(total, func(k int) bool { return len(encode(k)) <= MaxBytes }); k < total; k++ {
		if m := encode(k); len(m) <= MaxBytes {
			return m
		}
	}
	return encode(total)
}
