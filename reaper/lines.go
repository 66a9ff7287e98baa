package reaper

import (
	"time"

	"github.com/sirupsen/logrus"
)

// The lines that tell a gated run's story, the same for a run of one service and for each
// target of a batch run (whose logger adds the target field).

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

// pausedLine: the service went down again after the gate opened.
func (r *runner) pausedLine(ref ServiceRef) {
	r.log.WithField("service", ref.String()).Infof("Service %s has no ready endpoint any more: reaping paused until it is Ready again (restarted dependents would only crash again).", ref)
}

// resumedLine: a later return, with a fresh window.
func (r *runner) resumedLine(ref ServiceRef) {
	r.log.WithFields(logrus.Fields{"service": ref.String(), "run_duration": r.opts.RunDuration.String()}).
		Infof("Service %s is Ready again: reaping resumes, for a fresh RUN_DURATION %s from now%s.", ref, r.opts.RunDuration, r.cooldownResumeNote())
}

// finishLine is the run's last line (a batch target's own last line).
func (r *runner) finishLine(why string) {
	r.log.WithFields(r.summaryFields()).WithField("stop_reason", why).Infof("Reaper run finished (%s): %s", why, r.sum)
}
