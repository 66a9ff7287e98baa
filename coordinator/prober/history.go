package prober

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/depwatch/depwatch/jobs"
)

// cleanHistory deletes the target's (a shard's, or one namespace's) finished probe Jobs
// beyond the history limits.
func (p *Controller) cleanHistory(ctx context.Context, target string) error {
	objs, err := p.jobInf.GetIndexer().ByIndex(jobTargetIndex, target)
	if err != nil {
		return err
	}
	list := make([]*batchv1.Job, 0, len(objs))
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok {
			list = append(list, j)
		}
	}
	run := p.current()
	excess := jobs.ExcessHistory(list, run.cfg.SuccessfulHistory(), run.cfg.FailedHistory())
	if len(excess) == 0 {
		return nil
	}
	del := make([]batchv1.Job, 0, len(excess))
	for _, j := range excess {
		del = append(del, *j)
	}
	deleted, err := run.launcher.Delete(ctx, del)
	p.metrics.ProbeJobsCleaned.Add(float64(len(deleted)))
	if len(deleted) > 0 {
		p.log.WithFields(logrus.Fields{"target": target, "jobs": deleted}).Debug("Removed finished probe Jobs beyond the history limits.")
	}
	if err != nil {
		return fmt.Errorf("history clean-up: %w", err)
	}
	return nil
}
