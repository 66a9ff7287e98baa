package jobs

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/probe"
)

// AnnotationMembership names, on a shard's probe Job, the ConfigMap (in the Job's namespace)
// whose membership the Job follows while it runs.
const AnnotationMembership = "depwatch.io/membership"

// MembershipName is the name of a probe shard's membership ConfigMap: the shard's target
// (its Jobs' depwatch.io/namespace) under a fixed prefix, so it is found without a list.
func MembershipName(target string) string { return "depwatch-probe-" + target }

// Memberships are the probe shards' memberships in one namespace, each the one a running run
// of its shard follows (a shard's probe Job runs longer than its members stay the same). The
// Job executor keeps each in a ConfigMap that the Job's pod watches (probe.ParseMembership);
// the in-process executor hands each change to the shard's run. The coordinator runs it
// (RunWithContext) and waits for it (HasSynced).
type Memberships interface {
	Follower
	// Get is shard target's membership now; false: none (or, in a ConfigMap, unreadable).
	Get(target string) (probe.Membership, bool)
	// Set makes shard target's membership m; changed is false when it was m already.
	Set(ctx context.Context, target string, m probe.Membership) (changed bool, err error)
	// Delete removes shard target's membership (none is fine).
	Delete(ctx context.Context, target string) error
}

// Departed is what is in before and not in after: the namespaces that left a membership.
func Departed(before, after []string) []string {
	var out []string
	for _, ns := range before {
		if !slices.Contains(after, ns) {
			out = append(out, ns)
		}
	}
	return out
}

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

// configMaps are the Job executor's memberships: ConfigMaps, read from an informer's cache.
type configMaps struct {
	Follower
	cms       cache.Indexer
	exec      *clusterExecutor
	namespace string
}

// Memberships follows the shards' membership ConfigMaps in namespace; left is told the
// namespaces that leave one (it changed, or went).
func (e *clusterExecutor) Memberships(namespace string, left func(namespaces []string)) Memberships {
	f := e.informers(namespace)
	inf := f.Core().V1().ConfigMaps().Informer()
	names := func(obj any) []string {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Labels[LabelKind] == string(KindProbe) {
			m, _ := probe.ParseMembership(cm.Data)
			return m.Namespaces
		}
		return nil
	}
	tell := func(gone []string) {
		if len(gone) > 0 {
			left(gone)
		}
	}
	reg, _ := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) { tell(Departed(names(old), names(obj))) },
		DeleteFunc: func(obj any) { tell(names(obj)) },
	})
	return &configMaps{Follower: shared{f, []cache.ResourceEventHandlerRegistration{reg}}, cms: inf.GetIndexer(), exec: e, namespace: namespace}
}

// GetIndexer is the cache of the memberships' ConfigMaps, as an informer's.
func (c *configMaps) GetIndexer() cache.Indexer { return c.cms }

func (c *configMaps) cached(target string) *corev1.ConfigMap {
	obj, exists, err := c.cms.GetByKey(c.namespace + "/" + MembershipName(target))
	if err != nil || !exists {
		return nil
	}
	cm, _ := obj.(*corev1.ConfigMap)
	return cm
}

func (c *configMaps) Get(target string) (probe.Membership, bool) {
	cm := c.cached(target)
	if cm == nil {
		return probe.Membership{}, false
	}
	m, err := probe.ParseMembership(cm.Data)
	return m, err == nil
}

// Set creates the ConfigMap when the cache has none, and updates it when it says something
// else.
func (c *configMaps) Set(ctx context.Context, target string, m probe.Membership) (bool, error) {
	want := Template{Namespace: c.namespace}.Membership(target, m)
	cms := c.exec.client.CoreV1().ConfigMaps(c.namespace)
	current := c.cached(target)
	if current == nil {
		_, err := cms.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = fmt.Errorf("it exists but is not in the cache yet; will retry: %w", err)
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
	if _, err := cms.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("updating the membership ConfigMap %s/%s: %w", want.Namespace, want.Name, err)
	}
	return true, nil
}

func (c *configMaps) Delete(ctx context.Context, target string) error {
	if c.cached(target) == nil {
		return nil
	}
	name := MembershipName(target)
	err := c.exec.client.CoreV1().ConfigMaps(c.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the membership ConfigMap %s/%s: %w", c.namespace, name, err)
	}
	return nil
}
