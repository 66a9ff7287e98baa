package prober

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// queueKey queues obj's key (a namespace's or a Cluster's: the namespace it is named
// after) when selected.
func (p *Controller) queueKey(obj any, selected bool) {
	if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); selected && err == nil && k != "" {
		p.queue.Add(k)
	}
}

// selected says whether obj, a namespace (or its tombstone), matches the prober's selector:
// only those are the prober's to look at (input reads the same: Watched).
func (p *Controller) selected(obj any) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	n, ok := obj.(*corev1.Namespace)
	return ok && p.cfg.Selector().Matches(labels.Set(n.Labels))
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
