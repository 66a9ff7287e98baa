package prober

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/record"

	"github.com/depwatch/depwatch/jobs"
)

func TestShardCount(t *testing.T) {
	for _, tc := range []struct{ n, per, want int }{
		{0, 50, 0}, {1, 50, 1}, {50, 50, 1}, {51, 50, 2}, {250, 50, 5}, {1000, 50, 20}, {7, 0, 1},
	} {
		if got := ShardCount(tc.n, tc.per); got != tc.want {
			t.Errorf("ShardCount(%d, %d) = %d, want %d", tc.n, tc.per, got, tc.want)
		}
	}
}

// Rendezvous hashing: shards are about even, and going from k to k+1 shards moves only the
// namespaces that land on the new shard (about 1/(k+1)), never one between two old shards.
func TestShardOfIsBalancedAndMovesFewNamespaces(t *testing.T) {
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("shoot--project-%d--cluster-%d", i%37, i)
	}
	for _, k := range []int{1, 5, 19} {
		sizes := make([]int, k+1)
		moved := 0
		for _, ns := range names {
			before, after := ShardOf(ns, k), ShardOf(ns, k+1)
			if ShardOf(ns, k) != before {
				t.Fatalf("ShardOf(%q, %d) is not deterministic", ns, k)
			}
			if before != after {
				moved++
				if after != k {
					t.Errorf("%s moved from shard %d to old shard %d when shard %d was added", ns, before, after, k)
				}
			}
			sizes[after]++
		}
		if want := len(names) / (k + 1); moved > want*3/2 {
			t.Errorf("%d → %d shards moved %d namespaces, want about %d", k, k+1, moved, want)
		}
		for i, n := range sizes {
			if even := len(names) / (k + 1); n < even/2 || n > even*3/2 {
				t.Errorf("%d shards: shard %d has %d namespaces, far from %d", k+1, i, n, even)
			}
		}
	}
}

func TestDecideShard(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		in   ShardInput
		want ShardAction
	}{
		{"no members", ShardInput{Now: now}, ShardIdle},
		{"its Job still runs", ShardInput{Members: 3, Due: 3, DueNow: true, Active: true, Now: now}, ShardKeep},
		{"launched less than an interval ago", ShardInput{Members: 3, Due: 3, DueNow: true, NextAt: now.Add(time.Second), Now: now}, ShardWait},
		{"no member due yet", ShardInput{Members: 3, EarliestDue: now.Add(time.Minute), Now: now}, ShardWait},
		{"members due within the run, none now: wait for the first", ShardInput{Members: 3, Due: 3, EarliestDue: now.Add(20 * time.Second), Now: now}, ShardWait},
		{"due", ShardInput{Members: 3, Due: 1, DueNow: true, NextAt: now, Now: now}, ShardLaunch},
	} {
		if got, why := DecideShard(tc.in); got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got, why, tc.want)
		}
	}
}

func TestShardKeysAndTargetsReadBack(t *testing.T) {
	for _, i := range []int{0, 7, 19} {
		if got, ok := parseShardKey(shardKey(i)); !ok || got != i {
			t.Errorf("shard key %q read back as %d %v", shardKey(i), got, ok)
		}
		if got, ok := shardOfTarget(ShardName(i, "a=b")); !ok || got != i {
			t.Errorf("shard target %q read back as %d %v", ShardName(i, "a=b"), got, ok)
		}
	}
	if ShardName(0, "a=b") == ShardName(0, "a=c") {
		t.Error("two selectors' shards share a name")
	}
	if _, ok := parseShardKey("shoot--a"); ok {
		t.Error("a namespace read as a shard key")
	}
}

// Several namespaces of one shard share one Job, which names them all; with one probe per Job
// (probeJobRunDuration 0s: nothing to follow), one added while that Job runs is probed by the
// shard's next Job, not by a second one at the same time.
func TestOneProbeJobCoversTheShardAndANewNamespaceJoinsTheNext(t *testing.T) {
	h := newProbeHarness(t)
	shoot := map[string]string{"gardener.cloud/role": "shoot"}
	for _, ns := range []string{"shoot--p--a", "shoot--p--b", "shoot--p--c"} {
		h.namespace(ns, shoot)
		h.reconcile(ns)
	}
	h.now = h.now.Add(30 * time.Second)
	h.reconcile("shoot--p--a")
	h.reconcile("shoot--p--b")
	list := h.jobs()
	if len(list) != 1 {
		t.Fatalf("%d Jobs for three namespaces of one shard, want 1", len(list))
	}
	j := list[0]
	if got := probeJobEnv(j)["NAMESPACES"]; got != "shoot--p--a,shoot--p--b,shoot--p--c" {
		t.Errorf("NAMESPACES = %q", got)
	}
	for _, ns := range []string{"shoot--p--a", "shoot--p--b", "shoot--p--c"} {
		if j.Labels["probe.depwatch.io/"+ns] != "true" {
			t.Errorf("the Job has no label for %s: %v", ns, j.Labels)
		}
	}
	h.namespace("shoot--p--d", shoot)
	h.reconcile("shoot--p--d")
	h.now = h.now.Add(40 * time.Second)
	h.reconcile("shoot--p--d")
	if n := len(h.jobs()); n != 1 {
		t.Fatalf("%d Jobs while the shard's Job runs, want still 1", n)
	}
	h.finish(j.Name, batchv1.JobComplete, h.now)
	h.reconcile("shoot--p--d")
	list = h.jobs()
	if len(list) != 2 {
		t.Fatalf("%d Jobs after the first finished, want 2", len(list))
	}
	for _, nj := range list {
		if nj.Name != j.Name && !strings.Contains(probeJobEnv(nj)["NAMESPACES"], "shoot--p--d") {
			t.Errorf("the next Job does not probe the namespace added meanwhile: %q", probeJobEnv(nj)["NAMESPACES"])
		}
	}
}

// A shard whose Job cannot start (its pod stays Pending) is visible: a Warning Event on the
// Job, the stuck metric, and a line in /readyz's detail.
func TestAShardWhoseJobCannotStartIsVisible(t *testing.T) {
	h := newProbeHarness(t)
	rec := record.NewFakeRecorder(10)
	h.rec, h.c.recorder = rec, rec
	h.namespace("shoot--p--a", map[string]string{"gardener.cloud/role": "shoot"})
	h.reconcile("shoot--p--a")
	h.now = h.now.Add(30 * time.Second)
	h.reconcile("shoot--p--a")
	list := h.jobs()
	if len(list) != 1 {
		t.Fatalf("%d Jobs", len(list))
	}
	// Its pod stays Pending (the Job executor reads why from its pods: jobs' own test).
	why := "pod " + list[0].Name + "-x Pending (Unschedulable: 0/1 nodes are available)"
	h.c.notStarted = func(jobs.Run) string { return why }
	// The fake API leaves creationTimestamp empty: the Job is as old as it gets.
	h.now = h.now.Add(2 * time.Minute)
	h.reconcile(shardKey(0))
	if got := h.c.StuckShards(); len(got) != 1 || !strings.Contains(got[0], "Unschedulable") {
		t.Errorf("stuck shards %q, want one naming Unschedulable", got)
	}
	select {
	case ev := <-rec.Events:
		if !strings.Contains(ev, "ProbeShardNotRunning") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no Event on the Job")
	}
	why = "" // its pod runs
	h.reconcile(shardKey(0))
	if got := h.c.StuckShards(); len(got) != 0 {
		t.Errorf("stuck shards %q once its pod runs", got)
	}
}

func TestShardInputOfCountsWhoIsDueNowAndWithinTheRun(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	nb := map[string]time.Time{"past": now.Add(-time.Minute), "soon": now.Add(20 * time.Second), "later": now.Add(10 * time.Minute)}
	for _, tc := range []struct {
		name        string
		members     []string
		run         time.Duration
		due         []string
		dueNow      bool
		earliestDue time.Time
	}{
		{"one due now, one within the run, one after it", []string{"later", "past", "soon"}, 2 * time.Minute, []string{"past", "soon"}, true, now.Add(20 * time.Second)},
		{"one probe per Job: only those due now", []string{"past", "soon"}, 0, []string{"past"}, true, now.Add(20 * time.Second)},
		{"none due now", []string{"soon", "later"}, 2 * time.Minute, []string{"soon"}, false, now.Add(20 * time.Second)},
		{"no members", nil, 2 * time.Minute, nil, false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, due := ShardInputOf(tc.members, nb, false, now, tc.run, now)
			if !slices.Equal(due, tc.due) || in.DueNow != tc.dueNow || !in.EarliestDue.Equal(tc.earliestDue) || in.Members != len(tc.members) || in.Due != len(tc.due) {
				t.Errorf("got %+v due %v", in, due)
			}
		})
	}
}
