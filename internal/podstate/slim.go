package podstate

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Slim copies a pod's identity (name, namespace, UID, resourceVersion) and what
// CrashLoopBackOff and PodBackOff read, and nothing else: a cache of many pods keeps a fraction of what the
// API sent (no managedFields, env, volumes, probes, images or resources). A field
// CrashLoopBackOff starts to read must be kept here too; TestSlimKeepsCrashLoop fails
// otherwise. Callers that read more (the reaper's rules) add their fields to the copy.
func Slim(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			RestartPolicy:  p.Spec.RestartPolicy,
			Containers:     slimContainers(p.Spec.Containers),
			InitContainers: slimContainers(p.Spec.InitContainers),
		},
		Status: corev1.PodStatus{
			Phase:                 p.Status.Phase,
			ContainerStatuses:     slimStatuses(p.Status.ContainerStatuses),
			InitContainerStatuses: slimStatuses(p.Status.InitContainerStatuses),
		},
	}
}

// Transform is Slim as an informer's transform (SetTransform): pods are slimmed before they
// are cached, anything else (a tombstone) passes unchanged.
func Transform(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return Slim(p), nil
	}
	return obj, nil
}

// slimContainers keeps each container's name and restart policy (a sidecar's Always).
func slimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = corev1.Container{Name: cs[i].Name, RestartPolicy: cs[i].RestartPolicy}
	}
	return out
}

// slimStatuses keeps each status's name, state (with the waiting message PodBackOff reads),
// last termination (its finish time) and restart count.
func slimStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	if ss == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(ss))
	for i := range ss {
		out[i] = corev1.ContainerStatus{Name: ss[i].Name, State: ss[i].State,
			LastTerminationState: ss[i].LastTerminationState, RestartCount: ss[i].RestartCount}
	}
	return out
}
