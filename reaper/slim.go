package reaper

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// slimPod copies only what the filters, rules, sorting, REAP_COOLDOWN and the delete/evict
// call read, so a kept pod (a cycle's match, a WATCH informer's cache entry) costs a fraction
// of the object the API sent: no managedFields, env, volumes, probes, images or resources.
// The pod's containers keep their names and restart policies (CrashLoopBackOff's restart
// test), their statuses keep state and restart count.
func slimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, Annotations: p.Annotations, OwnerReferences: p.OwnerReferences,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{
			RestartPolicy:  p.Spec.RestartPolicy,
			NodeName:       p.Spec.NodeName,
			Containers:     slimContainers(p.Spec.Containers),
			InitContainers: slimContainers(p.Spec.InitContainers),
		},
		Status: corev1.PodStatus{
			Phase: p.Status.Phase, Reason: p.Status.Reason, StartTime: p.Status.StartTime,
			Conditions:            p.Status.Conditions,
			ContainerStatuses:     slimStatuses(p.Status.ContainerStatuses),
			InitContainerStatuses: slimStatuses(p.Status.InitContainerStatuses),
		},
	}
	return out
}

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

func slimStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	if ss == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(ss))
	for i := range ss {
		out[i] = corev1.ContainerStatus{Name: ss[i].Name, State: ss[i].State, RestartCount: ss[i].RestartCount}
	}
	return out
}
