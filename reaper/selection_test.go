package reaper

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPodFilterAdmits: the client-side twin of the server-side filters, plus annotations and
// terminating pods.
func TestPodFilterAdmits(t *testing.T) {
	o := mustOptions(t, map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff",
		"NAMESPACE":          "shoot", "NODE_NAME": "n1",
		"LABEL_SELECTORS":   `["app=a","app=b"]`,
		"EXCLUDE_LABEL_KEY": "keep", "EXCLUDE_LABEL_VALUES": "true",
		"REQUIRE_ANNOTATION_KEY": "reap", "REQUIRE_ANNOTATION_VALUES": "yes,ok",
	})
	f := o
	ok := func(opts ...podOpt) *corev1.Pod {
		base := []podOpt{withAnnotation("reap", "yes"), func(p *corev1.Pod) { p.Spec.NodeName = "n1" }}
		return newPod("shoot", "p", append(base, opts...)...)
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"first selector", ok(withLabel("app", "a")), true},
		{"second selector (OR)", ok(withLabel("app", "b")), true},
		{"no selector", ok(withLabel("app", "c")), false},
		{"excluded label", ok(withLabel("app", "a"), withLabel("keep", "true")), false},
		{"excluded label other value", ok(withLabel("app", "a"), withLabel("keep", "false")), true},
		{"other namespace", func() *corev1.Pod { p := ok(withLabel("app", "a")); p.Namespace = "x"; return p }(), false},
		{"other node", ok(withLabel("app", "a"), func(p *corev1.Pod) { p.Spec.NodeName = "n2" }), false},
		{"annotation other value", ok(withLabel("app", "a"), withAnnotation("reap", "no")), false},
		{"annotation missing", newPod("shoot", "p", withLabel("app", "a"), func(p *corev1.Pod) { p.Spec.NodeName = "n1" }), false},
		{"terminating", ok(withLabel("app", "a"), terminating), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := f.admits(tt.pod); got != tt.want {
				t.Errorf("admits = %v, want %v", got, tt.want)
			}
		})
	}
}
