package ctrl

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

type recorder struct {
	mu       sync.Mutex
	calls    map[string]int
	gaveUp   map[string]error
	failKeys map[string]bool
}

func (r *recorder) Reconcile(_ context.Context, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[key]++
	if r.failKeys[key] {
		return errors.New("API server unreachable")
	}
	return nil
}

func (r *recorder) GiveUp(key string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gaveUp[key] = err
}

func (r *recorder) snapshot() (map[string]int, map[string]error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls, gave := map[string]int{}, map[string]error{}
	for k, v := range r.calls {
		calls[k] = v
	}
	for k, v := range r.gaveUp {
		gave[k] = v
	}
	return calls, gave
}

// A key that keeps failing is retried MaxRetries times, then handed to GiveUp once; a key that
// succeeds is reconciled once; Work returns only after its workers have stopped.
func TestWorkRetriesThenGivesUpAndStopsWithItsContext(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 5*time.Millisecond))
	r := &recorder{calls: map[string]int{}, gaveUp: map[string]error{}, failKeys: map[string]bool{"bad": true}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Work(ctx, q, 2, r)
	}()
	q.Add("good")
	q.Add("bad")
	deadline := time.Now().Add(10 * time.Second)
	for {
		calls, gave := r.snapshot()
		if _, ok := gave["bad"]; ok {
			if calls["bad"] != MaxRetries+1 || calls["good"] != 1 {
				t.Errorf("calls = %v, want bad %d times (first try + %d retries) and good once", calls, MaxRetries+1, MaxRetries)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bad was never given up: calls %v", calls)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Work did not return after its context ended")
	}
	if !q.ShuttingDown() {
		t.Error("the queue is not shut down")
	}
}
