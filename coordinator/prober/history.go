package prober

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/depwatch/depwatch/jobs"
)

// cleanHistory deletes the target's (a shard's, or one namespace's) finished probe Jobs
// beyond the history limits (the Job executor's: an in-process run is gone once it ends).
func (p *Controller) cleanHistory(ctx context.Context, target string) error {
	run := p.current()
	all := func(jobs.Run) bool { return true }
	excess := jobs.ExcessHistory(p.view.ForTarget(target, all), run.cfg.SuccessfulHistory(), run.cfg.FailedHistory())
	if len(excess) == 0 {
		return nil
	}
	deleted, err := run.launcher.Delete(ctx, excess)
	p.metrics.ProbeJobsCleaned.Add(float64(len(deleted)))
	if len(deleted) > 0 {
		p.log.WithFields(logrus.Fields{"target": target, "jobs": deleted}).Debug("Removed finished probe Jobs beyond the history limits.")
	}
	if err != nil {
		return fmt.Errorf("history clean-up: %w", err)
	}
	return nil
}
