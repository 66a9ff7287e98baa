//go:build e2e

// Package e2e runs depwatch on the real local cluster (make cluster-up): a real kubelet, the
// real Job controller and real CrashLoopBackOff. Each test makes its own namespace and
// removes it. Users drive depwatch with kubectl, so the tests do too.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	depwatchImage = "localhost/depwatch:dev"
	testappImage  = "localhost/depwatch-testapp:dev"
	// The local cluster has no kube-proxy: pods that call the API server use the host's
	// network and reach it on loopback.
	apiServerHost = "127.0.0.1"
	apiServerPort = "6443"
)

var (
	kube       kubernetes.Interface
	kubeconfig string
	repoRoot   string
)

func TestMain(m *testing.M) {
	kubeconfig = os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "e2e: KUBECONFIG is not set; run `make cluster-up` and `make e2e`")
		os.Exit(1)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: loading %s: %v\n", kubeconfig, err)
		os.Exit(1)
	}
	cfg.WarningHandler = rest.NoWarnings{} // pod-security warnings about the local overlay are expected
	// Tests poll every 100 ms from many goroutines: client-side throttling would skew what
	// they measure.
	cfg.QPS, cfg.Burst = 200, 400
	kube = kubernetes.NewForConfigOrDie(cfg)
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: the cluster in %s is not reachable (is it up? make cluster-up): %v\n", kubeconfig, err)
		os.Exit(1)
	}
	wd, _ := os.Getwd()
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	code := m.Run()
	removeCoordinator()
	os.Exit(code)
}

// newNamespace creates a namespace for one test and deletes it when the test ends.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("e2e-%s-%s", prefix, rand.String(5))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"depwatch.io/e2e": "true"}}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, name)
		}
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// Pods need the namespace's default service account before they can be created.
	waitFor(t, 30*time.Second, "the default service account of "+name, func() (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(name).Get(context.Background(), "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	return name
}

// dumpNamespace logs what a failed test left behind, so CI output explains the failure.
func dumpNamespace(t *testing.T, ns string) {
	for _, args := range [][]string{
		{"get", "pods,jobs,events", "-o", "wide"},
		{"logs", "-l", "app.kubernetes.io/name=depwatch", "--tail=50", "--prefix"},
	} {
		out, _ := kubectl(t, append([]string{"-n", ns}, args...)...)
		t.Logf("kubectl -n %s %s:\n%s", ns, strings.Join(args, " "), out)
	}
}

// kubectl runs the real kubectl against the test cluster and returns its combined output.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runKubectl(args...)
}

func runKubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// waitFor polls cond every 100ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logLine is one JSON line of depwatch's Logrus-format log.
type logLine map[string]any

func (l logLine) str(key string) string { s, _ := l[key].(string); return s }

// parseLogLines keeps the JSON lines of a log and ignores anything else.
func parseLogLines(out string) []logLine {
	var lines []logLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			lines = append(lines, l)
		}
	}
	return lines
}
