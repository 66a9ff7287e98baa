package prober

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// Shards: one probe Job covers a shard of the probed namespaces, so a seed of 250 control
// planes needs 5 probe pods, not 250 (or 250 Jobs per interval).

// shardKeyPrefix marks a shard's key in the prober's queue ("shard:3"); a namespace name
// cannot contain ':', so the two kinds of key never collide.
const shardKeyPrefix = "shard:"

// ShardCount is how many shards n probed namespaces need at perJob namespaces per Job:
// n / perJob rounded up, at least 1 while any namespace is probed.
func ShardCount(n, perJob int) int {
	if n <= 0 {
		return 0
	}
	if perJob <= 0 {
		perJob = DefaultNamespacesPerProbeJob
	}
	return (n + perJob - 1) / perJob
}

// ShardOf assigns namespace ns to one of count shards by rendezvous (highest random weight)
// hashing: each namespace goes to the shard with the highest hash of (namespace, shard). The
// assignment depends only on the name and the count, so it is stable across restarts and
// leaders; when the count grows from k to k+1 only the namespaces whose new highest weight is
// the new shard move (about 1/(k+1) of them), and adding or removing a namespace moves no
// other one unless the count changes.
func ShardOf(ns string, count int) int {
	best, bestW := 0, uint64(0)
	for i := range count {
		h := fnv.New64a()
		_, _ = h.Write([]byte(ns))
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(i))
		_, _ = h.Write(b[:])
		w := mix64(h.Sum64())
		if i == 0 || w > bestW {
			best, bestW = i, w
		}
	}
	return best
}

// mix64 spreads FNV's weak low bits (a finaliser of SplitMix64), so weights compare fairly.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ShardName is the target of shard i's probe Jobs (their depwatch.io/namespace label and
// name prefix): "shard-<i>-<6 hex digits of the namespace selector>". The selector's hash
// keeps the shards of two coordinators that share a Job namespace but probe different
// namespaces (a migration, a test) apart: each would otherwise take the other's running Job
// for its own shard's.
func ShardName(i int, selector string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(selector))
	return fmt.Sprintf("%s%d-%06x", shardNamePrefix, i, h.Sum32()&0xffffff)
}

// shardNamePrefix starts every ShardName; shardOfTarget reads the number after it.
const shardNamePrefix = "shard-"

func shardKey(i int) string { return shardKeyPrefix + strconv.Itoa(i) }

// parseShardKey reads a queue key made by shardKey; shardOfTarget a shard Job's target
// (ShardName).
func parseShardKey(key string) (int, bool)    { return shardIndex(key, shardKeyPrefix) }
func shardOfTarget(target string) (int, bool) { return shardIndex(target, shardNamePrefix) }

// shardIndex reads the shard's number between prefix and the next "-", if any.
func shardIndex(s, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(s, prefix)
	num, _, _ := strings.Cut(rest, "-")
	i, err := strconv.Atoi(num)
	return i, ok && err == nil && i >= 0
}

// ShardInput is everything the decision for one shard depends on.
type ShardInput struct {
	// Members: the shard's probed namespaces not covered by another shard's active Job.
	Members int
	// Due: members whose first probe falls within the next Job's run (notBefore ≤ now +
	// run duration): the next Job probes them. DueNow: a member's first probe is due now (a
	// Job is launched only then, so namespaces seen together at start-up, or added together,
	// share their first Job instead of the first of them taking it alone for a whole run).
	// EarliestDue is the earliest notBefore of the members not due now.
	Due         int
	DueNow      bool
	EarliestDue time.Time
	// Active: a probe Job of the shard has not finished.
	Active bool
	// NextAt: the shard's next Job is not launched before this (zero: never launched).
	NextAt time.Time
	Now    time.Time
}

// ShardInputOf is the shard's ShardInput from its members (those no other shard's Job
// probes) and their notBefore, and the members due within the next Job's run.
func ShardInputOf(members []string, notBefore map[string]time.Time, active bool, nextAt time.Time, run time.Duration, now time.Time) (ShardInput, []string) {
	in := ShardInput{Members: len(members), Active: active, NextAt: nextAt, Now: now}
	var due []string
	for _, ns := range members {
		at := notBefore[ns]
		if !at.After(now.Add(run)) {
			due = append(due, ns)
		}
		if !at.After(now) {
			in.DueNow = true
		} else if in.EarliestDue.IsZero() || at.Before(in.EarliestDue) {
			in.EarliestDue = at
		}
	}
	in.Due = len(due)
	return in, due
}

// ShardAction is what the coordinator does for one shard now.
type ShardAction string

const (
	ShardIdle   ShardAction = "idle"   // no members: nothing to launch
	ShardKeep   ShardAction = "keep"   // its Job is still running: the next one follows when it ends
	ShardWait   ShardAction = "wait"   // not due yet: requeue at NextAt or when the first member is due
	ShardLaunch ShardAction = "launch" // launch the shard's Job for its due members
)

// DecideShard is the whole scheduling rule of a shard: at most one Job at a time; the next
// one no earlier than one (jittered) interval after the last launch, and only when a member
// is due within its run.
func DecideShard(in ShardInput) (ShardAction, string) {
	switch {
	case in.Members == 0:
		return ShardIdle, "no namespace in this shard"
	case in.Active:
		return ShardKeep, "the shard's probe Job is still running"
	case in.Now.Before(in.NextAt):
		return ShardWait, "one interval has not passed since the last launch"
	case in.Due == 0 || !in.DueNow:
		return ShardWait, "no member's first probe is due yet (initial delay or back-off)"
	}
	return ShardLaunch, "due"
}
