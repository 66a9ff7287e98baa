package rights

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// InNamespace is a recorder that writes only the Events of objects in namespace, where a
// service account that may not create Events elsewhere (gardenlet's dependency-watchdog
// RBAC: Events in garden, for the Lease) may create them; the others are dropped, so no
// request is refused. What they would have said is in the coordinator's log lines.
func InNamespace(r record.EventRecorder, namespace string) record.EventRecorder {
	return namespacedRecorder{r: r, namespace: namespace}
}

type namespacedRecorder struct {
	r         record.EventRecorder
	namespace string
}

func (n namespacedRecorder) allowed(obj runtime.Object) bool {
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		return ref.Namespace == n.namespace
	}
	m, err := meta.Accessor(obj)
	return err == nil && m.GetNamespace() == n.namespace
}

func (n namespacedRecorder) Event(obj runtime.Object, eventType, reason, message string) {
	if n.allowed(obj) {
		n.r.Event(obj, eventType, reason, message)
	}
}

func (n namespacedRecorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	if n.allowed(obj) {
		n.r.Eventf(obj, eventType, reason, format, args...)
	}
}

func (n namespacedRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventType, reason, format string, args ...any) {
	if n.allowed(obj) {
		n.r.AnnotatedEventf(obj, annotations, eventType, reason, format, args...)
	}
}
