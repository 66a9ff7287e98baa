package prober

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// clusterWatch is the dynamic informer of Gardener's Cluster resources, started when
// discovery shows the kind and stopped when it disappears.
type clusterWatch struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
}

// WatchClusters looks for Gardener's Cluster kind now and every clusterDiscoveryInterval:
// when it appears the Cluster informer starts, when it goes the informer stops; either way
// every namespace is reconciled again.
func (p *Controller) WatchClusters(ctx context.Context) {
	wait.UntilWithContext(ctx, p.checkClusterKind, p.cfg.DiscoveryInterval())
	p.mu.Lock()
	if p.cluster != nil {
		p.cluster.cancel()
		p.cluster = nil
	}
	p.mu.Unlock()
	p.clusterW.Wait()
}

// checkClusterKind asks discovery whether extensions.gardener.cloud/v1alpha1 serves clusters
// (never without a dynamic client to read them), and starts or stops the Cluster informer.
func (p *Controller) checkClusterKind(ctx context.Context) {
	var installed bool
	var err error
	if p.dyn != nil {
		installed, err = discovery.IsResourceEnabled(p.client.Discovery(), ClusterGVR)
	}
	if err != nil {
		p.log.WithError(err).Warn("Cannot tell whether Gardener's Cluster resources exist; keeping the current view.")
		return
	}
	p.mu.Lock()
	running := p.cluster != nil
	switch {
	case installed && !running:
		cctx, cancel := context.WithCancel(ctx)
		inf := dynamicinformer.NewFilteredDynamicInformer(p.dyn, ClusterGVR, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
		_ = inf.SetTransform(jobs.StripManagedFields)
		// A Cluster is named after its namespace: its key is the namespace's.
		queue := func(obj any) { p.queueKey(obj, true) }
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: queue, UpdateFunc: func(_, obj any) { queue(obj) }, DeleteFunc: queue})
		p.cluster = &clusterWatch{inf: inf, cancel: cancel}
		p.clusterW.Go(func() { inf.RunWithContext(cctx) })
		p.log.Info("Gardener Cluster resources found: watching them; shoots that are hibernated, waking up, being created, restored, migrated or deleted, or have no workers, are not probed; a shoot's nodeMonitorGracePeriod and per-pool nodeConditions apply to its probes.")
	case !installed && running:
		p.cluster.cancel()
		p.cluster = nil
		p.log.Info("Gardener Cluster resources are gone: probing by namespace labels alone.")
	default:
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.enqueueAll()
}

// clusterFor returns the namespace's Cluster (nil if none or the kind is not installed) and
// whether the Cluster cache is still syncing.
func (p *Controller) clusterFor(ns string) (*unstructured.Unstructured, bool) {
	p.mu.Lock()
	cw := p.cluster
	p.mu.Unlock()
	if cw == nil {
		return nil, false
	}
	if !cw.inf.HasSynced() {
		return nil, true
	}
	obj, exists, err := cw.inf.GetIndexer().GetByKey(ns)
	if err != nil || !exists {
		return nil, false
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u, false
}
