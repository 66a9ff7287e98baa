package prober

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/probe"
)

// ShouldProbe says whether a control plane whose Gardener Cluster resource is cluster should
// be probed, and why not. nil (no Cluster resource, or Gardener's Cluster kind is not
// installed) is probed. Not probed, as dependency-watchdog decides (controllers/cluster's
// shouldStopProber and canStartProber): the Cluster or its shoot is being deleted, the shoot
// is hibernated or hibernating (spec.hibernation.enabled), being migrated (lastOperation.type
// Migrate), has no workers (then there are no node leases to judge by), is waking up from
// hibernation (status.hibernated still true while spec.hibernation.enabled is not: its
// nodes are still being created, and MCM, CA and KCM must come up undisturbed), or its
// control plane is not settled yet: it is probed only once the last operation is a Reconcile
// (in any state), or a Create or Restore that has Succeeded. While a shoot is created or
// restored its nodes are still joining and their leases say nothing about the API server.
// Each reason ends when the field changes, and probing starts again.
func ShouldProbe(cluster *unstructured.Unstructured) (bool, string) {
	if cluster == nil {
		return true, "no Gardener Cluster resource"
	}
	if cluster.GetDeletionTimestamp() != nil {
		return false, "the Cluster resource is being deleted"
	}
	obj := cluster.Object
	if ts, found, _ := ShootDeletionTimestamp.Str(obj); found && ts != "" {
		return false, "the shoot is being deleted (" + ShootDeletionTimestamp.String() + ")"
	}
	if enabled, found, _ := ShootHibernationEnabled.Bool(obj); found && enabled {
		return false, "the shoot is hibernated or hibernating (" + ShootHibernationEnabled.String() + ")"
	}
	typ, _, _ := ShootLastOperationType.Str(obj)
	if typ == LastOperationMigrate {
		return false, "the shoot is being migrated (" + ShootLastOperationType.String() + " Migrate)"
	}
	workers, found, _ := ShootWorkers.Slice(obj)
	if !found || len(workers) == 0 {
		return false, "the shoot has no workers (" + ShootWorkers.String() + ")"
	}
	if hibernated, found, _ := ShootHibernated.Bool(obj); found && hibernated {
		return false, "the shoot is waking up from hibernation (" + ShootHibernated.String() + " still true)"
	}
	last, found, _ := ShootLastOperation.Map(obj)
	if !found || last == nil {
		return false, "the shoot is being created (no " + ShootLastOperation.String() + " yet)"
	}
	state, _, _ := ShootLastOperationState.Str(obj)
	switch {
	case typ == LastOperationReconcile:
		return true, "the shoot is active (lastOperation Reconcile " + state + ")"
	case (typ == LastOperationCreate || typ == LastOperationRestore) && state == LastOperationSucceeded:
		return true, "the shoot is active (lastOperation " + typ + " Succeeded)"
	}
	return false, fmt.Sprintf("the shoot's control plane is not settled (lastOperation %s %s; probed once a Create or Restore has Succeeded, or on Reconcile)", typ, state)
}

// ShootSettings are the probe settings a shoot overrides, read from its Cluster resource.
type ShootSettings struct {
	// NodeMonitorGrace is spec.kubernetes.kubeControllerManager.nodeMonitorGracePeriod; 0 =
	// not set (the config's kcmNodeMonitorGraceDuration applies).
	NodeMonitorGrace time.Duration
	// NodeConditions: worker pool → machineControllerManager.nodeConditions, for the pools
	// that name any (the others use the defaults).
	NodeConditions map[string][]string
	// Problems: fields present but unusable, ignored (the defaults apply).
	Problems []string
}

// ShootSettingsOf reads a shoot's own probe settings from its Cluster (nil: none).
func ShootSettingsOf(cluster *unstructured.Unstructured) ShootSettings {
	var s ShootSettings
	if cluster == nil {
		return s
	}
	obj := cluster.Object
	if v, found, err := ShootNodeMonitorGracePeriod.Value(obj); found && v != nil {
		str, isString := v.(string)
		d, perr := time.ParseDuration(str)
		switch {
		case err != nil || !isString || perr != nil:
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %v: not a duration, ignored", ShootNodeMonitorGracePeriod, v))
		case d < probe.MinNodeMonitorGrace || d > ctrl.MaxDuration:
			s.Problems = append(s.Problems, fmt.Sprintf("%s: %s: must be at least %s (kubelets renew their leases every 10s) and at most %s, ignored",
				ShootNodeMonitorGracePeriod, d, probe.MinNodeMonitorGrace, ctrl.MaxDuration))
		default:
			s.NodeMonitorGrace = d
		}
	}
	workers, _, _ := ShootWorkers.Slice(obj)
	for i, w := range workers {
		wm, ok := w.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := WorkerName.Str(wm)
		conds, found, err := WorkerNodeConditions.Strings(wm)
		pool := fmt.Sprintf("%s[%d]", ShootWorkers, i)
		switch {
		case err != nil:
			s.Problems = append(s.Problems, fmt.Sprintf("%s.%s: not a list of strings, ignored", pool, strings.Join(WorkerNodeConditions.Path(), ".")))
		case !found:
		case name == "":
			s.Problems = append(s.Problems, fmt.Sprintf("%s: no name, its nodeConditions are ignored", pool))
		case len(conds) > 0:
			if s.NodeConditions == nil {
				s.NodeConditions = map[string][]string{}
			}
			s.NodeConditions[name] = conds
		}
	}
	return s
}

// NodeConditionsJSON is NodeConditions as the probe's NODE_CONDITIONS ("" when none).
func (s ShootSettings) NodeConditionsJSON() string {
	if len(s.NodeConditions) == 0 {
		return ""
	}
	b, _ := json.Marshal(s.NodeConditions) // strings only: cannot fail; keys sorted
	return string(b)
}

// Grace is the shoot's nodeMonitorGracePeriod, or def when it sets none.
func (s ShootSettings) Grace(def time.Duration) time.Duration {
	if s.NodeMonitorGrace > 0 {
		return s.NodeMonitorGrace
	}
	return def
}

// NextAfterThrottle is when a namespace's next probe is due after a probe Job that finished
// at finished reported throttled (429) for the consecutive-th time in a row: no earlier than
// the back-off, and never earlier than it was due anyway.
func NextAfterThrottle(next, finished time.Time, consecutive int) time.Time {
	until := finished.Add(probe.ThrottleBackoff(consecutive))
	if next.Before(until) {
		return until
	}
	return next
}

// ProbeInput is everything the decision for one namespace depends on.
type ProbeInput struct {
	// Watched: the namespace exists, matches the prober's selector and is not terminating.
	Watched bool
	// ClusterPending: Gardener's Cluster kind exists but its cache has not synced yet.
	ClusterPending bool
	Cluster        *unstructured.Unstructured
	// Probed: the namespace is probed already (a member of its shard).
	Probed bool
	// StandAside: why the prober stands aside for dependency-watchdog's ("": it does not).
	StandAside string
	Now        time.Time
}

// ProbeAction is what the coordinator does for one namespace now.
type ProbeAction string

const (
	ProbeForget   ProbeAction = "forget"   // not probed (any more): it leaves its shard's membership
	ProbeFirst    ProbeAction = "first"    // first sighting: joins its shard, first probe after initialDelay
	ProbeMember   ProbeAction = "member"   // probed already: its shard's Jobs probe it
	ProbeDeferred ProbeAction = "deferred" // cannot tell yet (Cluster cache not synced): look again soon
)

// DecideProbe is the whole rule of which namespaces are probed.
func DecideProbe(in ProbeInput) (ProbeAction, string) {
	if !in.Watched {
		return ProbeForget, "namespace not selected (or gone, or terminating)"
	}
	if in.StandAside != "" {
		return ProbeForget, "standing aside: " + in.StandAside
	}
	if in.ClusterPending {
		return ProbeDeferred, "waiting for the Gardener Cluster cache"
	}
	if ok, why := ShouldProbe(in.Cluster); !ok {
		return ProbeForget, why
	}
	if !in.Probed {
		return ProbeFirst, "first seen"
	}
	return ProbeMember, "probed"
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
