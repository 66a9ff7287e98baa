package reaper

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// decisionEnvs are the settings of TestSlimPodKeepsEveryDecision: every rule, and the filters.
var decisionEnvs = []map[string]string{
	{"CONTAINER_STATUSES": "CrashLoopBackOff"},
	{"CONTAINER_STATUSES": "Completed,OOMKilled,Error,"},
	{"POD_STATUSES": "Evicted"},
	{"POD_STATUS_PHASES": "Failed,Succeeded,Pending"},
	{"MAX_DURATION": "1h"},
	{"MAX_UNREADY": "10m"},
	{"CHAOS_CHANCE": "1", "REQUIRE_ANNOTATION_KEY": "x", "REQUIRE_ANNOTATION_VALUES": "y"},
	{"CHAOS_CHANCE": "1", "EXCLUDE_LABEL_KEY": "keep", "EXCLUDE_LABEL_VALUES": "true", "NODE_NAME": "n1"},
	{"CHAOS_CHANCE": "1", "EXCLUDE_LABEL_KEY": "role", "EXCLUDE_LABEL_VALUES": "apiserver", "NODE_NAME": "node-1"},
}

// TestSlimPodKeepsEveryDecision: a slimmed pod gets the same answer as the full one from every
// rule, the filters and the cooldown's owner, so keeping only slim pods changes no pick
// (podstate's own test holds the crash-loop test to podstate.Slim).
func TestSlimPodKeepsEveryDecision(t *testing.T) {
	pods := differentialPods()
	owned := newPod("ns", "owned", crashLooping)
	owned.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}
	owned.Spec.NodeName = "n1"
	owned.Spec.Containers = []corev1.Container{{Name: "app", Image: "big", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}
	owned.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	pods = append(pods, owned, realisticPod(0))
	for _, env := range decisionEnvs {
		o := mustOptions(t, env)
		s := o
		for _, p := range pods {
			slim := slimPod(p)
			_, full := s.evaluate(p, t0)
			_, thin := s.evaluate(slim, t0)
			if full != thin {
				t.Errorf("%v, pod %s: full pod picked %v, slim pod %v", env, p.Name, full, thin)
			}
		}
	}
	for _, p := range pods {
		slim := slimPod(p)
		if ownerOf(p) != ownerOf(slim) || slim.UID != p.UID || slim.ResourceVersion != p.ResourceVersion {
			t.Errorf("pod %s: slim copy differs in owner or identity", p.Name)
		}
	}
	if s := slimPod(owned); s.ManagedFields != nil || s.Spec.Containers[0].Env != nil || s.Spec.Containers[0].Image != "" {
		t.Errorf("slim pod kept what no decision reads: %+v", s)
	}
}
