package jobs

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/probe"
)

// AnnotationMembership names, on a shard's probe Job, the ConfigMap (in the Job's namespace)
// whose membership the Job follows while it runs.
const AnnotationMembership = "depwatch.io/membership"

// MembershipName is the name of a probe shard's membership ConfigMap: the shard's target
// (its Jobs' depwatch.io/namespace) under a fixed prefix, so it is found without a list.
func MembershipName(target string) string { return "depwatch-probe-" + target }

// Membership is the ConfigMap that holds shard target's membership, labelled like the
// shard's Jobs so `kubectl get cm -l depwatch.io/kind=probe` lists every shard.
func (t Template) Membership(target string, m probe.Membership) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      MembershipName(target),
			Namespace: t.Namespace,
			Labels: map[string]string{
				LabelAppName: AppName, LabelManagedBy: managedBy,
				LabelKind: string(KindProbe), LabelNamespace: LabelValue(target),
			},
		},
		Data: m.Data(),
	}
}

// SyncMembership makes shard target's membership ConfigMap say m: created when current is
// nil, updated when it says something else, left alone when it says m. current is the
// ConfigMap as the caller's cache holds it.
func (l *Launcher) SyncMembership(ctx context.Context, target string, m probe.Membership, current *corev1.ConfigMap) (bool, error) {
	want := l.Template.Membership(target, m)
	if current == nil {
		err := l.Executor.CreateConfigMap(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating the membership ConfigMap %s/%s: it exists but is not in the cache yet; will retry: %w", want.Namespace, want.Name, err)
		}
		if err != nil {
			return false, fmt.Errorf("creating the membership ConfigMap %s/%s: %w", want.Namespace, want.Name, err)
		}
		return true, nil
	}
	if maps.Equal(current.Data, want.Data) {
		return false, nil
	}
	next := current.DeepCopy()
	next.Data = want.Data
	if err := l.Executor.UpdateConfigMap(ctx, next); err != nil {
		return false, fmt.Errorf("updating the membership ConfigMap %s/%s: %w", want.Namespace, want.Name, err)
	}
	return true, nil
}

// DeleteMembership deletes shard target's membership ConfigMap (gone already is fine).
func (l *Launcher) DeleteMembership(ctx context.Context, target string) error {
	name := MembershipName(target)
	err := l.Executor.DeleteConfigMap(ctx, l.Template.Namespace, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the membership ConfigMap %s/%s: %w", l.Template.Namespace, name, err)
	}
	return nil
}
