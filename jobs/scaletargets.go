package jobs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/depwatch/depwatch/probe"
)

// The probe's admission policy (manifests/admission/probe-scales.yaml, depwatch-probe-targets)
// admits its writes only to the dependents the prober config lists. It reads them from this
// ConfigMap in the Jobs' namespace, which the coordinator writes from its config.
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

// ScaleTargets is the ConfigMap that lists deps for the probe's admission policy.
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

// WriteScaleTargets makes the cluster's ConfigMap say cm: an update without a precondition
// (the coordinator is its only writer, and its config is the truth), or a create where it is
// missing. Its Role may update and create ConfigMaps but not get them, which this needs not.
func WriteScaleTargets(ctx context.Context, client kubernetes.Interface, cm *corev1.ConfigMap) error {
	_, err := client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing the probe policy's parameters, ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}
