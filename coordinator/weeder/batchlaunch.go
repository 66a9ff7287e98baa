package weeder

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// runBatches is the batch launcher's worker until ctx ends: each time its key comes out of
// the queue it launches the batches that are due (launchDueBatches).
func (c *Controller) runBatches(ctx context.Context) {
	q := c.batch.queue
	stop := context.AfterFunc(ctx, q.ShutDown)
	defer stop()
	for {
		key, shutdown := q.Get()
		if shutdown || ctx.Err() != nil {
			return // a shut-down queue still hands out what it holds: no launch after ctx
		}
		c.launchDueBatches(ctx)
		q.Done(key)
	}
}

// launchDueBatches launches batch Jobs while one is due and the cap leaves room, then has its
// key come back when it must look again: when the oldest waiting service has lingered long
// enough, after 5 s at the cap (a Job that finishes pokes it sooner), or, after a failed
// launch, with back-off (its services keep waiting).
func (c *Controller) launchDueBatches(ctx context.Context) {
	b := c.batch
	defer func() { c.metrics.WeederWaiting.Set(float64(b.count())) }()
	if until := b.retryAt.Sub(c.now()); until > 0 {
		b.queue.AddAfter(batchKey, until)
		return
	}
	for {
		items, wait := b.due(c.now(), c.opts.Batching.Size, c.opts.Batching.Linger)
		if len(items) == 0 {
			if wait >= 0 {
				b.queue.AddAfter(batchKey, wait)
			}
			return
		}
		switch launched, err := c.launchBatch(ctx, items); {
		case err != nil:
			backoff := b.retries.When(batchKey)
			b.retryAt = c.now().Add(backoff)
			b.queue.AddAfter(batchKey, backoff)
			return
		case !launched:
			b.queue.AddAfter(batchKey, 5*time.Second)
			return
		}
		b.retries.Forget(batchKey)
	}
}

// launchBatch creates one batch Job for items, if the cap leaves room (launched false
// otherwise), then tells each service it covers.
func (c *Controller) launchBatch(ctx context.Context, items []*batchItem) (bool, error) {
	if !c.roomForBatch() {
		return false, nil
	}
	rc := c.running
	b := c.newBatch(rc, items)
	if len(b.items) == 0 {
		c.batch.done(items)
		return true, nil
	}
	spec, err := c.weederBatchSpec(rc, b.first, b.armed, b.targets)
	if err != nil {
		c.batch.done(items) // validated at load; cannot happen
		return true, err
	}
	out, err := rc.launcher.Launch(ctx, spec, b.replace)
	c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), string(out.Result)).Inc()
	if err != nil {
		c.log.WithError(err).WithField("services", len(b.items)).Error("Could not launch a batch weeder Job; will retry.")
		return false, err
	}
	c.batch.done(items)
	c.metrics.WeederBatched.Add(float64(len(b.items)))
	c.log.WithFields(logrus.Fields{"job": out.Run.Namespace + "/" + out.Run.Name, "services": len(b.items), "armed": b.armed, "result": string(out.Result)}).
		Infof("Many services need a weeder at once: launched one batch weeder Job for %d of them; each is followed on its own (kubectl logs shows a target field per line).", len(b.items))
	for _, it := range b.items {
		ns, svc, _ := cache.SplitMetaNamespaceKey(it.key)
		log := c.log.WithFields(logrus.Fields{"namespace": ns, "service": svc})
		c.covered(rc, it.key, it.edge, launched{run: out.Run, armed: b.armed, batch: len(b.items)}, log)
	}
	return true, nil
}

// roomForBatch: the --max-weeder-jobs cap leaves room for one more weeder Job. Reaching the
// cap and leaving it are each said once, not on every Job update.
func (c *Controller) roomForBatch() bool {
	if max := c.opts.Batching.MaxJobs; max > 0 && c.activeWeederJobs() >= max {
		if !c.batch.atCap {
			c.batch.atCap = true
			c.log.WithFields(logrus.Fields{"waiting": c.batch.count(), "maxWeederJobs": max}).
				Warn("Services wait for a weeder Job: --max-weeder-jobs weeder Jobs are active; they are covered as soon as one finishes.")
		}
		return false
	}
	if c.batch.atCap {
		c.batch.atCap = false
		c.log.WithField("waiting", c.batch.count()).Info("A weeder Job finished: services that waited at --max-weeder-jobs are being covered.")
	}
	return true
}

// batchJob is what one batch Job is launched with.
type batchJob struct {
	armed bool
	// items are the services it covers: those of the due batch the running config still
	// covers.
	items   []*batchItem
	targets []jobs.WeederTarget
	// first is the oldest edge: the Job's trigger time.
	first *recordedEdge
	// replace is the services' own unarmed Jobs: the batch Job takes over from them.
	replace []jobs.Run
}

func (c *Controller) newBatch(rc *runningConfig, items []*batchItem) batchJob {
	b := batchJob{armed: items[0].armed, first: items[0].edge}
	for _, it := range items {
		if !c.relevant(rc, it.key) {
			continue // its namespace stopped matching since
		}
		ns, svc, _ := cache.SplitMetaNamespaceKey(it.key)
		deps := c.selectorsOf(rc, it.key)
		b.targets = append(b.targets, jobs.WeederTarget{Namespace: ns, Service: svc, Selectors: deps.own, Elsewhere: deps.elsewhere, ReadyWhen: rc.cfg.ReadyWhenOf(svc)})
		b.items = append(b.items, it)
		for _, r := range c.runs.Active(it.key) {
			if len(r.Facts.Covers()) == 1 && !r.Armed {
				b.replace = append(b.replace, r)
			}
		}
		if it.edge.at.Before(b.first.at) {
			b.first = it.edge
		}
	}
	return b
}

// weederBatchSpec builds a batch weeder Job's spec from config rc.
func (c *Controller) weederBatchSpec(rc *runningConfig, e *recordedEdge, armed bool, targets []jobs.WeederTarget) (jobs.Spec, error) {
	base := weederSettings(rc, e, armed)
	base.Client = BatchClientLimits(len(targets), c.opts.Batching)
	return jobs.WeederBatch(base, targets)
}
