//go:build e2e

// Package e2e runs depwatch on the real local cluster (make cluster-up): a real kubelet, the
// real Job controller and real CrashLoopBackOff. Each test makes its own namespace and
// removes it. Users drive depwatch with kubectl, so the tests do too.
//
// Tests run side by side (make e2e sets -parallel; sharing_test.go hands out the slots). Those
// that measure against a quiet machine or count the lab coordinator as a whole run first, in
// small groups of tests that do not disturb each other (quiet); the API-server restart sets up
// beside the others and restarts it after them (disruptsTheCluster). A test that kills, stops
// or reconfigures a coordinator uses a private one (coordinators_test.go) and runs beside the
// others too.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/depwatch/depwatch/jobs"
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
	if err := holdParamInformers(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	takeOverParallel()
	code := m.Run()
	removeCoordinator()
	logOwnCPU()
	os.Exit(code)
}

// kubectlRuns counts the kubectl processes the tests ran and the CPU they used, for the
// suite's own figures (docs/development.md: where the two cores go during e2e).
var kubectlRuns struct {
	sync.Mutex
	n   int
	cpu time.Duration
}

// logOwnCPU prints what the test process and the processes it ran (kubectl, host
// coordinators, Prometheus) cost the machine: the suite competes with the cluster it tests
// for two cores.
func logOwnCPU() {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return
	}
	cpu := func(r syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	kubectlRuns.Lock()
	defer kubectlRuns.Unlock()
	fmt.Fprintf(os.Stderr, "e2e: CPU of the test process %s; of the processes it ran %s, kubectl's %s of it (%d runs)\n",
		cpu(self).Round(time.Second), cpu(children).Round(time.Second), kubectlRuns.cpu.Round(time.Second), kubectlRuns.n)
}

// newNamespace creates a namespace for one test and deletes it when the test ends.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	return newNamespaceLabelled(t, prefix, nil)
}

// newNamespaceLabelled is newNamespace with labels of the test's choosing from the start.
func newNamespaceLabelled(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("e2e-%s-%s", prefix, rand.String(5))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"depwatch.io/e2e": "true"}}}
	maps.Copy(ns.Labels, labels)
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	recordForDump(t, name)
	t.Cleanup(func() {
		dumpIfFailed(t)
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

// waitEarlierNamespacesGone waits (up to 3 minutes, then goes on) until no namespace of an
// earlier test is still being deleted: a test that measures load starts on a quiet cluster,
// not beside the garbage collection of the tests before it.
func waitEarlierNamespacesGone(t *testing.T) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 3*time.Minute {
		list, err := kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/e2e=true"})
		terminating := 0
		for _, ns := range list.Items {
			if ns.DeletionTimestamp != nil {
				terminating++
			}
		}
		if err == nil && terminating == 0 {
			t.Logf("no earlier test namespace left being deleted (waited %s)", time.Since(start).Round(time.Second))
			return
		}
		time.Sleep(time.Second)
	}
	t.Logf("earlier test namespaces are still being deleted after %s; going on", time.Since(start).Round(time.Second))
}

// testDump is what a failed test dumps: its namespaces, once.
type testDump struct {
	once       sync.Once
	mu         sync.Mutex
	namespaces []string
}

var dumps sync.Map // *testing.T → *testDump

func recordForDump(t *testing.T, ns string) {
	d, _ := dumps.LoadOrStore(t, &testDump{})
	td := d.(*testDump)
	td.mu.Lock()
	td.namespaces = append(td.namespaces, ns)
	td.mu.Unlock()
}

// dumpIfFailed dumps every namespace of a failed test, once. Cleanups that delete what
// explains a failure (Jobs and their pods, a standby coordinator) call it first: cleanups run
// last-registered first, so the namespace's own cleanup alone would dump after them.
func dumpIfFailed(t *testing.T) {
	if !t.Failed() {
		return
	}
	d, ok := dumps.Load(t)
	if !ok {
		return
	}
	td := d.(*testDump)
	td.once.Do(func() {
		td.mu.Lock()
		namespaces := append([]string(nil), td.namespaces...)
		td.mu.Unlock()
		for _, ns := range namespaces {
			dumpNamespace(t, ns)
		}
	})
}

// dumpNamespace logs what a failed test left behind, so CI output tells a product failure
// from a race: the namespace's pods, Jobs and Events; each pod's containers (restarts, state,
// last termination: when the kubelet would restart them); the logs of the depwatch Jobs that
// acted for the namespace, wherever they run (weeder and probe Jobs run in the coordinator's
// namespace); and the coordinator's log lines about the namespace.
func dumpNamespace(t *testing.T, ns string) {
	for _, args := range [][]string{
		{"get", "pods,jobs", "-o", "wide"},
		{"get", "events", "--sort-by=.metadata.creationTimestamp"},
	} {
		out, _ := kubectl(t, append([]string{"-n", ns}, args...)...)
		t.Logf("kubectl -n %s %s:\n%s", ns, strings.Join(args, " "), out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Logf("pods of %s: %v", ns, err)
	} else {
		var b strings.Builder
		for _, pod := range pods.Items {
			writePodStatus(&b, pod)
		}
		t.Logf("containers of the pods in %s (times UTC):\n%s", ns, b.String())
	}
	dumpJobLogs(ctx, t, ns)
	dumpCoordinatorLines(ctx, t, ns)
}

// writePodStatus writes one pod's containers: restarts, state and last termination, with the
// times the kubelet's back-off counts from.
func writePodStatus(b *strings.Builder, pod corev1.Pod) {
	deleting := ""
	if pod.DeletionTimestamp != nil {
		deleting = ", deleting since " + clock(pod.DeletionTimestamp.Time)
	}
	fmt.Fprintf(b, "pod %s/%s uid %s: phase %s, created %s%s\n", pod.Namespace, pod.Name, pod.UID, pod.Status.Phase, clock(pod.CreationTimestamp.Time), deleting)
	for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		fmt.Fprintf(b, "  container %s: restarts %d, ready %v, state %s; last %s\n",
			cs.Name, cs.RestartCount, cs.Ready, containerState(cs.State), containerState(cs.LastTerminationState))
		if cl, ok := backOffOf(pod); ok && cl.container == cs.Name {
			fmt.Fprintf(b, "    back-off %s: the kubelet restarts it on its own at %s or later\n", cl.backoff, clock(cl.kubeletRestart))
		}
	}
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running since " + clock(s.Running.StartedAt.Time)
	case s.Terminated != nil:
		return fmt.Sprintf("terminated (exit %d %s) started %s finished %s", s.Terminated.ExitCode, s.Terminated.Reason,
			clock(s.Terminated.StartedAt.Time), clock(s.Terminated.FinishedAt.Time))
	case s.Waiting != nil:
		return fmt.Sprintf("waiting (%s: %s)", s.Waiting.Reason, s.Waiting.Message)
	}
	return "none"
}

func clock(ts time.Time) string {
	if ts.IsZero() {
		return "-"
	}
	return ts.UTC().Format("15:04:05")
}

// dumpJobLogs logs every depwatch Job that acted for ns (label depwatch.io/namespace, in any
// namespace) and every Job in ns itself (reap examples), with each pod's containers and log.
func dumpJobLogs(ctx context.Context, t *testing.T, ns string) {
	var all []batchv1.Job
	for _, q := range []struct{ ns, selector string }{
		{metav1.NamespaceAll, jobs.LabelNamespace + "=" + jobs.LabelValue(ns)},
		{metav1.NamespaceAll, jobs.ProbeLabel(ns)}, // the probe Jobs of its shard
		{ns, ""},
	} {
		list, err := kube.BatchV1().Jobs(q.ns).List(ctx, metav1.ListOptions{LabelSelector: q.selector})
		if err != nil {
			t.Logf("listing Jobs for %s: %v", ns, err)
			continue
		}
		for _, j := range list.Items {
			if !slices.ContainsFunc(all, func(o batchv1.Job) bool { return o.UID == j.UID }) {
				all = append(all, j)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].CreationTimestamp.Before(&all[j].CreationTimestamp) })
	for _, j := range all {
		var b strings.Builder
		fmt.Fprintf(&b, "Job %s/%s: created %s, trigger %q, active %d, succeeded %d, failed %d\n", j.Namespace, j.Name,
			clock(j.CreationTimestamp.Time), j.Annotations[jobs.AnnotationTrigger], j.Status.Active, j.Status.Succeeded, j.Status.Failed)
		for _, c := range j.Status.Conditions {
			fmt.Fprintf(&b, "  condition %s=%s at %s: %s %s\n", c.Type, c.Status, clock(c.LastTransitionTime.Time), c.Reason, c.Message)
		}
		pods, err := kube.CoreV1().Pods(j.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + j.Name})
		if err != nil {
			fmt.Fprintf(&b, "  listing its pods: %v\n", err)
		} else {
			for _, pod := range pods.Items {
				writePodStatus(&b, pod)
				writePodLogs(ctx, &b, pod, func(string) bool { return true })
			}
		}
		t.Logf("depwatch Job for %s:\n%s", ns, b.String())
	}
	if len(all) == 0 {
		t.Logf("no depwatch Job acted for %s (none left, at least)", ns)
	}
}

// dumpCoordinatorLines logs the coordinators' JSON log lines whose namespace field is ns.
func dumpCoordinatorLines(ctx context.Context, t *testing.T, ns string) {
	pods, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=depwatch",
	})
	if err != nil {
		t.Logf("listing coordinator pods: %v", err)
		return
	}
	aboutNS := func(line string) bool { return logLineNamespace(line) == ns }
	for _, pod := range pods.Items {
		// The lab's coordinator and the private ones (component coordinator-<name>).
		if !strings.HasPrefix(pod.Labels["app.kubernetes.io/component"], "coordinator") {
			continue
		}
		var b strings.Builder
		writePodStatus(&b, pod)
		writePodLogs(ctx, &b, pod, aboutNS)
		t.Logf("coordinator log lines about %s:\n%s", ns, b.String())
	}
}

func logLineNamespace(line string) string {
	var l logLine
	if json.Unmarshal([]byte(line), &l) != nil {
		return ""
	}
	return l.str("namespace")
}

// writePodLogs writes the last dumpLogLines lines that keep accepts of each container's log,
// and of its previous instance when it restarted.
func writePodLogs(ctx context.Context, b *strings.Builder, pod corev1.Pod, keep func(string) bool) {
	const dumpLogLines = 200
	for _, cs := range pod.Status.ContainerStatuses {
		for _, previous := range []bool{true, false} {
			if previous && cs.RestartCount == 0 {
				continue
			}
			raw, err := kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: previous}).DoRaw(ctx)
			which := "log"
			if previous {
				which = "previous log"
			}
			if err != nil {
				fmt.Fprintf(b, "  %s of %s: %v\n", which, cs.Name, err)
				continue
			}
			var lines []string
			for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
				if line != "" && keep(line) {
					lines = append(lines, line)
				}
			}
			if len(lines) > dumpLogLines {
				fmt.Fprintf(b, "  (%d earlier lines left out)\n", len(lines)-dumpLogLines)
				lines = lines[len(lines)-dumpLogLines:]
			}
			fmt.Fprintf(b, "  %s of %s (%d lines):\n", which, cs.Name, len(lines))
			for _, line := range lines {
				b.WriteString("    " + line + "\n")
			}
		}
	}
}

// kubectl runs the real kubectl against the test cluster and returns its combined output.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runKubectl(args...)
}

// runKubectl gives kubectl two minutes, or its own --timeout and half a minute more when that
// is longer: a kill before its own timeout would fail a wait kubectl was still entitled to.
func runKubectl(args ...string) (string, error) {
	limit := 2 * time.Minute
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--timeout="); ok {
			if d, err := time.ParseDuration(v); err == nil && d+30*time.Second > limit {
				limit = d + 30*time.Second
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if cmd.ProcessState != nil {
		kubectlRuns.Lock()
		kubectlRuns.n++
		kubectlRuns.cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		kubectlRuns.Unlock()
	}
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

// waitFor polls cond until it holds or timeout passes: every 100ms at first, while cond is
// cheap (an API read), less often when it is not (a kubectl run, a big list) or once the wait
// has gone on for a while. Dozens of tests wait at once on a two-core machine that also runs
// the cluster: a test waiting must not become its load.
//
// Its timeout is a hang catcher, never a verdict (development.md, "No verdict on a wall-clock
// bound"), so it is at least minWait, whatever the caller asks: a test that passes is not
// slowed by it, and one that waits for what never comes fails a little later.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	timeout = max(timeout, minWait)
	start := time.Now()
	deadline := start.Add(timeout)
	var lastErr error
	for {
		began := time.Now()
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
		}
		time.Sleep(pollPause(time.Since(began), began.Sub(start)))
	}
}

// minWait is the shortest a wait waits before it gives up: with the suite, fuzzing, a cold
// build and other work on two cores (load average 50), a new pod took a minute from
// Scheduled to Started, and a minute's wait for it failed a test that had nothing wrong.
const minWait = 3 * time.Minute

// pollPause is how long waitFor rests after a check that took took, waited into the wait:
// four times the check (so checking takes at most a fifth of the time), and a twentieth of
// the wait so far (so a wait sees what it waits for at most 5 % late: what happens within
// seconds is seen within a tenth of a second, a back-off minutes away is checked every
// second, not ten times a second); at least 100ms and at most a second.
func pollPause(took, waited time.Duration) time.Duration {
	return min(max(4*took, waited/20, 100*time.Millisecond), time.Second)
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
