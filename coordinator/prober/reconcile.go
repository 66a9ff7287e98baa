package prober

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
)

// input reads the caches for one namespace.
func (p *Controller) input(ns string) (ProbeInput, error) {
	in := ProbeInput{Now: p.now()}
	obj, _, err := p.nsInf.GetIndexer().GetByKey(ns)
	if err != nil {
		return in, err
	}
	if n, ok := obj.(*corev1.Namespace); ok {
		in.Watched = n.DeletionTimestamp == nil && n.Status.Phase != corev1.NamespaceTerminating && p.selected(n)
	}
	in.Cluster, in.ClusterPending = p.clusterFor(ns)
	in.StandAside = p.standingAside()
	p.mu.Lock()
	_, in.Probed = p.next[ns]
	p.mu.Unlock()
	return in, nil
}

// Reconcile handles one queue key: a shard ("shard:<i>") or a namespace.
func (p *Controller) Reconcile(ctx context.Context, key string) error {
	if i, ok := parseShardKey(key); ok {
		return p.reconcileShard(ctx, i)
	}
	if key == standAsideKey {
		p.reconcileStandAside()
		return nil
	}
	return p.reconcileNamespace(ctx, key)
}

// reconcileNamespace decides whether ns is probed (DecideProbe), keeps its membership, and
// queues its shard, whose turn brings the change to the shard's running Job or launches one.
func (p *Controller) reconcileNamespace(ctx context.Context, ns string) error {
	// Probe Jobs of one namespace alone (a manual one, or from before shards) keep their limits.
	if err := p.cleanHistory(ctx, ns); err != nil {
		p.log.WithError(err).WithField("namespace", ns).Warn("Could not remove old probe Jobs; will retry.")
	}
	in, err := p.input(ns)
	if err != nil {
		return err
	}
	action, why := DecideProbe(in)
	log := p.log.WithFields(logrus.Fields{"namespace": ns, "action": string(action)})
	switch action {
	case ProbeForget:
		p.forget(ns, in.Watched, why, log)
		return nil
	case ProbeDeferred:
		p.queue.AddAfter(ns, time.Second)
		return nil
	case ProbeFirst:
		p.startProbing(ns, in.Now, why, log)
	}
	p.decided(ns)
	// The shard is a key of its own: its turn adds the namespace to the running Job's
	// membership, or launches the shard's Job once a member is due.
	p.queue.Add(shardKey(ShardOf(ns, p.noteShardCount())))
	return nil
}

// forget stops probing ns: its schedule and series go; a namespace still watched (it only
// stopped being probe-able) is counted as paused.
func (p *Controller) forget(ns string, watched bool, why string, log logrus.FieldLogger) {
	p.mu.Lock()
	_, had := p.next[ns]
	delete(p.next, ns)
	delete(p.throttled, ns)
	delete(p.shootNotes, ns)
	delete(p.reportedProbe, ns)
	p.metrics.ProbeLastProbe.DeleteLabelValues(ns)
	p.metrics.ProbeMeltdown.DeleteLabelValues(ns)
	if watched {
		p.paused.Insert(ns)
	} else {
		p.paused.Delete(ns)
	}
	p.countNamespaces()
	p.mu.Unlock()
	p.decided(ns)
	if had {
		log.WithField("reason", why).Info("Not probing this namespace any more: its shard's running probe Job stops probing it at once.")
		// Its shard takes it out of the running Job's membership (every shard looks again
		// when the count changed).
		p.queue.Add(shardKey(ShardOf(ns, p.noteShardCount())))
	}
}

// startProbing schedules the first probe of a namespace that became probe-able, initialDelay
// after now.
func (p *Controller) startProbing(ns string, now time.Time, why string, log logrus.FieldLogger) {
	delay := p.cfg.Delay()
	p.mu.Lock()
	p.next[ns] = now.Add(delay)
	if at, ok := p.reportedProbe[ns]; ok { // a report read before it was probed: see reportedProbe
		p.metrics.ProbeLastProbe.WithLabelValues(ns).Set(float64(at.Unix()))
	}
	p.paused.Delete(ns)
	p.countNamespaces()
	p.mu.Unlock()
	log.WithFields(logrus.Fields{"reason": why, "firstProbeIn": delay.String()}).Info("Probing this namespace.")
}

// countNamespaces sets the probed and paused namespaces' gauges (p.mu held).
func (p *Controller) countNamespaces() {
	p.metrics.ProbeNamespaces.WithLabelValues("probed").Set(float64(len(p.next)))
	p.metrics.ProbeNamespaces.WithLabelValues("paused").Set(float64(p.paused.Len()))
}

// decided notes that ns was decided about since this replica began to lead; when every
// namespace listed then has been, the shards' memberships are complete, and each shard looks
// at its running Job's membership again.
func (p *Controller) decided(ns string) {
	p.mu.Lock()
	delete(p.starting, ns)
	settle := !p.settled && len(p.starting) == 0
	if settle {
		p.settled = true
	}
	shards := p.shards
	p.mu.Unlock()
	if settle {
		for i := range shards {
			p.queue.Add(shardKey(i))
		}
	}
}

// membershipsComplete reports whether the shards' memberships are complete: every namespace
// listed when this replica began to lead has been decided about (decided).
func (p *Controller) membershipsComplete() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settled
}
