package reaper

import (
	"context"
	"sync"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// watcher runs one pod informer per OR-ed label selector (server-side filtered, namespace-
// scoped when NAMESPACE is set) and hands every added or updated pod to the run's single
// worker through a queue. The informers never reap themselves: all reaping stays on one
// goroutine, so a watched pod and a cycle never race.
type watcher struct {
	queue     *podQueue
	factories []informers.SharedInformerFactory
	wg        sync.WaitGroup
}

func startWatcher(stop context.Context, client kubernetes.Interface, opts Options, fieldSelector string, gated bool, log logrus.FieldLogger) *watcher {
	w := &watcher{queue: newPodQueue()}
	var synced []cache.InformerSynced
	for _, sel := range opts.Selectors {
		labelSelector := sel.String()
		f := informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithNamespace(opts.Namespace),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
				lo.LabelSelector = labelSelector
				lo.FieldSelector = fieldSelector
			}))
		inf := slimPodInformer(f)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.offer(obj) },
			UpdateFunc: func(_, obj any) { w.offer(obj) },
			DeleteFunc: func(obj any) {
				if pod, ok := podFrom(obj); ok {
					w.queue.remove(pod.UID)
				}
			},
		})
		synced = append(synced, inf.HasSynced)
		f.Start(stop.Done())
		w.factories = append(w.factories, f)
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if cache.WaitForCacheSync(stop.Done(), synced...) {
			if gated {
				log.Info("Watching pods (cache warm): once the gate opens, a pod is reaped the moment it matches.")
			} else {
				log.Info("Watching pods: a pod is reaped the moment it matches.")
			}
			if opts.onWatchSynced != nil {
				opts.onWatchSynced()
			}
		}
	}()
	return w
}

// offer queues a pod unless it is already terminating.
func (w *watcher) offer(obj any) {
	pod, ok := podFrom(obj)
	if !ok || pod.DeletionTimestamp != nil {
		return
	}
	w.queue.push(pod)
}

// shutdown waits for every informer goroutine; the stop context must be cancelled first.
func (w *watcher) shutdown() {
	for _, f := range w.factories {
		f.Shutdown()
	}
	w.wg.Wait()
}

func podFrom(obj any) (*corev1.Pod, bool) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return o, true
	case cache.DeletedFinalStateUnknown:
		p, ok := o.Obj.(*corev1.Pod)
		return p, ok
	}
	return nil, false
}

// podQueue holds the latest version of each reported pod, in arrival order, until the worker
// takes it. Coalescing by UID keeps it as small as the set of distinct pods that changed, and
// the informer's handler never blocks.
type podQueue struct {
	mu    sync.Mutex
	order []types.UID
	pods  map[types.UID]*corev1.Pod
	ready chan struct{} // signalled (never blocking) when something is pushed
}

func newPodQueue() *podQueue {
	return &podQueue{pods: map[types.UID]*corev1.Pod{}, ready: make(chan struct{}, 1)}
}

func (q *podQueue) push(pod *corev1.Pod) {
	q.mu.Lock()
	if _, queued := q.pods[pod.UID]; !queued {
		q.order = append(q.order, pod.UID)
	}
	q.pods[pod.UID] = pod
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *podQueue) remove(uid types.UID) {
	q.mu.Lock()
	delete(q.pods, uid) // its entry in order is skipped by pop
	q.mu.Unlock()
}

func (q *podQueue) pop() (*corev1.Pod, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.order) > 0 {
		uid := q.order[0]
		q.order = q.order[1:]
		if pod, ok := q.pods[uid]; ok {
			delete(q.pods, uid)
			return pod, true
		}
	}
	q.order = nil // let the backing array go
	return nil, false
}

// slimPodInformer is the factory's pod informer, whose cache keeps only what the run reads
// (slimPod): a WATCH run over many pods stays small.
func slimPodInformer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	inf := f.Core().V1().Pods().Informer()
	_ = inf.SetTransform(func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			return slimPod(pod), nil
		}
		return obj, nil
	})
	return inf
}
