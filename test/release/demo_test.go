package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeKubectl records every call (with the KUBECONFIG it was given) and the objects applied
// from stdin; the cluster answers, and the demo's upstream never becomes ready, so the demo
// stops right after it installed depwatch and created its workload (or, with
// FAKE_HANG_UPSTREAM, waits there to be interrupted).
const fakeKubectl = `#!/usr/bin/env bash
echo "KUBECONFIG=${KUBECONFIG:-} $(basename "$0") $*" >>"$FAKE_LOG"
case "$*" in
  *"get --raw /readyz"*) exit 0 ;;
  *"config current-context"*) echo fake-context ;;
  *"config view"*) echo "$FAKE_SERVER" ;;
  "get namespace "*) exit 1 ;;
  *"apply -f -"*) cat >>"$FAKE_APPLIED" ;;
  *"rollout status deployment/upstream"*)
    if [[ -n ${FAKE_HANG_UPSTREAM:-} ]]; then touch "$FAKE_HANG_UPSTREAM"; sleep 60; fi
    echo "fake: the upstream never becomes ready" >&2; exit 1 ;;
esac
exit 0
`

type demoRun struct {
	out, calls, applied string
	err                 error
}

// runDemo runs hack/demo.sh with kubectl and helm faked, the local cluster's directory in a
// temporary one (no local cluster, no containerd), and KUBECONFIG exported to elsewhere.
func runDemo(t *testing.T, env []string, interrupt bool) (demoRun, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"kubectl", "helm"} {
		if err := os.WriteFile(filepath.Join(bin, n), []byte(fakeKubectl), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	clusterDir := filepath.Join(dir, "cluster")
	log, applied, hang := filepath.Join(dir, "calls"), filepath.Join(dir, "applied"), filepath.Join(dir, "hanging")
	cmd := exec.Command("./hack/demo.sh")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "CLUSTER_DIR="+clusterDir,
		"HELM="+filepath.Join(bin, "helm"), "KUBECONFIG=/elsewhere/exported-kubeconfig",
		"FAKE_LOG="+log, "FAKE_APPLIED="+applied)
	cmd.Env = append(cmd.Env, env...)
	if interrupt {
		cmd.Env = append(cmd.Env, "FAKE_HANG_UPSTREAM="+hang)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if interrupt {
		// Ctrl-C, as a terminal sends it: to the whole process group.
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(hang); err == nil {
				break
			}
			if time.Now().After(deadline) {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Fatalf("the demo never reached its workload's rollout:\n%s", out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	}
	err := cmd.Wait()
	calls, _ := os.ReadFile(log)
	app, _ := os.ReadFile(applied)
	return demoRun{out: out.String(), calls: string(calls), applied: string(app), err: err}, clusterDir
}

func (r demoRun) kubeconfigs() map[string]bool {
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(r.calls), "\n") {
		k, _, _ := strings.Cut(strings.TrimPrefix(l, "KUBECONFIG="), " ")
		seen[k] = true
	}
	return seen
}

func TestDemoUsesTheLocalClusterWhateverKUBECONFIGSays(t *testing.T) {
	r, clusterDir := runDemo(t, []string{"FAKE_SERVER=https://127.0.0.1:6443"}, false)
	if r.err == nil || !strings.Contains(r.out, "the upstream never becomes ready") {
		t.Fatalf("want the demo to stop at the fake upstream's rollout; err %v:\n%s", r.err, r.out)
	}
	want := filepath.Join(clusterDir, "kubeconfig")
	if seen := r.kubeconfigs(); len(seen) != 1 || !seen[want] {
		t.Errorf("kubectl ran with KUBECONFIG %v; want only the local cluster's %s (the exported one is not the demo's)", seen, want)
	}
	if !strings.Contains(r.calls, "kubectl apply -k manifests/overlays/local") {
		t.Errorf("the local cluster did not get the lab overlay:\n%s", r.calls)
	}
}

func TestDemoNeverAppliesTheLabOverlayToAnotherServer(t *testing.T) {
	r, _ := runDemo(t, []string{"FAKE_SERVER=https://api.example.com:6443"}, false)
	if r.err == nil || !strings.Contains(r.out, "not applying the lab overlay there") {
		t.Errorf("want a refusal naming the lab overlay; err %v:\n%s", r.err, r.out)
	}
	if strings.Contains(r.calls, "apply") {
		t.Errorf("something was applied to a cluster that is not the local one:\n%s", r.calls)
	}
}

// demoKubeconfig is a file for DEMO_KUBECONFIG (the fakes do not read it).
func demoKubeconfig(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "their-kubeconfig")
	if err := os.WriteFile(p, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func checkNamedClusterRun(t *testing.T, r demoRun, kubeconfig string) {
	t.Helper()
	if seen := r.kubeconfigs(); len(seen) != 1 || !seen[kubeconfig] {
		t.Errorf("kubectl and helm ran with KUBECONFIG %v; want only DEMO_KUBECONFIG's %s", seen, kubeconfig)
	}
	if !strings.Contains(r.calls, "helm install depwatch-demo manifests/charts/depwatch -n depwatch-demo-system") {
		t.Errorf("the named cluster did not get the chart:\n%s", r.calls)
	}
	if strings.Contains(r.calls, "overlays/local") || strings.Contains(r.calls, "apply -k") {
		t.Errorf("the lab overlay went to a cluster that is not the local one:\n%s", r.calls)
	}
	if r.applied == "" {
		t.Fatalf("the demo's workload was never applied:\n%s", r.out)
	}
	for _, lab := range []string{"hostNetwork: true", "imagePullPolicy: Never", "127.0.0.1", "privileged"} {
		if strings.Contains(r.applied, lab) {
			t.Errorf("the workload for the named cluster has the lab's %q:\n%s", lab, r.applied)
		}
	}
	for _, removal := range []string{"helm uninstall depwatch-demo -n depwatch-demo-system",
		"kubectl delete namespace depwatch-demo ", "kubectl delete namespace depwatch-demo-system "} {
		if !strings.Contains(r.calls, removal) {
			t.Errorf("the demo did not remove what it created (%q):\n%s", removal, r.calls)
		}
	}
}

func TestDemoOnANamedClusterInstallsTheChartAndRemovesItWhenItStops(t *testing.T) {
	kc := demoKubeconfig(t)
	r, _ := runDemo(t, []string{"DEMO_KUBECONFIG=" + kc}, false)
	if r.err == nil {
		t.Fatalf("want the demo to stop at the fake upstream's rollout:\n%s", r.out)
	}
	checkNamedClusterRun(t, r, kc)
}

func TestDemoOnANamedClusterRemovesWhatItCreatedWhenInterrupted(t *testing.T) {
	kc := demoKubeconfig(t)
	r, _ := runDemo(t, []string{"DEMO_KUBECONFIG=" + kc}, true)
	if ee, ok := r.err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("interrupted: want exit 130, got %v:\n%s", r.err, r.out)
	}
	checkNamedClusterRun(t, r, kc)
}
