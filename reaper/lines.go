package reaper

import (
	"cmp"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sirupsen/logrus"
)

// The lines that tell a gated run's story, the same for a run of one service and for each
// target of a TARGETS run (whose logger adds the target field).

// armedLine: the run waits for its service.
func (r *runner) armedLine(armedAt time.Time) {
	r.log.WithFields(r.startFields()).WithFields(logrus.Fields{
		"armed_at": armedAt.UTC().Format(time.RFC3339Nano), "wait_for": r.opts.StartWhenReady.String(), "max_wait": r.opts.MaxWait.String(),
	}).Infof("Reaper armed at %s: waiting for service %s to be Ready (at most %s); nothing is reaped before.",
		armedAt.UTC().Format(time.RFC3339), r.opts.StartWhenReady, r.opts.MaxWait)
}

// readyLine: the gate opened at readyAt.
func (r *runner) readyLine(ref ServiceRef, readyAt, armedAt time.Time) {
	waited := readyAt.Sub(armedAt)
	r.log.WithFields(logrus.Fields{
		"service": ref.String(), "ready_at": readyAt.UTC().Format(time.RFC3339Nano), "waited_seconds": waited.Seconds(),
		"run_duration": r.opts.RunDuration.String(),
	}).Infof("Service %s is Ready at %s (waited %.1f s): reaping starts now, for RUN_DURATION %s.",
		ref, readyAt.UTC().Format(time.RFC3339), waited.Seconds(), r.opts.RunDuration)
}

// maxWaitLine: MAX_WAIT passed before the service was ever Ready; it returns the stop reason.
func (r *runner) maxWaitLine(ref ServiceRef) string {
	why := fmt.Sprintf("MAX_WAIT %s elapsed and service %s never became Ready; nothing was reaped", r.opts.MaxWait, ref)
	r.log.WithFields(logrus.Fields{"service": ref.String(), "max_wait": r.opts.MaxWait.String()}).Warnf("%s.", why)
	return why
}

// pausedLine: the service went down again after the gate opened.
func (r *runner) pausedLine(ref ServiceRef) {
	r.log.WithField("service", ref.String()).Infof("Service %s has no ready endpoint any more: reaping paused until it is Ready again (restarted dependents would only crash again).", ref)
}

// resumedLine: a later return, with a fresh window.
func (r *runner) resumedLine(ref ServiceRef) {
	note := ""
	if r.opts.ReapCooldown > 0 {
		note = " (REAP_COOLDOWN starts afresh for every owner: crash loops now are explained by the outage)"
	}
	r.log.WithFields(logrus.Fields{"service": ref.String(), "run_duration": r.opts.RunDuration.String()}).
		Infof("Service %s is Ready again: reaping resumes, for a fresh RUN_DURATION %s from now%s.", ref, r.opts.RunDuration, note)
}

// startLine says when the first cycle comes and returns whether it comes now (atStart)
// rather than at the schedule's first tick. A gated run says it with its Ready line instead.
//
// pod-reaper's contract: a plain schedule reaps at its first tick, never at start (a cron
// SCHEDULE whose first tick is hours away must not reap the moment a Deployment rolls). A
// cycle at start is what REAP_AT_START asks for; WATCH reaps every matching pod the moment
// its informer lists it anyway, so its first cycle at start changes nothing but makes it
// explicit.
func (r *runner) startLine() (atStart bool) {
	atStart = r.opts.ReapAtStart || r.opts.Watch
	firstTick := r.opts.Schedule.Next(time.Now())
	if atStart {
		r.log.WithFields(r.startFields()).Info("Reaper starting: first cycle now, then on the schedule.")
	} else {
		at := firstTick.UTC().Format(time.RFC3339)
		r.log.WithFields(r.startFields()).WithField("first_cycle_at", at).
			Infof("Reaper starting: first cycle at the schedule's first tick, %s (REAP_AT_START=true would run one now).", at)
	}
	return atStart
}

// finishLine is the run's last line (a batch target's own last line).
func (r *runner) finishLine(why string) {
	s := r.sum
	r.log.WithFields(logrus.Fields{
		"cycles": s.Cycles, "failed_cycles": s.FailedCycles, "seen": s.Seen, "matched": s.Matched,
		"reaped": s.Reaped, "skipped": s.Skipped, "gone": s.Gone, "errors": s.Errors, "admission_refused": s.AdmissionRefused, "deferred": s.Deferred, "dry_run": s.DryRun,
		"backoff_skipped": s.BackOffSkipped, "backoff_saved_seconds": s.SavedSeconds(),
		"never_started": s.NotStarted,
	}).WithField("stop_reason", why).Infof("Reaper run finished (%s): %s", why, s)
}

func (r *runner) startFields() logrus.Fields {
	rules := make([]string, len(r.opts.Rules))
	for i, rule := range r.opts.Rules {
		rules[i] = rule.Name()
	}
	selectors := make([]string, len(r.opts.Selectors))
	for i, s := range r.opts.Selectors {
		selectors[i] = s.String()
		if s.Empty() {
			selectors[i] = "(every pod)"
		}
	}
	scope, waitFor := cmp.Or(r.opts.Namespace, "(all namespaces)"), ""
	if r.opts.StartWhenReady != nil {
		waitFor = r.opts.StartWhenReady.String()
	}
	// "in_namespace", not "namespace": that field names the pod acted on in every other line.
	return logrus.Fields{
		"in_namespace": scope, "node": r.opts.NodeName, "label_selectors": selectors, "field_selector": r.opts.fieldSelector(),
		"annotation": r.opts.annotation.String(), "rules": rules, "schedule": r.opts.ScheduleSpec,
		"run_duration": r.opts.RunDuration.String(), "watch": r.opts.Watch, "dry_run": r.opts.DryRun,
		"evict": r.opts.Evict, "max_pods": r.opts.MaxPods, "sorting": r.opts.Sorting.String(),
		"start_when_ready": waitFor, "reap_cooldown": r.opts.ReapCooldown.String(),
		"ready_when": r.opts.ReadyWhen.String(), "backoff_floor": r.opts.BackOffFloor.String(),
	}
}

// maxPodsLine is pod-reaper's line for a matched pod left alone because MAX_PODS pods were
// reaped already: it waits for the next cycle.
func (r *runner) maxPodsLine(pod *corev1.Pod, reasons []string) {
	r.log.WithFields(logrus.Fields{
		"namespace": pod.Namespace, "pod": pod.Name, "reasons": reasons, "action": ActionMaxPods,
		"reapedPods": r.sum.Reaped - r.atCycle.Reaped, "maxPods": r.opts.MaxPods,
		"detail": fmt.Sprintf("MAX_PODS=%d reached: pod %s/%s matches but waits for the next cycle.", r.opts.MaxPods, pod.Namespace, pod.Name),
	}).Info(MsgMaxPods)
}
