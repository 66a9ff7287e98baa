package weeder

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

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

// Storm batching defaults (see Batching). Every Job is a whole process whose memory is mostly
// the same for one service or five hundred (the binary's pages, the Go runtime, the client):
// a batch of 500 serves its services' returns as fast as five of 100 (docs/benchmarks.md).
// So beyond two launches within 10 s services are batched, and a storm of 1,000 services
// costs ~5 Jobs: 2 of their own, then batches of up to 500.
const (
	DefaultBatchAfter  = 2
	DefaultBatchWindow = 10 * time.Second
	DefaultBatchSize   = MaxBatchSize
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
	// Linger: a forming batch waits for others until none has joined for Linger, at most
	// maxLingerFactor × Linger after its first service.
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
	edge  *recordedEdge
	armed bool
	since time.Time
}

// batcher holds the services waiting for a batch Job and the recent own-Job launches.
type batcher struct {
	mu      sync.Mutex
	recent  []time.Time
	waiting map[string]*batchItem

	// queue holds batchKey while the batch launcher is owed a look: a service joined, a
	// weeder Job finished or went (a place under the cap), or a time came (a batch has
	// lingered, the cap is looked at again, a failed launch is retried). One key, so the
	// launcher never runs twice at once.
	queue workqueue.TypedDelayingInterface[string]
	// The launcher's own (runBatches' goroutine only):
	// retries spaces the retries of a failed launch; retryAt: no launch before then, however
	// many pokes come meanwhile.
	retries workqueue.TypedRateLimiter[string]
	retryAt time.Time
	// atCap: the last launch was held back by --max-weeder-jobs.
	atCap bool
}

// batchKey is the batch launcher's one key in its queue.
const batchKey = "batch"

func newBatcher() *batcher {
	return &batcher{
		waiting: map[string]*batchItem{},
		queue:   workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: "depwatch-weeder-batches"}),
		retries: workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
	}
}

// poke has the batch launcher look at once.
func (b *batcher) poke() { b.queue.Add(batchKey) }

// ownLaunched counts a Job of its own, for PlanLaunch's RecentOwn (see input).
func (b *batcher) ownLaunched(at time.Time) {
	b.mu.Lock()
	b.recent = append(b.recent, at)
	b.mu.Unlock()
}

// input is what PlanLaunch reads of the batcher: the own Jobs launched within the window
// (older ones are dropped) and the services waiting for a batch Job.
func (b *batcher) input(now time.Time, window time.Duration) (recent, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recent = slices.DeleteFunc(b.recent, func(t time.Time) bool { return now.Sub(t) >= window })
	return len(b.recent), len(b.waiting)
}

// add puts (or replaces: the newer edge is the one that can still help) key's launch, and
// says how many services now wait.
func (b *batcher) add(it *batchItem) int {
	b.mu.Lock()
	if old, ok := b.waiting[it.key]; ok {
		it.since = old.since // its place in the batch being formed
	}
	b.waiting[it.key] = it
	n := len(b.waiting)
	b.mu.Unlock()
	b.poke()
	return n
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
	items := slices.Collect(maps.Values(b.waiting))
	slices.SortFunc(items, func(x, y *batchItem) int {
		return cmp.Or(x.since.Compare(y.since), strings.Compare(x.key, y.key))
	})
	if wait := lingerLeft(now, items[0].since, items[len(items)-1].since, linger); wait > 0 && len(items) < size {
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

// maxLingerFactor bounds a forming batch's wait: its first service waits at most this many
// lingers, however long services keep joining.
const maxLingerFactor = 5

// lingerLeft is how long a forming batch still waits: until no service has joined it for
// linger, and at most maxLingerFactor × linger after its first. A storm's services are seen
// over seconds (a zone's EndpointSlices do not all change in the same instant); launching a
// second after the first would cut it into many small batches, each a whole process, while a
// batch launched once they stop coming covers them with few.
func lingerLeft(now, first, last time.Time, linger time.Duration) time.Duration {
	return min(linger-now.Sub(last), maxLingerFactor*linger-now.Sub(first))
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
	// The Job covers the due services the running config still covers (a namespace may have
	// stopped matching since); it takes over from their own unarmed Jobs, and its trigger
	// time is the oldest edge's.
	armed, first := items[0].armed, items[0].edge
	var covers []*batchItem
	var targets []jobs.WeederTarget
	var replace []jobs.Run
	for _, it := range items {
		if !c.relevant(it.key) {
			continue
		}
		covers, targets = append(covers, it), append(targets, c.target(it.key))
		for _, r := range c.runs.Active(it.key) {
			if len(r.Facts.Covers()) == 1 && !r.Armed {
				replace = append(replace, r)
			}
		}
		if it.edge.at.Before(first.at) {
			first = it.edge
		}
	}
	if len(covers) == 0 {
		c.batch.done(items)
		return true, nil
	}
	w := c.cfg.weederSpec(first, armed, jobs.WeederTarget{})
	w.Client = BatchClientLimits(len(targets), c.opts.Batching)
	spec, err := jobs.WeederBatch(w, targets)
	if err != nil {
		c.batch.done(items) // validated at load; cannot happen
		return true, err
	}
	out, err := c.launcher.Launch(ctx, spec, replace)
	c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), string(out.Result)).Inc()
	if err != nil {
		c.log.WithError(err).WithField("services", len(covers)).Error("Could not launch a batch weeder Job; will retry.")
		return false, err
	}
	c.batch.done(items)
	c.metrics.WeederBatched.Add(float64(len(covers)))
	c.log.WithFields(logrus.Fields{"job": out.Run.Namespace + "/" + out.Run.Name, "services": len(covers), "armed": armed, "result": string(out.Result)}).
		Infof("Many services need a weeder at once: launched one batch weeder Job for %d of them; each is followed on its own (kubectl logs shows a target field per line).", len(covers))
	for _, it := range covers {
		ns, svc, _ := cache.SplitMetaNamespaceKey(it.key)
		log := c.log.WithFields(logrus.Fields{"namespace": ns, "service": svc})
		c.covered(it.key, it.edge, out, armed, len(covers), log)
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
