package weeder

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/jobs"
)

// Storms: a zone or node failure takes many services down at once. A Job per service would
// put hundreds of pods into the middle of the incident, each a few API calls. So a launch
// gets a Job of its own only while launches are rare; beyond --weeder-batch-after launches
// within --weeder-batch-window, services wait a moment (--weeder-batch-linger) and are
// covered together by a batch Job (the reaper's TARGETS: each service still gated and timed
// on its own), at most --weeder-batch-size per Job, and never more than --max-weeder-jobs
// weeder Jobs active at once. A service past that cap keeps waiting, armed or (once it is
// back) unarmed, until a weeder Job finishes: none is dropped.

// Storm batching defaults (see Batching): with these, a storm of 1,000 services costs ~15 Jobs.
const (
	DefaultBatchAfter  = 5
	DefaultBatchWindow = 10 * time.Second
	DefaultBatchSize   = 100
	DefaultBatchLinger = time.Second
	DefaultMaxWeeders  = 50
)

// MaxBatchSize bounds --weeder-batch-size: 500 services make a TARGETS variable of ~50 KB.
const MaxBatchSize = 500

// Batching is the storm settings.
type Batching struct {
	// After: launches within Window that get a Job of their own.
	After  int
	Window time.Duration
	// Size: services per batch Job, at most.
	Size int
	// Linger: how long the first service of a forming batch waits for others.
	Linger time.Duration
	// MaxJobs: weeder Jobs active at once, at most (0: no cap).
	MaxJobs int
	// MaxQPS and MaxBurst cap a batch Job's API rate limit, which grows with its services
	// (BatchClientLimits); 0: DefaultBatchMaxQPS, DefaultBatchMaxBurst.
	MaxQPS   float64
	MaxBurst int
}

// DefaultBatching is the shipped storm settings (the flags' defaults).
func DefaultBatching() Batching {
	return Batching{After: DefaultBatchAfter, Window: DefaultBatchWindow, Size: DefaultBatchSize, Linger: DefaultBatchLinger, MaxJobs: DefaultMaxWeeders,
		MaxQPS: DefaultBatchMaxQPS, MaxBurst: DefaultBatchMaxBurst}
}

// LaunchMode is how one weeder launch is done.
type LaunchMode int

const (
	// LaunchOwnJob: a Job for the service alone, now.
	LaunchOwnJob LaunchMode = iota
	// LaunchInBatch: the service joins the batch being formed.
	LaunchInBatch
)

// LaunchInput is what PlanLaunch decides on.
type LaunchInput struct {
	// RecentOwn: Jobs of their own launched within the window.
	RecentOwn int
	// Waiting: services already waiting for a batch Job.
	Waiting int
	// Active: weeder Jobs active now (the cache, plus those just created).
	Active int
}

// PlanLaunch is the storm rule, pure: a service gets a Job of its own while launches are rare
// and the cap leaves room; once a batch is forming, later services join it (a storm is not
// split into a Job per service by its stragglers).
func PlanLaunch(b Batching, in LaunchInput) LaunchMode {
	switch {
	case in.Waiting > 0:
		return LaunchInBatch
	case b.After >= 0 && in.RecentOwn >= b.After:
		return LaunchInBatch
	case b.MaxJobs > 0 && in.Active >= b.MaxJobs:
		return LaunchInBatch
	}
	return LaunchOwnJob
}

// batchItem is a service waiting for a batch Job.
type batchItem struct {
	key   string
	p     *pendingLaunch
	armed bool
	since time.Time
}

// batcher holds the services waiting for a batch Job and the recent own-Job launches.
type batcher struct {
	mu      sync.Mutex
	recent  []time.Time
	waiting map[string]*batchItem
	wake    chan struct{}
	// atCap: the last launch was held back by --max-weeder-jobs (runBatches' goroutine only).
	atCap bool
}

func newBatcher() *batcher {
	return &batcher{waiting: map[string]*batchItem{}, wake: make(chan struct{}, 1)}
}

func (b *batcher) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// ownLaunched counts a Job of its own; recentOwn drops those older than the window.
func (b *batcher) ownLaunched(at time.Time) {
	b.mu.Lock()
	b.recent = append(b.recent, at)
	b.mu.Unlock()
}

func (b *batcher) input(now time.Time, window time.Duration) (recent, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := b.recent[:0]
	for _, t := range b.recent {
		if now.Sub(t) < window {
			keep = append(keep, t)
		}
	}
	b.recent = keep
	return len(b.recent), len(b.waiting)
}

// add puts (or replaces: the newer edge is the one that can still help) key's launch.
func (b *batcher) add(it *batchItem) {
	b.mu.Lock()
	if old, ok := b.waiting[it.key]; ok {
		it.since = old.since // its place in the batch being formed
	}
	b.waiting[it.key] = it
	b.mu.Unlock()
	b.poke()
}

// waitingFor says whether key waits for a batch Job, and armed or not.
func (b *batcher) waitingFor(key string) (armed, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	it, ok := b.waiting[key]
	return ok && it.armed, ok
}

func (b *batcher) drop(key string) {
	b.mu.Lock()
	delete(b.waiting, key)
	b.mu.Unlock()
}

func (b *batcher) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiting)
}

// due returns the next batch to launch (oldest first, one kind: armed or not, at most size)
// once the oldest has lingered long enough or a full batch waits; else when to look again.
func (b *batcher) due(now time.Time, size int, linger time.Duration) ([]*batchItem, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiting) == 0 {
		return nil, -1
	}
	items := make([]*batchItem, 0, len(b.waiting))
	for _, it := range b.waiting {
		items = append(items, it)
	}
	slices.SortFunc(items, func(x, y *batchItem) int {
		if c := x.since.Compare(y.since); c != 0 {
			return c
		}
		return cmpString(x.key, y.key)
	})
	if wait := linger - now.Sub(items[0].since); wait > 0 && len(items) < size {
		return nil, wait
	}
	armed := items[0].armed
	var out []*batchItem
	for _, it := range items {
		if it.armed == armed && len(out) < size {
			out = append(out, it)
		}
	}
	return out, 0
}

// done removes launched items, unless a newer edge replaced one meanwhile.
func (b *batcher) done(items []*batchItem) {
	b.mu.Lock()
	for _, it := range items {
		if b.waiting[it.key] == it {
			delete(b.waiting, it.key)
		}
	}
	b.mu.Unlock()
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// runBatches launches batch Jobs until ctx ends: whenever a batch is due and the cap leaves
// room. A failed launch is retried with back-off; its services keep waiting.
func (c *Controller) runBatches(ctx context.Context) {
	var backoff time.Duration
	var retryAt time.Time // after a failed launch: no launch before then, however many wake-ups
	for {
		wait := time.Duration(-1)
		if until := retryAt.Sub(c.now()); until > 0 {
			wait = until
		} else {
			items, w := c.batch.due(c.now(), c.opts.Batching.Size, c.opts.Batching.Linger)
			wait = w
			if len(items) > 0 {
				switch launched, err := c.launchBatch(ctx, items); {
				case err != nil:
					backoff = min(max(2*backoff, 500*time.Millisecond), 30*time.Second)
					retryAt, wait = c.now().Add(backoff), backoff
				case !launched:
					wait = 5 * time.Second // at the cap: a Job that finishes wakes this sooner
				default:
					backoff = 0
					continue // more may be due
				}
			}
		}
		c.metrics.WeederWaiting.Set(float64(c.batch.count()))
		var timer *time.Timer
		var fired <-chan time.Time
		if wait >= 0 {
			timer = time.NewTimer(wait)
			fired = timer.C
		}
		select {
		case <-ctx.Done():
		case <-c.batch.wake:
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// launchBatch creates one batch Job for items, if the cap leaves room (launched false
// otherwise), then records each service's Event.
func (c *Controller) launchBatch(ctx context.Context, items []*batchItem) (bool, error) {
	l := c.live()
	if max := c.opts.Batching.MaxJobs; max > 0 && c.activeWeederJobs() >= max {
		if !c.batch.atCap { // said once per time at the cap, not on every Job update
			c.batch.atCap = true
			c.log.WithFields(logrus.Fields{"waiting": c.batch.count(), "maxWeederJobs": max}).
				Warn("Services wait for a weeder Job: --max-weeder-jobs weeder Jobs are active; they are covered as soon as one finishes.")
		}
		return false, nil
	}
	if c.batch.atCap {
		c.batch.atCap = false
		c.log.WithField("waiting", c.batch.count()).Info("A weeder Job finished: services that waited at --max-weeder-jobs are being covered.")
	}
	armed := items[0].armed
	first := items[0].p
	targets := make([]jobs.WeederTarget, 0, len(items))
	var replace []batchv1.Job
	var live []*batchItem
	for _, it := range items {
		if !c.relevant(l, it.key) {
			continue // a reload took it out since
		}
		ns, svc := splitKey(it.key)
		targets = append(targets, jobs.WeederTarget{Namespace: ns, Service: svc, Selectors: l.cfg.Selectors(svc)})
		live = append(live, it)
		for _, j := range c.wjobs.active(it.key) {
			if len(jobs.JobTargets(j)) == 1 && !jobs.Armed(j) { // its own unarmed Job: replaced
				replace = append(replace, *j)
			}
		}
		if it.p.at.Before(first.at) {
			first = it.p
		}
	}
	if len(live) == 0 {
		c.batch.done(items)
		return true, nil
	}
	spec, err := c.weederBatchSpec(l, first, armed, targets)
	if err != nil {
		c.batch.done(items) // validated at load; cannot happen
		return true, err
	}
	out, err := l.launcher.LaunchOver(ctx, spec, replace)
	c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), string(out.Result)).Inc()
	if err != nil {
		c.log.WithError(err).WithField("services", len(live)).Error("Could not launch a batch weeder Job; will retry.")
		return false, err
	}
	c.batch.done(items)
	c.metrics.WeederBatched.Add(float64(len(live)))
	job := out.Job.Namespace + "/" + out.Job.Name
	c.log.WithFields(logrus.Fields{"job": job, "services": len(live), "armed": armed, "result": string(out.Result)}).
		Infof("Many services need a weeder at once: launched one batch weeder Job for %d of them; each is followed on its own (kubectl logs shows a target field per line).", len(live))
	for _, it := range live {
		ns, svc := splitKey(it.key)
		c.noteLaunch(it.key, out.Job, armed, false)
		c.metrics.TriggerToJob.WithLabelValues(string(jobs.KindWeeder)).Observe(c.now().Sub(it.p.at).Seconds())
		c.observeEdge(it.p)
		log := c.log.WithFields(logrus.Fields{"namespace": ns, "service": svc, "job": job, "trigger": it.p.reason, "armed": armed, "batch": len(live)})
		if armed {
			log.Info("The service went down: covered by an armed batch weeder Job; it starts reaping the service's dependents the moment it is Ready again.")
			c.recordEvent(ns, svc, corev1.EventTypeNormal, EventWeederArmed,
				fmt.Sprintf("Armed batch weeder Job %s (trigger %s, %d services): it restarts this service's crash-looping dependents from the moment it is Ready again (waiting at most %s), for %s",
					job, it.p.reason, len(live), l.cfg.MaxWait(), l.cfg.Watch()))
			continue
		}
		log.Info("Covered by a batch weeder Job.")
		c.recordEvent(ns, svc, corev1.EventTypeNormal, EventWeederStarted,
			fmt.Sprintf("Started batch weeder Job %s (trigger %s, %d services): restarting this service's crash-looping dependents for %s",
				job, it.p.reason, len(live), l.cfg.Watch()))
	}
	return true, nil
}

// weederBatchSpec builds a batch weeder Job's spec from config l.
func (c *Controller) weederBatchSpec(l *live, p *pendingLaunch, armed bool, targets []jobs.WeederTarget) (jobs.Spec, error) {
	base := weederSettings(l, p, armed)
	base.Client = BatchClientLimits(len(targets), c.opts.Batching)
	return jobs.WeederBatch(base, targets)
}
