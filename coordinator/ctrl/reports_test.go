package ctrl

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestAReportIsReadOncePerPodUntilThePodIsDeleted(t *testing.T) {
	var r Reports
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a"}}
	if !r.First("a") || r.First("a") {
		t.Fatal("the first read must count and the pod's next update must not")
	}
	r.Forget(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: pod}) // a missed delete's tombstone
	if !r.First("a") {
		t.Error("a deleted pod must be forgotten")
	}
}

func TestTerminatedIsTheNamedContainersEnd(t *testing.T) {
	end := &corev1.ContainerStateTerminated{Message: "report"}
	pod := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
		{Name: "weeder", State: corev1.ContainerState{Terminated: end}},
	}}}
	if Terminated(pod, "weeder") != end || Terminated(pod, "probe") != nil {
		t.Error("Terminated must give the named container's end, and nil for another name")
	}
}
