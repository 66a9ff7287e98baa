package inprocess

import (
	"context"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/depwatch/depwatch/probe"
)

// followMembership is a probe run's membership source (probe.Deps.FollowMembership): the
// shard's ConfigMap as this executor keeps it, its current content first, then each change,
// until ctx ends. A content that cannot be read is logged and the last good one stays, as
// with a ConfigMap in the cluster.
func (e *Executor) followMembership(ctx context.Context, namespace, name string, apply func(probe.Membership), log logrus.FieldLogger) error {
	objs, rv := e.store.list(kindConfigMap, namespace, labels.Everything())
	w, err := e.store.watch(kindConfigMap, namespace, labels.Everything(), formatRV(rv))
	if err != nil {
		return err
	}
	defer w.Stop()
	take := func(cm *corev1.ConfigMap) {
		if cm.Name != name {
			return
		}
		m, err := probe.ParseMembership(cm.Data)
		if err != nil {
			log.WithFields(logrus.Fields{"configmap": namespace + "/" + name, "action": "none", "reason": "unreadable membership"}).
				Errorf("The shard's membership cannot be read; the run keeps probing what it probed: %v.", err)
			return
		}
		apply(m)
	}
	for _, o := range objs {
		take(o.(*corev1.ConfigMap))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil // the executor stopped
			}
			if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				take(cm)
			}
		}
	}
}
