//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/test/upstream"
)

// The seed-scale probe benchmark: N control-plane namespaces, each with a kubeconfig Secret
// that reaches the local API server (the "shoot" is the local cluster itself) and a Running
// Machine for the one real node, so its one node lease counts and no probe ever decides to
// scale (one candidate: no decision). A coordinator of this worktree runs outside the cluster
// with the shipped prober defaults (probeInterval 10s, initialDelay 30s,
// namespacesPerProbeJob 125, probeJobRunDuration 2m); its probe Jobs run in the cluster.
const (
	probeScaleLabel    = "depwatch.io/bench-probe"
	probeScaleInterval = 10 * time.Second // the shipped default probeInterval
)

// probeScalePerJob is the config's namespacesPerProbeJob: the shipped default, or
// DEPWATCH_BENCH_PROBE_PER_JOB (what fewer, larger shards cost and save).
func probeScalePerJob() int {
	if n, err := strconv.Atoi(os.Getenv("DEPWATCH_BENCH_PROBE_PER_JOB")); err == nil && n > 0 {
		return n
	}
	return prober.DefaultNamespacesPerProbeJob
}

// probeScaleConfig is the coordinator's config: the shipped prober defaults, the bench's
// namespace label, and the local overlay's Job template.
const probeScaleConfig = gardenletWeederConfig + `prober:
  kubeConfigSecretName: shoot-kubeconfig
  namespaceSelector: {matchLabels: {depwatch.io/bench-probe: "true"}}
  dependentResourceInfos:
  - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
    scaleUp: {level: 1}
    scaleDown: {level: 0}
  - ref: {kind: Deployment, name: machine-controller-manager, apiVersion: apps/v1}
    scaleUp: {level: 1}
    scaleDown: {level: 1}
  - ref: {kind: Deployment, name: cluster-autoscaler, apiVersion: apps/v1}
    optional: true
    scaleUp: {level: 0}
    scaleDown: {level: 2}
`

func TestBenchScaleProbe(t *testing.T) {
	counts := benchScaleCounts(t) // make bench-scale's SCALE, shared with the weeder side
	window := 6 * time.Minute     // three Job runs of 2m per shard
	if v := os.Getenv("DEPWATCH_BENCH_SCALE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute {
			t.Fatalf("DEPWATCH_BENCH_SCALE_WINDOW=%q: want a Go duration of at least 1m", v)
		}
		window = d
	}
	ensureCoordinator(t) // the Job namespace, the probe Jobs' service account and rights
	ensureMachineCRD(t)
	var b strings.Builder
	fmt.Fprintf(&b, "Probe at seed scale: shipped defaults (probeInterval 10s, namespacesPerProbeJob %d, probeJobRunDuration 2m), measured over %s after the first probes:\n\n", probeScalePerJob(), window)
	fmt.Fprintf(&b, "| namespaces | shards | probe Jobs created per hour | probe pods running (max) | last-probe age p50 / p99 / max (from the Jobs' logs) | last-probe age p99 (coordinator's metric) | API requests/s (run − before) | coordinator RSS max / CPU |\n|---|---|---|---|---|---|---|---|\n")
	for _, n := range counts {
		r := probeScaleRun(t, n, window)
		fmt.Fprintf(&b, "| %d | %d | %.0f | %d | %.1f s / %.1f s / %.1f s | %.1f s | %.0f (%.0f − %.0f) | %.0f MiB / %.1f %% of a core |\n",
			n, r.shards, r.jobsPerHour, r.maxPods, r.ageP50.Seconds(), r.ageP99.Seconds(), r.ageMax.Seconds(), r.metricP99.Seconds(),
			r.apiRun-r.apiBefore, r.apiRun, r.apiBefore, r.rssMiB, r.cpuPercent)
		shardsWant := (n + probeScalePerJob() - 1) / probeScalePerJob()
		if r.maxPods > shardsWant {
			t.Errorf("%d namespaces: %d probe pods running at once, want at most %d (one per shard)", n, r.maxPods, shardsWant)
		}
		if limit := float64(shardsWant) * 35; r.jobsPerHour > limit {
			t.Errorf("%d namespaces: %.0f probe Jobs per hour, want at most %.0f (30 per shard, the 2m run, with margin)", n, r.jobsPerHour, limit)
		}
		if r.ageP99 > 2*probeScaleInterval {
			t.Errorf("%d namespaces: last-probe age p99 %s, want at most 2 × probeInterval (%s)", n, r.ageP99, 2*probeScaleInterval)
		}
	}
	fmt.Println(b.String())
	out := filepath.Join(repoRoot, "_output", "bench-scale-probe.md")
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err == nil {
		t.Logf("table written to %s", out)
	}
}

type probeScaleResult struct {
	shards                 int
	jobsPerHour            float64
	maxPods                int
	ageP50, ageP99, ageMax time.Duration
	metricP99              time.Duration
	apiBefore, apiRun      float64
	rssMiB, cpuPercent     float64
}

func probeScaleRun(t *testing.T, n int, window time.Duration) probeScaleResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	restCfg.QPS, restCfg.Burst = 200, 400
	dyn := dynamic.NewForConfigOrDie(restCfg)
	kc := mustKubectl(t, "config", "view", "--raw", "--flatten", "--minify")
	node := os.Getenv("DEPWATCH_E2E_NODE")
	if node == "" {
		node = "localhost"
	}

	// API request rate before: 30 s with nothing of the bench running.
	before0, t0 := probeScaleAPIRequests(t), time.Now()
	time.Sleep(30 * time.Second)
	apiBefore := (probeScaleAPIRequests(t) - before0) / time.Since(t0).Seconds()

	// N namespaces, each with its Secret and the node's Machine (created in parallel).
	suffix := rand.String(4)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench-probe-%s-%04d", suffix, i)
	}
	t.Cleanup(func() {
		for _, ns := range names {
			_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var setupErr error
	var mu sync.Mutex
	for _, ns := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			err := probeScaleNamespace(ctx, dyn, ns, kc, node)
			if err != nil {
				mu.Lock()
				setupErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if setupErr != nil {
		t.Fatalf("setting up the namespaces: %v", setupErr)
	}

	// The coordinator of this worktree, outside the cluster.
	dir := t.TempDir()
	bin := filepath.Join(dir, "depwatch")
	build := exec.Command("go", "build", "-o", bin, "./cmd/depwatch")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfgFile := filepath.Join(dir, "config.yaml")
	cfg := probeScaleConfig
	if n := probeScalePerJob(); n != prober.DefaultNamespacesPerProbeJob {
		cfg += fmt.Sprintf("  namespacesPerProbeJob: %d\n", n)
	}
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsPort := freePort(t)
	cctx, ccancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(cctx, bin, "coordinator", "--config-file", cfgFile,
		"--metrics-bind-addr", fmt.Sprintf("127.0.0.1:%d", metricsPort), "--health-bind-addr", "0")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	var out bytes.Buffer
	var outMu sync.Mutex
	cmd.Stdout, cmd.Stderr = lockedWriter{&outMu, &out}, lockedWriter{&outMu, &out}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ours := func(j *batchv1.Job) bool {
		return strings.Contains(j.Annotations[jobs.AnnotationNamespaces], "bench-probe-"+suffix+"-")
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			ccancel()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			outMu.Lock()
			t.Logf("coordinator output (last 4 KiB):\n%s", probeScaleTail(out.String(), 4096))
			outMu.Unlock()
		}
		list, err := kube.BatchV1().Jobs(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: jobs.LabelKind + "=probe"})
		if err != nil {
			return
		}
		for i := range list.Items {
			if ours(&list.Items[i]) {
				_ = kube.BatchV1().Jobs(depwatchNS).Delete(context.Background(), list.Items[i].Name,
					metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
			}
		}
	})
	for _, ns := range names { // label last: the coordinator sees them all within a moment
		if _, err := kube.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json",
			[]byte(`{"metadata":{"labels":{"`+probeScaleLabel+`":"true"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("labelling %s: %v", ns, err)
		}
	}
	// Warm-up: initialDelay 30s and the first Jobs' start.
	time.Sleep(45 * time.Second)

	start := time.Now()
	api0 := probeScaleAPIRequests(t)
	cpu0 := probeScaleCPU(cmd.Process.Pid)
	lastProbe := map[string]time.Time{}
	jobsSeen := map[string]time.Time{}
	var ages []time.Duration
	maxPods := 0
	var rss float64
	// The coordinator and its probe pods together, every second: what the prober costs.
	stopSum := make(chan struct{})
	var sum probeRSSSum
	var sampler sync.WaitGroup
	sampler.Go(func() { sum = probeRSSPeak(cmd.Process.Pid, stopSum) })
	for tick := 0; time.Since(start) < window; tick++ {
		list, err := kube.BatchV1().Jobs(depwatchNS).List(ctx, metav1.ListOptions{LabelSelector: jobs.LabelKind + "=probe"})
		if err != nil {
			t.Fatal(err)
		}
		ourJobs := map[string]bool{}
		for i := range list.Items {
			j := &list.Items[i]
			if ours(j) {
				ourJobs[j.Name] = true
				if _, ok := jobsSeen[j.Name]; !ok {
					jobsSeen[j.Name] = j.CreationTimestamp.Time
				}
			}
		}
		pods, err := kube.CoreV1().Pods(depwatchNS).List(ctx, metav1.ListOptions{LabelSelector: jobs.LabelKind + "=probe"})
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, p := range pods.Items {
			if !ourJobs[p.Labels[batchv1.JobNameLabel]] {
				continue
			}
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
			if tick%3 == 0 && p.Status.Phase != corev1.PodPending {
				probeScaleReadLog(ctx, p.Name, lastProbe)
			}
		}
		maxPods = max(maxPods, running)
		rss = max(rss, probeScaleRSS(cmd.Process.Pid))
		if tick%3 == 0 && time.Since(start) > 30*time.Second {
			now := time.Now()
			for _, ns := range names {
				at, ok := lastProbe[ns]
				if !ok {
					at = start.Add(-45 * time.Second) // never probed: as old as the run
				}
				ages = append(ages, now.Sub(at))
			}
		}
		time.Sleep(5 * time.Second)
	}
	close(stopSum)
	sampler.Wait()
	elapsed := time.Since(start)
	apiRun := (probeScaleAPIRequests(t) - api0) / elapsed.Seconds()
	cpu := (probeScaleCPU(cmd.Process.Pid) - cpu0).Seconds() / elapsed.Seconds() * 100

	// The coordinator's own view: time() − probe_last_probe_timestamp_seconds per namespace.
	var metricAges []time.Duration
	samples := probeScaleScrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	now := time.Now()
	for _, ns := range names {
		if v, ok := samples[`depwatch_coordinator_probe_last_probe_timestamp_seconds{namespace="`+ns+`"}`]; ok {
			metricAges = append(metricAges, now.Sub(time.Unix(int64(v), 0)))
		} else {
			metricAges = append(metricAges, elapsed)
		}
	}
	created := 0
	for _, at := range jobsSeen {
		if !at.Before(start) {
			created++
		}
	}
	stop()
	slices.Sort(ages)
	slices.Sort(metricAges)
	r := probeScaleResult{
		shards:      int(samples[`depwatch_coordinator_probe_shards{state="total"}`]),
		jobsPerHour: float64(created) * float64(time.Hour) / float64(elapsed),
		maxPods:     maxPods,
		ageP50:      probeScalePct(ages, 0.50), ageP99: probeScalePct(ages, 0.99), ageMax: probeScalePct(ages, 1),
		metricP99: probeScalePct(metricAges, 0.99),
		apiBefore: apiBefore, apiRun: apiRun, rssMiB: rss, cpuPercent: cpu,
	}
	t.Logf("%d namespaces: coordinator + probe pods summed, peak %.1f MiB (%d probe pods in that sample; anon %.1f MiB, file %.1f MiB); largest probe pod %.1f MiB",
		n, sum.peak/(1<<20), sum.probes, sum.anon/(1<<20), sum.file/(1<<20), sum.largestProbe/(1<<20))
	t.Logf("%d namespaces: %+v (stuck shards %v)", n, r, samples[`depwatch_coordinator_probe_shards{state="stuck"}`])
	return r
}

// probeScaleNamespace creates one bench namespace (not yet labelled for probing), its
// kubeconfig Secret and a Running Machine for the real node.
func probeScaleNamespace(ctx context.Context, dyn dynamic.Interface, ns, kc, node string) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"depwatch.io/e2e": "true"}}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: probeSecret},
		Data: map[string][]byte{"kubeconfig": []byte(kc)}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("secret in %s: %w", ns, err)
	}
	m := upstream.MachineFor(ns, node, "Running")
	if _, err := dyn.Resource(probe.MachineGVR).Namespace(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("machine in %s: %w", ns, err)
	}
	return nil
}

// probeScaleReadLog reads the last two minutes of a probe pod's log and notes each
// namespace's latest finished probe.
func probeScaleReadLog(ctx context.Context, pod string, last map[string]time.Time) {
	rc, err := kube.CoreV1().Pods(depwatchNS).GetLogs(pod, &corev1.PodLogOptions{SinceSeconds: ptr.To(int64(120))}).Stream(ctx)
	if err != nil {
		return
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	for _, l := range parseLogLines(string(data)) {
		if l["probe"] == nil {
			continue
		}
		msg := l.str("msg")
		if !strings.HasPrefix(msg, "Probe done") && !strings.HasPrefix(msg, "No scaling decision") {
			continue
		}
		at, err := time.Parse(time.RFC3339, l.str("time"))
		if err != nil {
			continue
		}
		if ns := l.str("namespace"); at.After(last[ns]) {
			last[ns] = at
		}
	}
}

// probeScaleAPIRequests is the API server's apiserver_request_total, summed over every label.
func probeScaleAPIRequests(t *testing.T) float64 {
	t.Helper()
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Logf("reading the API server's metrics: %v", err)
		return 0
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				sum += f
			}
		}
	}
	return sum
}

// probeScaleScrape reads every sample of a Prometheus text endpoint, keyed by name with labels.
func probeScaleScrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	out, err := exec.Command("curl", "-fsS", url).Output()
	if err != nil {
		t.Logf("reading %s: %v", url, err)
		return map[string]float64{}
	}
	samples := map[string]float64{}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				samples[line[:i]] = f
			}
		}
	}
	return samples
}

// probeRSSSum is the largest sum of the coordinator's and its probe pods' resident memory in
// one sample, with that sample's anonymous and file-mapped parts and probe pods.
type probeRSSSum struct {
	peak, anon, file, largestProbe float64 // bytes
	probes                         int
}

// probeRSSPeak samples, every second until stop, the coordinator (pid) and every `depwatch
// probe` process on this machine (its probe pods run here).
func probeRSSPeak(pid int, stop <-chan struct{}) probeRSSSum {
	var r probeRSSSum
	coord := fmt.Sprintf("/proc/%d", pid)
	for {
		select {
		case <-stop:
			return r
		case <-time.After(time.Second):
		}
		var sum, anon, file float64
		probes := 0
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, dir := range dirs {
			if dir != coord {
				cmd, err := os.ReadFile(dir + "/cmdline")
				if err != nil || !strings.HasSuffix(strings.SplitN(string(cmd), "\x00", 2)[0], "depwatch") || !strings.Contains(string(cmd), "\x00probe") {
					continue
				}
			}
			st := procStatusKB(dir + "/status")
			sum, anon, file = sum+st["VmRSS"]*1024, anon+st["RssAnon"]*1024, file+st["RssFile"]*1024
			if dir != coord && st["VmRSS"] > 0 {
				probes++
				r.largestProbe = max(r.largestProbe, st["VmRSS"]*1024)
			}
		}
		if sum > r.peak {
			r.peak, r.anon, r.file, r.probes = sum, anon, file, probes
		}
	}
}

// probeScaleRSS is a process's resident memory (VmRSS) in MiB; 0 if unreadable.
func probeScaleRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// probeScaleCPU is a process's user + system CPU time so far.
func probeScaleCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// probeScalePct is the q-quantile of sorted durations (nearest rank); 0 for none.
func probeScalePct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func probeScaleTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
