//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every example and both kustomizations must be accepted by a real API server (server-side
// dry run: admission, validation, defaulting; nothing is changed in the cluster). The
// examples name the release image; on this cluster depwatch runs localhost/depwatch:dev, and
// its admission policy admits a Job as depwatch-weeder or depwatch-probe only with the image
// depwatch is installed with (security_admission_test.go checks that the release image is
// refused here). So they are applied with that one change, as a user sets the image of their
// installation: kustomize's images.
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
			dir := t.TempDir()
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(f)
			kustomization := fmt.Sprintf("resources: [%s]\nimages:\n- name: ghcr.io/depwatch/depwatch\n  newName: localhost/depwatch\n  newTag: dev\n", name)
			for file, content := range map[string][]byte{name: data, "kustomization.yaml": []byte(kustomization)} {
				if err := os.WriteFile(filepath.Join(dir, file), content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if out, err := kubectl(t, "apply", "--dry-run=server", "-k", dir); err != nil {
				t.Errorf("kubectl apply --dry-run=server of %s with the local image: %v\n%s", name, err, out)
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
