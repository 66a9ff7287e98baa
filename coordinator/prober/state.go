package prober

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
)

// probeState is what the prober knows that no API object holds. Everything else it reads
// from its informers' caches when it needs it.
type probeState struct {
	mu sync.Mutex
	// next: per probed namespace, when its next first probe is due: initialDelay after the
	// coordinator first saw it probe-able (a time of this replica's own observation), pushed
	// out by a throttling back-off. Being a key here is what "probed" means.
	next map[string]time.Time
	// paused: the selected namespaces that are not probed (for the metric).
	paused sets.Set[string]
	// throttled: per namespace, its throttled probes in a row, across Jobs (from reports).
	throttled map[string]int
	// shootNotes: per namespace, the shoot settings last logged (logged again on change).
	shootNotes map[string]string
	// reportedProbe: per namespace, the newest probe any report named, probed by this replica
	// yet or not: a replica that starts (a config change restarts it) reads the reports of
	// the pods that ended before it before it knows which namespaces it probes, and a
	// namespace whose probes fail from then on must still have a last-probe series to alert on.
	reportedProbe map[string]time.Time
	// shardNext: per shard, no Job is launched before this (one interval after the last).
	shardNext map[int]time.Time
	// stuck: per shard, why its active Job has no running pod (reported once per change).
	stuck map[int]string
	// shards is the shard count last seen (a change moves namespaces between shards).
	shards int
	// starting: the namespaces listed when this replica began to lead that it has not
	// decided about yet. Until none is left, the members it knows are only part of the truth,
	// so it does not change the membership of a shard whose Job is running (a new leader
	// would otherwise take namespaces away from the Jobs the previous one launched).
	starting map[string]bool
	settled  bool
}
