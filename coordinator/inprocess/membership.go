package inprocess

import (
	"context"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/probe"
)

// followMembership is a probe run's membership source (probe.Deps.FollowMembership): the
// shard's ConfigMap as this executor keeps it, its current content first, then each change,
// until ctx ends. A content that cannot be read is logged and the last good one stays, as
// with a ConfigMap in the cluster.
func (e *Executor) followMembership(ctx context.Context, namespace, name string, apply func(probe.Membership), log logrus.FieldLogger) error {
	take := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != name {
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
	v := e.objects.view(kindConfigMap, namespace, "")
	if _, err := v.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: take, UpdateFunc: func(_, obj any) { take(obj) }}); err != nil {
		return err
	}
	v.RunWithContext(ctx) // until the run ends (the executor stopping ends it too)
	return nil
}
