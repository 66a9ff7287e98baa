package roles

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/depwatch/depwatch/jobs"
)

func TestResolveTemplateTakesTheImageFromTheCoordinatorPod(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "depwatch", Name: "coord-1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Image: "other"},
			{Name: "coordinator", Image: "localhost/depwatch:dev", ImagePullPolicy: corev1.PullNever},
		}},
	}
	env := map[string]string{"POD_NAME": "coord-1", "POD_NAMESPACE": "depwatch"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tpl, err := ResolveTemplate(context.Background(), fake.NewClientset(pod), Coordinator, jobs.Template{}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Image != "localhost/depwatch:dev" || tpl.ImagePullPolicy != corev1.PullNever || tpl.Namespace != "depwatch" {
		t.Errorf("template = %+v", tpl)
	}
	// Outside a pod the config must name the image.
	none := func(string) (string, bool) { return "", false }
	if _, err := ResolveTemplate(context.Background(), fake.NewClientset(), Coordinator, jobs.Template{}, none); err != ErrImageRequired {
		t.Errorf("outside a pod: %v", err)
	}
	tpl, err = ResolveTemplate(context.Background(), fake.NewClientset(), Coordinator, jobs.Template{Image: "x", Namespace: "ops"}, none)
	if err != nil || tpl.Image != "x" || tpl.Namespace != "ops" {
		t.Errorf("explicit: %+v %v", tpl, err)
	}
}
