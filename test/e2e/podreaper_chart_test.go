//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podReaperChart is pod-reaper's own chart rendered with depwatch's image (its header says
// which version and which values).
const podReaperChart = "testdata/pod-reaper-chart.yaml"

// TestPodReaperChartDeploymentWithDepwatchsImageReapsOnItsScheduleUnderItsRBAC: where
// pod-reaper runs, the image is the whole change. The Deployment is the one pod-reaper's chart
// renders (no command, no args, env only, its ServiceAccount and ClusterRole with exactly
// pods list/delete and pods/eviction create, 30m CPU / 30Mi memory), running depwatch's image.
// Its reaper (MAX_DURATION=5s, REQUIRE_LABEL app=victim, NAMESPACE the test's, SCHEDULE every
// 20 s) reaps what pod-reaper would: the current pod of the victim Deployment at each tick,
// over at least two cycles, and not at start; it keeps a pod of another label in that
// namespace and a victim-labelled pod outside it. Its RBAC forbids Events: that is said in one
// warning line over all the cycles, and nothing else is refused. The pod never restarts
// (30Mi is enough). No duration decides the outcome but the schedule's own (no cycle between
// its ticks); the waits only catch a hang.
func TestPodReaperChartDeploymentWithDepwatchsImageReapsOnItsScheduleUnderItsRBAC(t *testing.T) {
	parallelLong(t, 75*time.Second)
	release := newNamespace(t, "podreaper")
	apps := newNamespace(t, "podreaper-apps")

	victims := sleeper("victim", apps)
	victims.Spec.Replicas = ptr.To(int32(1))
	if _, err := kube.AppsV1().Deployments(apps).Create(context.Background(), victims, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/victim: %v", apps, err)
	}
	kept := []podRef{
		refOf(sleepingPod(t, apps, "bystander", map[string]string{"app": "bystander"})),
		refOf(sleepingPod(t, release, "victim-elsewhere", map[string]string{"app": "victim"})),
	}

	deployment, account := applyPodReaperChart(t, release, apps)
	// The fixture's rights are pod-reaper's, no more: what depwatch may not do here is real.
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"list", "pods"}, true},
		{[]string{"delete", "pods"}, true},
		{[]string{"create", "pods", "--subresource=eviction"}, true},
		{[]string{"get", "pods"}, false},
		{[]string{"watch", "pods"}, false},
		{[]string{"create", "events"}, false},
	} {
		if got := canI(t, release+"/"+account, append(c.args, "-n", apps)...); got != c.want {
			t.Fatalf("the chart's service account: can-i %s = %v, want %v (the fixture must carry pod-reaper's rules exactly)", strings.Join(c.args, " "), got, c.want)
		}
	}

	reaper := waitPodOf(t, release, "app=pod-reaper-stale", 2*time.Minute)
	for _, c := range reaper.Spec.Containers {
		if len(c.Command) > 0 || len(c.Args) > 0 {
			t.Fatalf("the chart's container has command %q and args %q; pod-reaper's chart sets neither", c.Command, c.Args)
		}
	}

	// Two cycles that each reaped a victim: the first tick is 20 s after start, the second 20 s
	// later. The wait only catches a hang.
	var logs string
	var cycles []reaperCycle
	waitFor(t, 4*time.Minute, "two cycles of the chart's reaper that each reaped a victim", func() (bool, error) {
		out, err := kubectl(t, "-n", release, "logs", "deployment/"+deployment)
		if err != nil {
			return false, fmt.Errorf("%v: %s", err, out)
		}
		logs, cycles = out, reaperCycles(parseLogLines(out))
		reaping := 0
		for _, c := range cycles {
			if len(c.reaped) > 0 {
				reaping++
			}
		}
		return reaping >= 2, nil
	})
	lines := parseLogLines(logs)

	// On its SCHEDULE: the first cycle at the first tick, not at start (pod-reaper's contract),
	// and never one before the schedule's next tick (cycles end at least ~20 s apart).
	start, ok := findLine(lines, map[string]string{"schedule": "@every 20s"})
	if !ok || start.str("first_cycle_at") == "" {
		t.Fatalf("no start line naming the chart's SCHEDULE and the first cycle's time:\n%s", logs)
	}
	if watch, _ := start["watch"].(bool); watch {
		t.Errorf("the start line says WATCH is on; the chart sets no WATCH: %v", start)
	}
	firstTick := logTime(t, start, "first_cycle_at")
	for i, c := range cycles {
		switch {
		case i == 0 && c.at.Before(firstTick):
			t.Errorf("cycle %d ended at %s, before the schedule's first tick %s: it ran at start", c.n, c.at, firstTick)
		case i > 0 && c.at.Sub(cycles[i-1].at) < 15*time.Second:
			t.Errorf("cycle %d ended %s after cycle %d: a cycle ran between SCHEDULE's ticks (@every 20s)", c.n, c.at.Sub(cycles[i-1].at), cycles[i-1].n)
		}
	}

	// What pod-reaper would reap: each time, the victim Deployment's pod in NAMESPACE, once.
	seen := map[string]int{}
	for _, c := range cycles {
		for _, l := range c.reaped {
			if l.str("namespace") != apps || !strings.HasPrefix(l.str("pod"), "victim-") || l.str("action") != "deleted" {
				t.Errorf("cycle %d reaped what pod-reaper would not (only app=victim pods in %s, older than 5s): %v", c.n, apps, l)
			}
			seen[l.str("pod")]++
		}
	}
	for pod, n := range seen {
		if n > 1 {
			t.Errorf("pod %s was reaped %d times", pod, n)
		}
	}
	for _, p := range kept {
		if !podExists(t, p.ns, p.name, p.uid) {
			t.Errorf("pod %s/%s was reaped: it is outside NAMESPACE or REQUIRE_LABEL_VALUES", p.ns, p.name)
		}
	}

	// What its RBAC forbids is said once: one warning, about Events, over every cycle and pod,
	// and nothing else is refused. (An error line that is no refusal, a list the busy API
	// server timed out, is retried on the schedule and is not what this test is about.)
	var warnings []logLine
	for _, l := range lines {
		switch l.str("level") {
		case "warning":
			warnings = append(warnings, l)
		case "error", "fatal", "panic":
			t.Logf("an %s line: %v", l.str("level"), l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0].str("msg"), "may not create Events") {
		t.Errorf("%d warning lines over %d cycles, want exactly one, saying Events may not be created:\n%s", len(warnings), len(cycles), logs)
	}
	for _, raw := range strings.Split(logs, "\n") {
		if strings.Contains(strings.ToLower(raw), "forbidden") && !strings.Contains(raw, "may not create Events") {
			t.Errorf("something other than an Event was refused: %s", raw)
		}
	}

	// 30Mi was enough: the one container never restarted (an OOM kill would restart it).
	reaper = podByUID(t, release, reaper.Name, reaper.UID)
	for _, cs := range reaper.Status.ContainerStatuses {
		if cs.RestartCount != 0 || cs.LastTerminationState.Terminated != nil {
			t.Errorf("the chart's reaper container restarted %d times (last: %s)", cs.RestartCount, containerState(cs.LastTerminationState))
		}
	}
	logPodMemory(t, reaper)
}

// applyPodReaperChart applies the fixture into release, with its reaper's NAMESPACE set to
// apps, and returns the names (suffixed, so parallel runs' cluster-wide objects do not collide)
// of its Deployment and ServiceAccount.
func applyPodReaperChart(t *testing.T, release, apps string) (deployment, account string) {
	t.Helper()
	raw, err := os.ReadFile(podReaperChart)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	chart := strings.ReplaceAll(string(raw), "APPS_NAMESPACE", apps)
	if err := os.WriteFile(filepath.Join(dir, "pod-reaper.yaml"), []byte(chart), 0o644); err != nil {
		t.Fatal(err)
	}
	suffix := "-" + release
	// The one deviation from the chart: this cluster has no kube-proxy, so a pod reaches the
	// API server only on the host's network, at the address the in-cluster config is told by
	// KUBERNETES_SERVICE_HOST/PORT (as applyExample does for depwatch's own examples).
	kustomization := fmt.Sprintf(`namespace: %s
nameSuffix: %s
resources: [pod-reaper.yaml]
patches:
- target: {kind: Deployment}
  patch: |-
    - {op: add, path: /spec/template/spec/hostNetwork, value: true}
    - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_HOST, value: %q}}
    - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_PORT, value: %q}}
`, release, suffix, apiServerHost, apiServerPort)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "apply", "-k", dir)
	deployment = "pod-reaper-stale" + suffix
	t.Cleanup(func() {
		dumpIfFailed(t) // before the reaper and its log go
		if t.Failed() {
			// The namespace dump shows Jobs' logs; this reaper is a Deployment.
			out, _ := kubectl(t, "-n", release, "logs", "deployment/"+deployment)
			t.Logf("the chart's reaper's log:\n%s", out)
		}
		_, _ = kubectl(t, "delete", "-k", dir, "--ignore-not-found", "--wait=false")
	})
	return deployment, "pod-reaper-service-account" + suffix
}

// reaperCycle is one finished cycle of a reaper's log: its "Cycle N done." line's time and the
// `reaping pod` lines before it.
type reaperCycle struct {
	n      int
	at     time.Time
	reaped []logLine
}

// reaperCycles reads the finished cycles from a reap run's log lines (WATCH off: every pod
// line belongs to the cycle whose end line follows it).
func reaperCycles(lines []logLine) []reaperCycle {
	var out []reaperCycle
	var pending []logLine
	for _, l := range lines {
		if l.str("msg") == "reaping pod" {
			pending = append(pending, l)
			continue
		}
		n, ok := l["cycle"].(float64)
		if !ok || !strings.HasSuffix(l.str("msg"), " done.") {
			continue
		}
		at, _ := time.Parse(time.RFC3339, l.str("time"))
		out = append(out, reaperCycle{n: int(n), at: at, reaped: pending})
		pending = nil
	}
	return out
}

func logTime(t *testing.T, l logLine, key string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, l.str(key))
	if err != nil {
		t.Fatalf("%s of %v: %v", key, l, err)
	}
	return at
}

// waitPodOf waits until the one pod matching selector in ns is Running and returns it.
func waitPodOf(t *testing.T, ns, selector string, timeout time.Duration) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	waitFor(t, timeout, fmt.Sprintf("the pod %s in %s running", selector, ns), func() (bool, error) {
		list, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		pod = list.Items[0]
		return pod.Status.Phase == corev1.PodRunning, nil
	})
	return pod
}

func podByUID(t *testing.T, ns, name string, uid types.UID) corev1.Pod {
	t.Helper()
	pod, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || pod.UID != uid {
		t.Fatalf("pod %s/%s (uid %s) is gone: %v", ns, name, uid, err)
	}
	return *pod
}

// logPodMemory logs what the kubelet measures of the pod's memory (its stats summary, through
// the API server), for the record: the pass/fail is the container never restarting.
func logPodMemory(t *testing.T, pod corev1.Pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", pod.Spec.NodeName, "proxy", "stats", "summary").DoRaw(ctx)
	if err != nil {
		t.Logf("the kubelet's stats summary: %v", err)
		return
	}
	var summary struct {
		Pods []struct {
			PodRef struct{ Name, Namespace string } `json:"podRef"`
			Memory *struct {
				WorkingSetBytes *uint64 `json:"workingSetBytes"`
				RSSBytes        *uint64 `json:"rssBytes"`
			} `json:"memory"`
		} `json:"pods"`
	}
	if err := json.Unmarshal(raw, &summary); err != nil {
		t.Logf("the kubelet's stats summary: %v", err)
		return
	}
	mib := func(b *uint64) string {
		if b == nil {
			return "?"
		}
		return fmt.Sprintf("%.1f MiB", float64(*b)/(1<<20))
	}
	for _, p := range summary.Pods {
		if p.PodRef.Namespace == pod.Namespace && p.PodRef.Name == pod.Name && p.Memory != nil {
			t.Logf("the chart's reaper pod (limit 30Mi): working set %s, RSS %s (kubelet)", mib(p.Memory.WorkingSetBytes), mib(p.Memory.RSSBytes))
			return
		}
	}
	t.Logf("the kubelet's stats summary has no memory figures for pod %s/%s", pod.Namespace, pod.Name)
}
