package ctrl

import "k8s.io/apimachinery/pkg/api/meta"

// StripManagedFields drops managedFields before objects are cached: no decision reads them,
// and on a seed they are a large share of every cached object.
func StripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}
