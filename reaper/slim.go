package reaper

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/internal/podstate"
)

// slimPod is podstate.Slim (identity and what the crash-loop test reads) plus what the
// filters, the other rules, sorting, REAP_COOLDOWN and the delete/evict call read, so a kept
// pod (a cycle's match, a WATCH informer's cache entry) costs a fraction of the object the API
// sent: no managedFields, env, volumes, probes, images or resources.
func slimPod(p *corev1.Pod) *corev1.Pod {
	out := podstate.Slim(p)
	out.Labels, out.Annotations, out.OwnerReferences = p.Labels, p.Annotations, p.OwnerReferences
	out.CreationTimestamp = p.CreationTimestamp
	out.Spec.NodeName = p.Spec.NodeName
	out.Status.Reason, out.Status.StartTime, out.Status.Conditions = p.Status.Reason, p.Status.StartTime, p.Status.Conditions
	return out
}
