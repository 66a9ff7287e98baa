package ctrl

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Terminated is the termination state of pod's container named name, or nil while it has not
// ended: a finished run's report is its termination message.
func Terminated(pod *corev1.Pod, name string) *corev1.ContainerStateTerminated {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name {
			return cs.State.Terminated
		}
	}
	return nil
}

// Reports remembers the finished Job pods whose report was read, so that a pod's later
// updates do not count it again; a deleted pod is forgotten. The zero value is ready to use.
type Reports struct {
	mu   sync.Mutex
	read map[types.UID]bool
}

// First says whether uid's report is read now for the first time, and marks it read.
func (r *Reports) First(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.read[uid] {
		return false
	}
	if r.read == nil {
		r.read = map[types.UID]bool{}
	}
	r.read[uid] = true
	return true
}

// Forget is a pod informer's DeleteFunc: the deleted pod (or its tombstone) is forgotten.
func (r *Reports) Forget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		r.mu.Lock()
		delete(r.read, pod.UID)
		r.mu.Unlock()
	}
}
