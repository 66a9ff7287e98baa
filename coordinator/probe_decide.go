package coordinator

import (
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ClusterGVR is Gardener's extensions Cluster resource: cluster-scoped, named after the
// shoot's control-plane namespace, with the Shoot embedded in spec.shoot. depwatch reads it
// unstructured (no Gardener Go dependency).
var ClusterGVR = schema.GroupVersionResource{Group: "extensions.gardener.cloud", Version: "v1alpha1", Resource: "clusters"}

// ShouldProbe says whether a control plane whose Gardener Cluster resource is cluster should
// be probed, and why not. nil (no Cluster resource, or Gardener's Cluster kind is not
// installed) is probed. Not probed: the Cluster or its shoot is being deleted, the shoot is
// hibernated or hibernating (spec.hibernation.enabled, or status.isHibernated while it wakes
// up), it is being migrated (lastOperation.type Migrate), or it has no workers (then there
// are no node leases to judge by). Each reason ends when the field changes, and probing
// starts again.
func ShouldProbe(cluster *unstructured.Unstructured) (bool, string) {
	if cluster == nil {
		return true, "no Gardener Cluster resource"
	}
	if cluster.GetDeletionTimestamp() != nil {
		return false, "the Cluster resource is being deleted"
	}
	obj := cluster.Object
	if ts, found, _ := unstructured.NestedString(obj, "spec", "shoot", "metadata", "deletionTimestamp"); found && ts != "" {
		return false, "the shoot is being deleted"
	}
	if enabled, found, _ := unstructured.NestedBool(obj, "spec", "shoot", "spec", "hibernation", "enabled"); found && enabled {
		return false, "the shoot is hibernated or hibernating (spec.hibernation.enabled)"
	}
	if hibernated, found, _ := unstructured.NestedBool(obj, "spec", "shoot", "status", "isHibernated"); found && hibernated {
		return false, "the shoot is hibernated (status.isHibernated)"
	}
	if typ, found, _ := unstructured.NestedString(obj, "spec", "shoot", "status", "lastOperation", "type"); found && typ == "Migrate" {
		return false, "the shoot is being migrated (lastOperation.type Migrate)"
	}
	workers, found, _ := unstructured.NestedSlice(obj, "spec", "shoot", "spec", "provider", "workers")
	if !found || len(workers) == 0 {
		return false, "the shoot has no workers"
	}
	return true, "the shoot is active"
}

// ProbeInput is everything the decision for one namespace depends on.
type ProbeInput struct {
	// Watched: the namespace exists, matches the prober's selector and is not terminating.
	Watched bool
	// ClusterPending: Gardener's Cluster kind exists but its cache has not synced yet.
	ClusterPending bool
	Cluster        *unstructured.Unstructured
	// Active: a probe Job of the namespace has not finished.
	Active bool
	// NextAt: when the next probe is due; zero: the namespace is seen for the first time.
	NextAt time.Time
	Now    time.Time
}

// ProbeAction is what the coordinator does for one namespace now.
type ProbeAction string

const (
	ProbeForget   ProbeAction = "forget"   // not probed (any more): forget its schedule
	ProbeFirst    ProbeAction = "first"    // first sighting: the first probe after initialDelay
	ProbeWait     ProbeAction = "wait"     // not due yet: requeue at NextAt
	ProbeKeep     ProbeAction = "keep"     // due, but the last probe Job is still active: skip this turn
	ProbeLaunch   ProbeAction = "launch"   // due: launch a probe Job
	ProbeDeferred ProbeAction = "deferred" // cannot tell yet (Cluster cache not synced): look again soon
)

// DecideProbe is the whole scheduling rule of the prober.
func DecideProbe(in ProbeInput) (ProbeAction, string) {
	if !in.Watched {
		return ProbeForget, "namespace not selected (or gone, or terminating)"
	}
	if in.ClusterPending {
		return ProbeDeferred, "waiting for the Gardener Cluster cache"
	}
	if ok, why := ShouldProbe(in.Cluster); !ok {
		return ProbeForget, why
	}
	switch {
	case in.NextAt.IsZero():
		return ProbeFirst, "first seen"
	case in.Now.Before(in.NextAt):
		return ProbeWait, "not due"
	case in.Active:
		return ProbeKeep, "the previous probe Job is still active"
	}
	return ProbeLaunch, "due"
}

// Jittered is interval x (1 ± factor x r), r uniform in [0,1): successive probes of many
// namespaces spread out instead of firing together.
func Jittered(interval time.Duration, factor float64) time.Duration {
	if factor <= 0 {
		return interval
	}
	d := time.Duration(float64(interval) * (1 + factor*(2*rand.Float64()-1)))
	return max(d, time.Millisecond)
}

// ProbeSummary is what a finished probe Job reported in its termination message (the
// container's /dev/termination-log: probe.Summary.String()).
type ProbeSummary struct {
	Probes int
	Last   string
	// Results counts the run's probes by result (healthy, scale-down, scale-up, skipped,
	// api-unreachable, error).
	Results map[string]int
	// Resources counts the scale operations by outcome (scaled-down, scaled-up,
	// annotations-removed, unchanged, ignored, optional-missing, missing, failed, ...;
	// would-scale-* in a dry run). Zero counts are left out.
	Resources map[string]int
}

var summaryPair = regexp.MustCompile(`([a-z][a-z-]*)=(\d+)`)

// ParseProbeSummary reads a probe Job's termination message. ok is false when it is not a
// probe summary (e.g. the run refused its configuration, or was killed before writing it).
func ParseProbeSummary(msg string) (ProbeSummary, bool) {
	msg = strings.TrimSpace(msg)
	msg = strings.TrimPrefix(msg, "dry run, nothing changed: ")
	if !strings.HasPrefix(msg, "namespace=") {
		return ProbeSummary{}, false
	}
	s := ProbeSummary{Results: map[string]int{}, Resources: map[string]int{}}
	fields := strings.Fields(msg)
	if len(fields) < 3 {
		return ProbeSummary{}, false
	}
	for _, f := range fields[1:3] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "probes":
			s.Probes, _ = strconv.Atoi(v)
		case "last":
			s.Last = v
		}
	}
	ri := strings.LastIndex(msg, " resources: ")
	if ri < 0 || s.Last == "" {
		return ProbeSummary{}, false
	}
	if qi := strings.LastIndex(msg[:ri], " results: "); qi >= 0 {
		for _, m := range summaryPair.FindAllStringSubmatch(strings.TrimSuffix(msg[qi+len(" results: "):ri], ";"), -1) {
			if n, _ := strconv.Atoi(m[2]); n > 0 {
				s.Results[m[1]] = n
			}
		}
	}
	for _, m := range summaryPair.FindAllStringSubmatch(msg[ri+len(" resources: "):], -1) {
		if n, _ := strconv.Atoi(m[2]); n > 0 {
			s.Resources[m[1]] = n
		}
	}
	return s, true
}
