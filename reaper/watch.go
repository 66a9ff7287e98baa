package reaper

import (
	"context"
	"sync"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// watcher runs one pod informer per OR-ed label selector (server-side filtered, namespace-
// scoped when NAMESPACE is set) and queues the name (namespace/name) of every added or
// updated pod. The informers never reap themselves: the run's loop takes the keys one at a time from
// keys and judges each pod as the caches hold it then, so all reaping stays on one goroutine
// and a watched pod and a cycle never race. The queue holds a key once however often its pod
// changes, and a pod deleted meanwhile is simply not found.
type watcher struct {
	queue workqueue.TypedInterface[cache.ObjectName]
	keys  chan cache.ObjectName // the queue's keys, handed to the run's loop
	pods  *podCache
	wg    sync.WaitGroup
}

func startWatcher(stop context.Context, client kubernetes.Interface, opts Options, fieldSelector string, log logrus.FieldLogger) *watcher {
	w := &watcher{queue: workqueue.NewTyped[cache.ObjectName](), keys: make(chan cache.ObjectName)}
	w.pods = newPodInformers(client, opts.Selectors, fieldSelector, opts.Namespace, cache.ResourceEventHandlerFuncs{
		AddFunc:    w.offer,
		UpdateFunc: func(_, obj any) { w.offer(obj) },
	})
	for _, f := range w.pods.factories {
		f.Start(stop.Done())
	}
	w.wg.Go(func() {
		if cache.WaitForCacheSync(stop.Done(), w.pods.synced()...) {
			log.Info("Watching pods: a pod is reaped the moment it matches.")
			if opts.onWatchSynced != nil {
				opts.onWatchSynced()
			}
		}
	})
	w.wg.Go(func() { w.feed(stop.Done()) })
	return w
}

// offer queues a pod's key unless the pod is already terminating.
func (w *watcher) offer(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.DeletionTimestamp != nil {
		return
	}
	w.queue.Add(cache.MetaObjectToName(pod))
}

// feed hands the queue's keys to the run's loop, in order, until the queue shuts down. The
// loop waits for the schedule, RUN_DURATION and the watch at once, which a blocking Get cannot
// join; the loop marks each key Done once it has judged the pod, so a pod that changes
// meanwhile is queued again rather than handed over twice.
func (w *watcher) feed(stop <-chan struct{}) {
	for {
		key, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		select {
		case w.keys <- key:
		case <-stop:
			w.queue.Done(key)
		}
	}
}

// pod is the pod of a queued key as the caches hold it now; false when it is gone or
// terminating.
func (w *watcher) pod(key cache.ObjectName) (*corev1.Pod, bool) {
	k := key.String()
	for _, inf := range w.pods.informers {
		obj, exists, err := inf.GetStore().GetByKey(k)
		if err != nil || !exists {
			continue
		}
		pod, ok := obj.(*corev1.Pod)
		return pod, ok && pod.DeletionTimestamp == nil
	}
	return nil, false
}

// shutdown waits for every informer goroutine and feed; the stop context must be cancelled
// first.
func (w *watcher) shutdown() {
	w.queue.ShutDown()
	for _, f := range w.pods.factories {
		f.Shutdown()
	}
	w.wg.Wait()
}
