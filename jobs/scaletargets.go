package jobs

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/depwatch/depwatch/probe"
)

// The probe's admission policy on names (manifests/admission/probe-targets.yaml,
// depwatch-probe-targets) admits its writes only to the dependents a prober config lists. It
// reads them from this ConfigMap in the Jobs' namespace, to which the coordinator adds its
// config's each time it takes the lead (WriteScaleTargets).
const (
	// ScaleTargetsName is the ConfigMap the policy's binding names (paramRef). Fixed, as the
	// membership ConfigMaps' prefix is: the coordinator-configmaps policy names it too.
	ScaleTargetsName = "depwatch-scale-targets"
	// KindScaleTargets is its depwatch.io/kind label, which the coordinator-configmaps policy
	// requires of it.
	KindScaleTargets = "scale-targets"
)

// ScaleTargetKey is the key of one dependent in the ConfigMap: <Kind>.<name> (a kind has no
// dot, so the key is unambiguous); the policy builds the same from the request.
func ScaleTargetKey(kind, name string) string { return kind + "." + name }

// ScaleTargetsData is the ConfigMap's data for the dependents: each one's key and its
// apiVersion (the policy checks the group). No dependents, no data: nothing is admitted.
func ScaleTargetsData(deps []probe.DependentResource) map[string]string {
	data := make(map[string]string, len(deps))
	for _, d := range deps {
		data[ScaleTargetKey(d.Ref.Kind, d.Ref.Name)] = d.Ref.APIVersion
	}
	return data
}

// ScaleTargets is the ConfigMap that lists deps for the probe's admission policy, as this
// config would write it (WriteScaleTargets keeps the names already listed).
func (t Template) ScaleTargets(deps []probe.DependentResource) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ScaleTargetsName,
			Namespace: t.Namespace,
			Labels:    map[string]string{LabelAppName: AppName, LabelManagedBy: managedBy, LabelKind: KindScaleTargets},
		},
		Data: ScaleTargetsData(deps),
	}
}

// UnionScaleTargets is the parameters once a config's dependents (deps, ScaleTargetsData) are
// written over those listed: every name stays listed, and deps' are added. The parameters only
// grow, because a probe run lives longer than the config that launched it: a Job launched
// before a restart with a new config, or one a person runs by hand from an earlier config for
// recovery, must still be admitted to scale its dependents back up. Deleting the ConfigMap
// (and restarting the coordinator, which writes it when it takes the lead) drops the names no
// config lists any more.
func UnionScaleTargets(listed, deps map[string]string) map[string]string {
	return merged(listed, deps)
}

// WriteScaleTargets adds cm's dependents to the cluster's ConfigMap (UnionScaleTargets), or
// creates it with them: the ConfigMap is listed by name (the coordinator's Role lists
// ConfigMaps in the Jobs' namespace, for the shards' membership, and gets none) and updated
// at the resourceVersion read, again on a conflict or a create that lost a race.
func WriteScaleTargets(ctx context.Context, client kubernetes.Interface, cm *corev1.ConfigMap) error {
	cms := client.CoreV1().ConfigMaps(cm.Namespace)
	raced := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultRetry, raced, func() error {
		list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", cm.Name).String()})
		if err != nil {
			return err
		}
		for _, cur := range list.Items {
			if cur.Name != cm.Name {
				continue
			}
			next := cm.DeepCopy()
			next.ResourceVersion = cur.ResourceVersion
			next.Data = UnionScaleTargets(cur.Data, cm.Data)
			if maps.Equal(cur.Data, next.Data) && maps.Equal(cur.Labels, next.Labels) {
				return nil
			}
			_, err = cms.Update(ctx, next, metav1.UpdateOptions{})
			return err
		}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the probe policy's parameters, ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}
