package prober

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// newInformers takes the cluster's namespaces (shared with the weeder: the prober reads those
// its selector matches, selected) and follows, in the Jobs' namespace, the executor's probe
// runs (their changes and reports) and the shards' memberships. The coordinator runs them.
func (p *Controller) newInformers(namespaces cache.SharedIndexInformer, jobNamespace string) error {
	p.nsInf = namespaces
	p.members = p.exec.Memberships(jobNamespace, p.onLeft)
	var err error
	p.view, err = p.exec.RunView(jobNamespace, jobs.KindProbe, func(r jobs.Run) []string { return []string{r.Facts.Target} }, jobs.RunHandlers{
		Added: func(r jobs.Run) {
			if !r.Active() {
				p.onEnded(r)
			}
		},
		Stopped:  p.onEnded,
		Reported: p.onReport,
		Failed: func(jobs.Run) {
			if p.leading.Load() {
				p.metrics.JobsFailed.WithLabelValues(string(jobs.KindProbe)).Inc()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("following the probe runs: %w", err)
	}
	p.notStarted = p.view.NotStarted
	return nil
}

// selected says whether obj, a namespace (or its tombstone), matches the prober's selector:
// only those are the prober's to look at (input reads the same: Watched).
func (p *Controller) selected(obj any) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	n, ok := obj.(*corev1.Namespace)
	return ok && p.current().cfg.Selector().Matches(labels.Set(n.Labels))
}

// selectedKeys are the keys of the cached namespaces the prober's selector matches.
func (p *Controller) selectedKeys() []string {
	var keys []string
	for _, obj := range p.nsInf.GetIndexer().List() {
		if p.selected(obj) {
			if k, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// addHandlers queues a namespace's key for its own events; a namespace whose labels leave the
// selector is looked at once more, and let go. A run that ends queues its shard and its
// namespaces (onEnded, the run view's handler); a namespace that left a shard's membership is
// queued by onLeft.
func (p *Controller) addHandlers() error {
	nsKey := func(obj any, selected bool) {
		k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		p.enqueue(k, selected && err == nil)
	}
	_, err := p.nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { nsKey(obj, p.selected(obj)) },
		UpdateFunc: func(old, obj any) { nsKey(obj, p.selected(old) || p.selected(obj)) },
		DeleteFunc: func(obj any) { nsKey(obj, p.selected(obj)) },
	})
	return err
}

// onEnded: a run that ended (or is going) changes the history, or its shard's next run. Its
// namespaces are looked at again: one that moved to another shard while it ran joins that
// shard now.
func (p *Controller) onEnded(r jobs.Run) {
	if i, isShard := shardOfTarget(r.Facts.Target); isShard && len(r.Facts.Namespaces) > 0 {
		p.queue.Add(shardKey(i))
	}
	for _, ns := range p.covers(r) {
		p.queue.Add(ns)
	}
}
