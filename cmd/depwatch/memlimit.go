package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitShare is the part of the container's memory limit the Go runtime is asked to stay
// under. The rest is for what the runtime does not count: the binary's own pages (about
// 21 MiB of a fresh process's 25 MiB RSS are mapped from the binary, reclaimable by the
// kernel but refaulted when touched) and memory outside the Go heap.
const memoryLimitShare = 0.8

// cgroupMemoryLimitFiles are where a container reads its own memory limit: cgroup v2, then
// cgroup v1.
var cgroupMemoryLimitFiles = []string{
	"/sys/fs/cgroup/memory.max",
	"/sys/fs/cgroup/memory/memory.limit_in_bytes",
}

// setSoftMemoryLimit gives the Go runtime a soft memory limit below the container's, so the
// garbage collector runs harder as the heap nears it instead of the kernel killing the
// process: pod-reaper's chart limits its pod to 30Mi, and the Go runtime does not read that
// limit itself. GOMEMLIMIT, when set (even to "off"), wins: the runtime has applied it.
func setSoftMemoryLimit() {
	if limit, ok := softMemoryLimit(os.LookupEnv, os.ReadFile); ok {
		debug.SetMemoryLimit(limit)
	}
}

// softMemoryLimit decides the limit: none when GOMEMLIMIT is set or no container limit is
// found, else memoryLimitShare of the first limit found.
func softMemoryLimit(lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (int64, bool) {
	if _, set := lookup("GOMEMLIMIT"); set {
		return 0, false
	}
	for _, f := range cgroupMemoryLimitFiles {
		b, err := readFile(f)
		if err != nil {
			continue
		}
		if limit, ok := parseCgroupMemoryLimit(string(b)); ok {
			return int64(float64(limit) * memoryLimitShare), true
		}
		return 0, false // the container's cgroup says: no limit
	}
	return 0, false
}

// noCgroupLimit is at or above what cgroup v1 writes for "no limit" (the largest int64 rounded
// down to a page); no real container limit comes near it.
const noCgroupLimit = 1 << 62

// parseCgroupMemoryLimit reads a memory limit file: a number of bytes, or "max" (cgroup v2's
// "no limit").
func parseCgroupMemoryLimit(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n >= noCgroupLimit {
		return 0, false
	}
	return n, true
}
