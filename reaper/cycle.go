package reaper

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/depwatch/depwatch/internal/podstate"
)

// runner is the state of one run (one target of a batch). It is owned by the worker holding
// its target's key: cycles and watched pods are handled one at a time, so nothing overlaps
// and nothing here needs a lock.
type runner struct {
	ctx    context.Context // the caller's; only for values, API calls in flight outlive its cancellation
	client kubernetes.Interface
	events *events
	opts   Options
	log    logrus.FieldLogger
	clock  func() time.Time

	sum Summary
	// atCycle is sum when the cycle began: the cycle's line counts from it, and so does MAX_PODS,
	// in pods actually reaped (or, in a dry run, that would have been), so a failed delete or a
	// PodDisruptionBudget refusal leaves room for the next candidate.
	atCycle Summary
	done    map[types.UID]int // the UIDs acted on (never twice), each with the last cycle that saw it
	cool    cooldown          // REAP_COOLDOWN, per owner
	// floorSkips are the back-offs left to the kubelet (BACKOFF_FLOOR), each once: the pod's
	// back-off end, as skipped.
	floorSkips     map[types.UID]time.Time
	unreadableSaid bool // a back-off that cannot be read was said (once per run)
	cycle          int
	lastErr        error // the most recent cycle's list failure; nil once a cycle lists again
}

func newRunner(ctx context.Context, client kubernetes.Interface, ev *events, opts Options, log logrus.FieldLogger) *runner {
	clock := opts.now
	if clock == nil {
		clock = time.Now
	}
	return &runner{
		ctx: ctx, client: client, events: ev, opts: opts, log: log, clock: clock,
		done: map[types.UID]int{}, floorSkips: map[types.UID]time.Time{},
		cool: newCooldown(opts.ReapCooldown),
		sum:  Summary{DryRun: opts.DryRun},
	}
}

// cycleOver is one cycle over the matches collect finds (r.collect lists; a batch's cache
// needs none). stop is checked between pods only.
func (r *runner) cycleOver(stop context.Context, collect func(context.Context) ([]match, error)) {
	r.cycle++
	r.atCycle = r.sum // MAX_PODS is per cycle; watch reaps until the next cycle count against it
	log := r.log.WithField("cycle", r.cycle)
	log.Debug(msgCycleStarting)
	matches, err := collect(stop)
	if err != nil {
		if stop.Err() != nil {
			return // stopped while listing: not a failure
		}
		r.sum.FailedCycles++
		r.lastErr = err
		log.WithField("error", err.Error()).Errorf("Cycle %d could not list pods, it will be retried on the schedule: %v", r.cycle, err)
		return
	}
	r.sum.Cycles++
	r.lastErr = nil
	r.pruneDone()
	r.cool.prune(r.clock())
	sortMatches(matches, r.opts.Sorting, r.opts.shuffle)

	for i, m := range matches {
		if stop.Err() != nil {
			log.Infof("Stopping between pods: %d matched pods left alone.", len(matches)-i)
			break
		}
		if r.quotaFull() {
			log.Infof("MAX_PODS=%d reached: %d matched pods left for a later cycle.", r.opts.MaxPods, len(matches)-i)
			for _, left := range matches[i:] {
				r.maxPodsLine(left.pod, left.reasons)
			}
			break
		}
		r.handle(m)
	}
	s, before := r.sum, r.atCycle
	log.WithFields(logrus.Fields{
		"seen": s.Seen - before.Seen, "matched": s.Matched - before.Matched,
		"reaped": s.Reaped - before.Reaped, "skipped": s.Skipped - before.Skipped,
		"errors": s.Errors - before.Errors, "deferred": s.Deferred - before.Deferred,
	}).Infof("Cycle %d done.", r.cycle)
}

// collect lists every OR-ed selector and keeps only the matches (copied out of their page).
// A pod listed by several selectors is judged once: each selector skips pods an earlier one
// already covers, which needs no memory of the pods seen.
func (r *runner) collect(ctx context.Context) ([]match, error) {
	now := r.clock()
	var matches []match
	selectors, fields := r.opts.Selectors, r.opts.fieldSelector()
	for i, s := range selectors {
		err := listPods(ctx, r.client, r.opts.Namespace, s.String(), fields, func(p *corev1.Pod) {
			if matchesAny(selectors[:i], p) { // covered by an earlier selector
				return
			}
			if m, ok := r.consider(p, now); ok {
				m.pod = slimPod(p) // out of the page, and only what is read later
				matches = append(matches, m)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return matches, nil
}

// collectCached is collect over pods from a cache: no list, the same judgement.
func (r *runner) collectCached(pods []*corev1.Pod) []match {
	now := r.clock()
	var matches []match
	for _, p := range pods {
		if m, ok := r.consider(p, now); ok {
			matches = append(matches, m)
		}
	}
	return matches
}

// consider counts a pod a cycle sees and judges it, unless it was acted on already.
func (r *runner) consider(p *corev1.Pod, now time.Time) (match, bool) {
	r.sum.Seen++
	if _, done := r.done[p.UID]; done {
		r.done[p.UID] = r.cycle // still there: keep remembering it
		return match{}, false
	}
	m, ok := r.opts.evaluate(p, now)
	if ok {
		r.sum.Matched++
	}
	return m, ok
}

// pruneDone forgets UIDs acted on that the last complete listing no longer returned: a UID is
// never reused, so a vanished pod cannot come back, and a forever run's memory stays bounded.
func (r *runner) pruneDone() {
	maps.DeleteFunc(r.done, func(_ types.UID, c int) bool { return c < r.cycle })
}

// quotaFull says whether MAX_PODS (0: unlimited) pods were reaped since the cycle began.
func (r *runner) quotaFull() bool {
	return r.opts.MaxPods > 0 && r.sum.Reaped-r.atCycle.Reaped >= r.opts.MaxPods
}

// handle reaps one match, unless REAP_COOLDOWN defers it or BACKOFF_FLOOR leaves it to the
// kubelet, and remembers a reaped pod: the acted-on UIDs and its owner's round.
func (r *runner) handle(m match) {
	o := ownerOf(m.pod)
	now := r.clock() // before the delete: the owner's replacements are created after it
	v := r.cool.decide(o.uid, m.pod.CreationTimestamp.Time, now)
	if v == verdictDefer {
		r.deferPod(m, o, now)
		return
	}
	s := r.savingOf(m, now)
	if r.belowFloor(m, s, now) {
		return
	}
	if r.reap(m, s) {
		r.sum.Reaped++
		r.done[m.pod.UID] = r.cycle
		r.cool.reaped(o.uid, v, now)
	}
}

// judge handles one pod a watch reported: reaped if it matches and MAX_PODS leaves room.
func (r *runner) judge(pod *corev1.Pod) {
	if _, done := r.done[pod.UID]; done {
		return
	}
	m, ok := r.opts.evaluate(pod, r.clock())
	if !ok {
		return
	}
	r.sum.Matched++
	if r.quotaFull() {
		r.maxPodsLine(pod, m.reasons)
		return
	}
	r.handle(m)
}

// backOffMemory is how long a floor skip is remembered, so the same back-off is logged and
// counted once; the kubelet's longest back-off is 5 minutes.
const backOffMemory = 2 * podstate.KubeletMaxBackOff

// saving is what a restart of a matched pod now saves: known is false when the pod is not
// crash-looping or its back-off cannot be read (it is reaped as before, said once per run).
type saving struct {
	known bool
	saved time.Duration // the back-off left, which the kubelet would have waited out
	until time.Time     // when the kubelet restarts it by itself
}

// savingOf reads the pod's back-off at now.
func (r *runner) savingOf(m match, now time.Time) saving {
	b, looping := podstate.PodBackOff(m.pod)
	if !looping {
		return saving{}
	}
	if b.Known {
		return saving{known: true, saved: b.Remaining(now), until: b.RestartAt}
	}
	if !r.unreadableSaid { // said once per run
		r.unreadableSaid = true
		r.log.WithFields(logrus.Fields{"namespace": m.pod.Namespace, "pod": m.pod.Name, "reason": "backoff-unreadable", "detail": b.Why}).
			Warnf("Cannot tell when the kubelet restarts pod %s/%s by itself (%s): such pods are restarted as before, "+
				"without BACKOFF_FLOOR and without a saved back-off; this is said once per run.", m.pod.Namespace, m.pod.Name, b.Why)
	}
	return saving{}
}

// belowFloor tells whether the kubelet restarts the pod sooner than BACKOFF_FLOOR, so a fresh
// pod would not be Ready sooner: the pod is then left to the kubelet, logged and counted once
// per back-off. It is not remembered as acted on: should the pod crash again, its next,
// longer back-off is judged afresh.
func (r *runner) belowFloor(m match, s saving, now time.Time) bool {
	if !s.known || r.opts.BackOffFloor <= 0 || s.saved >= r.opts.BackOffFloor {
		return false
	}
	maps.DeleteFunc(r.floorSkips, func(_ types.UID, until time.Time) bool { return now.Sub(until) > backOffMemory })
	if until, seen := r.floorSkips[m.pod.UID]; seen && until.Equal(s.until) {
		return true
	}
	r.floorSkips[m.pod.UID] = s.until
	r.sum.BackOffSkipped++
	pod := m.pod
	r.log.WithFields(logrus.Fields{
		"namespace": pod.Namespace, "pod": pod.Name, "uid": string(pod.UID), "reasons": m.reasons,
		"action": ActionBackOffSkipped, "reason": "backoff-floor", "backoff_left_seconds": s.saved.Seconds(),
		"backoff_floor": r.opts.BackOffFloor.String(), "kubelet_restart_at": s.until.UTC().Format(time.RFC3339),
	}).Infof("Not restarting pod %s/%s: the kubelet restarts it by itself in %s (at %s), sooner than BACKOFF_FLOOR %s, "+
		"about what a fresh pod takes to be Ready (it matched because %s).",
		pod.Namespace, pod.Name, s.saved.Round(time.Second), s.until.UTC().Format(time.RFC3339), r.opts.BackOffFloor, strings.Join(m.reasons, "; and "))
	return true
}

// savedNote completes a restart's Event and log line with the back-off it saved.
func (s saving) savedNote() string {
	if !s.known {
		return ""
	}
	return fmt.Sprintf(" It saved about %ds of back-off (the kubelet would have restarted it at %s).",
		int64(s.saved.Round(time.Second)/time.Second), s.until.UTC().Format(time.RFC3339))
}
