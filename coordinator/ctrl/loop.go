package ctrl

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// MaxRetries bounds the rate-limited retries of one key before the controller gives up on
// it. The delays start at 5 ms and double: fifteen retries span about 2.7 minutes, so a
// failure that lasts seconds (an API server restarting, a freshly installed admission
// policy whose parameters the API server has not read yet) delays a weeder instead of losing
// it. Eight, as before, gave up after 1.3 s.
const MaxRetries = 15

// Reconciler is one controller's side of the loop: Reconcile acts on a key once (level-based:
// it reads the world from the caches, decides, acts); GiveUp is told when a key failed
// MaxRetries times in a row, so the controller can say so and decide what happens next.
type Reconciler interface {
	Reconcile(ctx context.Context, key string) error
	GiveUp(key string, err error)
}

// Work runs workers goroutines draining q into r until ctx ends, then shuts q down and waits
// for them: no worker outlives the call.
func Work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], workers int, r Reconciler) {
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for processNext(ctx, q, r) {
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

// processNext handles one key; false once the queue is shut down.
func processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], r Reconciler) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	err := r.Reconcile(ctx, key)
	switch {
	case err == nil, ctx.Err() != nil:
		q.Forget(key)
	case q.NumRequeues(key) < MaxRetries:
		q.AddRateLimited(key)
	default:
		q.Forget(key)
		r.GiveUp(key, err)
	}
	return true
}

// NewQueue is a controller's queue with client-go's default controller rate limiter.
func NewQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
}
