package prober

import (
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// newInformers makes the prober's informers: the selected namespaces (cluster-wide), and, in
// the Jobs' namespace, filtered to depwatch.io/kind=probe, the executor's probe Jobs, their
// runs (reports) and the shards' membership ConfigMaps. The coordinator runs them.
func (p *Controller) newInformers(client kubernetes.Interface, selector, jobNamespace string) {
	p.nsInf = coreinformers.NewFilteredNamespaceInformer(client, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	kindSel := labels.Set{jobs.LabelKind: string(jobs.KindProbe)}.String()
	p.jobInf = p.exec.Jobs(jobNamespace, kindSel)
	p.runs = p.exec.Runs(jobNamespace, jobs.KindProbe, p.onReport)
	p.cmInf = p.exec.ConfigMaps(jobNamespace, kindSel)
	_ = p.jobInf.AddIndexers(cache.Indexers{jobTargetIndex: func(obj any) ([]string, error) {
		if j, ok := obj.(*batchv1.Job); ok {
			return []string{jobTarget(j)}, nil
		}
		return nil, nil
	}})
	_ = p.nsInf.SetTransform(jobs.StripManagedFields)
}

// addHandlers queues what each event changes: a namespace's key for its own events; for a
// probe Job that finished, its shard and its namespaces;
// a namespace that left a shard's membership is looked at again.
func (p *Controller) addHandlers() error {
	nsKey := func(obj any) {
		k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		p.enqueue(k, err == nil)
	}
	regs := []struct {
		inf jobs.Objects
		h   cache.ResourceEventHandlerFuncs
	}{
		{p.nsInf, cache.ResourceEventHandlerFuncs{AddFunc: nsKey, UpdateFunc: func(_, obj any) { nsKey(obj) }, DeleteFunc: nsKey}},
		{p.jobInf, cache.ResourceEventHandlerFuncs{
			AddFunc: p.onJob,
			UpdateFunc: func(old, obj any) {
				if p.leading.Load() {
					p.metrics.CountFailed(string(jobs.KindProbe), old, obj)
				}
				p.onJob(obj)
			},
			DeleteFunc: p.onJob,
		}},
		{p.cmInf, cache.ResourceEventHandlerFuncs{UpdateFunc: p.onMembership, DeleteFunc: func(obj any) { p.onMembership(obj, nil) }}},
	}
	for _, r := range regs {
		if _, err := r.inf.AddEventHandler(r.h); err != nil {
			return err
		}
	}
	return nil
}

// onJob: only a finished Job changes anything: the history, or its shard's next Job. Its
// namespaces are looked at again: one that moved to another shard while it ran joins that
// shard now.
func (p *Controller) onJob(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	j, ok := obj.(*batchv1.Job)
	if !ok || !jobs.Finished(j) {
		return
	}
	if i, isShard := shardOfTarget(jobTarget(j)); isShard && len(jobs.ReadFacts(j).Namespaces) > 0 {
		p.queue.Add(shardKey(i))
	}
	for _, ns := range p.covers(j) {
		p.queue.Add(ns)
	}
}
