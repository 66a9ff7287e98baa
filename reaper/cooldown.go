package reaper

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// REAP_COOLDOWN bounds how often the pods of one controller are reaped, so a workload that is
// broken for a reason of its own (it keeps crash-looping whatever depwatch does) is not
// churned: delete, new pod with a fresh kubelet back-off, CrashLoopBackOff again ~10 s later,
// delete again... which would be worse than leaving it to the kubelet's own back-off.
//
// The unit is the owner: the pod's controller (ownerReference with controller=true, e.g. its
// ReplicaSet, StatefulSet, DaemonSet or Job); a pod without one is its own owner. Reaping an
// owner's pod opens a round for that owner. Until REAP_COOLDOWN has passed since the round
// opened, the owner's pods that already existed when it opened (its other replicas, found in
// the same cycle or a little later by the watch) are still reaped with that round, but pods
// created since (the replacements of the pods it reaped) are left to the kubelet: deferred.
// After the cooldown, the next match opens a new round.
//
// The bound: rounds of one owner are at least REAP_COOLDOWN apart, so a run of RUN_DURATION D
// opens at most 1 + floor(D / REAP_COOLDOWN) rounds per owner, and each round deletes each of
// the owner's pods at most once (a pod reaped in a round is replaced by one created after the
// round opened), i.e. at most replicas × (1 + floor(D / REAP_COOLDOWN)) deletions. With
// START_WHEN_READY the cooldown starts afresh each time the service is Ready again: a new
// return of the service is a new recovery, not the same workload failing again.

// creationMargin: a pod created less than this before a round opened counts as created after
// it. creationTimestamp has whole-second resolution and comes from the API server's clock,
// the round's opening from ours; the margin keeps a replacement from passing as an old pod,
// which is the error that would break the bound (the other one only defers a pod).
const creationMargin = 5 * time.Second

// owner identifies what re-creates a pod.
type owner struct {
	uid  types.UID
	desc string // for people: "ReplicaSet shoot/kcm-5d8f", or "pod shoot/p" for a bare pod
}

// ownerOf returns the pod's controller, or the pod itself when it has none.
func ownerOf(pod *corev1.Pod) owner {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.UID != "" {
		return owner{uid: ref.UID, desc: fmt.Sprintf("%s %s/%s", ref.Kind, pod.Namespace, ref.Name)}
	}
	return owner{uid: pod.UID, desc: fmt.Sprintf("pod %s/%s", pod.Namespace, pod.Name)}
}

// verdict is the cooldown's answer for one matched pod.
type verdict int

const (
	verdictOpenRound verdict = iota // no round within the cooldown: reap it, opening a new round
	verdictInRound                  // it predates the owner's open round: reap it with that round
	verdictDefer                    // created since the owner's round opened: leave it for now
)

// round is one owner's open round.
type round struct {
	opened   time.Time
	deferred sets.Set[types.UID] // pods deferred in this round: each is counted once, the first is logged
}

// cooldown is the per-owner limiter. It is a pure decision plus bookkeeping: no I/O, no clock
// of its own (every call is given now), so it is table-tested directly.
type cooldown struct {
	period time.Duration // 0 = off: every match is reaped (pod-reaper's behaviour)
	rounds map[types.UID]*round
}

func newCooldown(period time.Duration) cooldown {
	return cooldown{period: period, rounds: map[types.UID]*round{}}
}

// decide says what to do with a matched pod of owner o created at created.
func (c *cooldown) decide(o types.UID, created, now time.Time) verdict {
	if c.period <= 0 {
		return verdictOpenRound
	}
	r, ok := c.rounds[o]
	if !ok || !now.Before(r.opened.Add(c.period)) {
		return verdictOpenRound
	}
	if !created.IsZero() && created.Add(creationMargin).Before(r.opened) {
		return verdictInRound
	}
	return verdictDefer
}

// reaped records that a pod of o was reaped after decide said v at now (taken before the
// delete was sent, so every replacement is created after it).
func (c *cooldown) reaped(o types.UID, v verdict, now time.Time) {
	if c.period <= 0 || v != verdictOpenRound {
		return
	}
	c.rounds[o] = &round{opened: now, deferred: sets.New[types.UID]()}
}

// deferred records a deferral; firstForPod says whether this pod is new to this round's
// count, firstForOwner whether this is the round's first deferral (the one to log).
func (c *cooldown) deferred(o, pod types.UID) (firstForPod, firstForOwner bool) {
	r := c.rounds[o]
	if r == nil { // decide never defers without a round
		return false, false
	}
	firstForPod, firstForOwner = !r.deferred.Has(pod), r.deferred.Len() == 0
	r.deferred.Insert(pod)
	return firstForPod, firstForOwner
}

// until is when o's open round ends (zero without one).
func (c *cooldown) until(o types.UID) time.Time {
	if r, ok := c.rounds[o]; ok {
		return r.opened.Add(c.period)
	}
	return time.Time{}
}

// prune forgets rounds that have ended: an ended round decides exactly like no round, so a
// forever run's memory stays as small as the set of owners reaped in the last cooldown.
func (c *cooldown) prune(now time.Time) {
	for o, r := range c.rounds {
		if !now.Before(r.opened.Add(c.period)) {
			delete(c.rounds, o)
		}
	}
}

// reset ends every round: the service is Ready again after an outage, so a pod crash-looping
// now is explained by that outage and is reaped at once, whatever was reaped before.
func (c *cooldown) reset() {
	clear(c.rounds)
}
