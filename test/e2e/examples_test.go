//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every example and both kustomizations must be accepted by a real API server as they are
// (server-side dry run: admission, validation, defaulting), without changing anything.
func TestExamplesAndManifestsApplyCleanlyOnTheServer(t *testing.T) {
	parallel(t)
	ensureCoordinator(t) // the examples live in namespace depwatch
	// reaper-namespaced.yaml targets a namespace of its own.
	myApp := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "my-app"}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), myApp, metav1.CreateOptions{}); err == nil {
		t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), "my-app", metav1.DeleteOptions{}) })
	} else if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace my-app: %v", err)
	}

	files, err := filepath.Glob(filepath.Join(repoRoot, "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if out, err := kubectl(t, "apply", "--dry-run=server", "-f", f); err != nil {
				t.Errorf("kubectl apply --dry-run=server -f %s: %v\n%s", filepath.Base(f), err, out)
			}
		})
	}
	for _, k := range []string{"manifests", "manifests/overlays/local"} {
		t.Run(k, func(t *testing.T) {
			if out, err := kubectl(t, "apply", "--dry-run=server", "-k", filepath.Join(repoRoot, k)); err != nil {
				t.Errorf("kubectl apply --dry-run=server -k %s: %v\n%s", k, err, out)
			}
		})
	}
}
