//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBenchRecovery is `make bench-recovery`: a measurement, not a timed test. It runs only
// when DEPWATCH_BENCH_RECOVERY is the number of outages to measure per column, and writes a
// Markdown table to stdout and _output/bench-recovery.md:
//
//	(a) floor: a fresh dependent pod, create → Ready, with the upstream up
//	(b) depwatch, unarmed weeder Job (launched when the upstream is Ready again,
//	    Service "upstream-unarmed", arm: false): upstream Ready → dependent Ready, the
//	    dependent crash-looping with a back-off of at least 80 s when the upstream returns
//	(c) no watchdog: the same outage on a Service the coordinator does not watch
//	(d) depwatch, armed weeder Job (launched when the outage begins, Service
//	    "upstream"): the same outage
//
// plus the coordinator's own trigger → Job-created latency from its metric.
func TestBenchRecovery(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DEPWATCH_BENCH_RECOVERY"))
	if n <= 0 {
		t.Skip("set DEPWATCH_BENCH_RECOVERY=<outages per column> (make bench-recovery)")
	}
	const minBackoff = 80 * time.Second
	ensureCoordinator(t)
	metricsBefore := triggerLatency(t)

	floor := benchFloor(t, n)

	// The weeder columns recover one pair at a time, (b) and (d) taking turns, so that
	// concurrent Jobs and pod starts do not slow each other down on two cores.
	var withDW, armed, without []time.Duration
	var recoveries sync.Mutex
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); withDW = benchOutages(t, n, "upstream-unarmed", minBackoff, &recoveries) }()
	go func() { defer wg.Done(); armed = benchOutages(t, n, upstreamName, minBackoff, &recoveries) }()
	go func() { defer wg.Done(); without = benchOutages(t, n, "unwatched", minBackoff, nil) }()
	wg.Wait()
	if t.Failed() {
		return
	}
	metricsAfter := triggerLatency(t)

	var b strings.Builder
	fmt.Fprintf(&b, "| measured on the local cluster, %d outages per column | median | max |\n|---|---|---|\n", n)
	row := func(name string, d []time.Duration) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, fmtSeconds(median(d)), fmtSeconds(slices.Max(d)))
	}
	row("(a) floor: fresh dependent pod, create → Ready", floor)
	row("(b) depwatch, unarmed weeder Job (launched on the return): upstream Ready → dependent Ready", withDW)
	row(fmt.Sprintf("(c) no watchdog (back-off ≥ %s): upstream Ready → dependent Ready", minBackoff), without)
	row("(d) depwatch, armed weeder Job (launched when the outage began): upstream Ready → dependent Ready", armed)
	fmt.Fprintf(&b, "\n(b) − (a), median: %s (target ≤ 2 s); (d) − (a), median: %s (target ≤ 0.5 s); (c) / (b), median: %.1f×, (c) / (d), median: %.1f× (target ≥ 20×)\n",
		fmtSeconds(median(withDW)-median(floor)), fmtSeconds(median(armed)-median(floor)),
		median(without).Seconds()/median(withDW).Seconds(), median(without).Seconds()/median(armed).Seconds())
	if c := metricsAfter.count - metricsBefore.count; c > 0 {
		fmt.Fprintf(&b, "coordinator trigger → Job created (metric depwatch_coordinator_trigger_to_job_created_seconds): mean %s over %d launches\n",
			fmtSeconds(time.Duration((metricsAfter.sum-metricsBefore.sum)/float64(c)*float64(time.Second))), int(c))
	}
	fmt.Println(b.String())
	out := filepath.Join(repoRoot, "_output", "bench-recovery.md")
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err == nil {
		t.Logf("table written to %s", out)
	}
}

// benchFloor measures a fresh dependent pod's create → Ready n times, the upstream up.
func benchFloor(t *testing.T, n int) []time.Duration {
	ns := newNamespace(t, "bench-floor")
	p := newPairNamed(t, ns, "unwatched")
	dep, err := kube.AppsV1().Deployments(ns).Get(context.Background(), dependentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Duration
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("floor-%d", i), Namespace: ns, Labels: map[string]string{"bench": "floor"}},
			Spec:       dep.Spec.Template.Spec,
		}
		start := time.Now()
		if _, err := kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "floor pod ready", func() (bool, error) {
			got, err := kube.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
			return err == nil && podReady(*got), err
		})
		out = append(out, time.Since(start))
		_ = kube.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	}
	_ = p
	return out
}

// benchOutages takes n pairs down together, and brings each back once its dependent's
// back-off is at least minBackoff with most of it still ahead; it returns upstream Ready →
// dependent Ready for each. With serial set, a recovery holds it from the wait for the crash
// loop to the dependent's Ready (one at a time).
func benchOutages(t *testing.T, n int, svc string, minBackoff time.Duration, serial *sync.Mutex) []time.Duration {
	pairs := make([]*pair, n)
	for i := range pairs {
		pairs[i] = newPairNamed(t, newNamespace(t, "bench-"+svc), svc)
	}
	for _, p := range pairs {
		p.scaleUpstream(0)
	}
	out := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.waitServiceReady(false, time.Minute)
			if serial != nil {
				serial.Lock()
				defer serial.Unlock()
			}
			// Most of the back-off ahead: only a back-off of minBackoff or longer leaves that
			// much, and the weeder columns recover long before the kubelet would.
			cl := p.waitCrashLoop(minBackoff*3/4, 6*time.Minute)
			p.scaleUpstream(1)
			up := p.waitServiceReady(true, time.Minute)
			_, ready := p.waitDependentReady(time.Until(cl.kubeletRestart)+time.Minute, "")
			out[i] = ready.Sub(up)
			t.Logf("%s/%s: back-off %s, upstream Ready → dependent Ready %s", p.ns, svc, cl.backoff, fmtSeconds(out[i]))
		}()
	}
	wg.Wait()
	return out
}

type histogram struct{ sum, count float64 }

// triggerLatency scrapes the coordinator's trigger → Job-created histogram (weeder) from its
// metrics port on loopback (the local overlay binds 127.0.0.1:19643).
func triggerLatency(t *testing.T) histogram {
	var h histogram
	resp, err := http.Get("http://127.0.0.1:19643/metrics")
	if err != nil {
		t.Logf("reading the coordinator's metrics: %v", err)
		return h
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `kind="weeder"`) {
			continue
		}
		fields := strings.Fields(line)
		v, _ := strconv.ParseFloat(fields[len(fields)-1], 64)
		switch {
		case strings.HasPrefix(line, "depwatch_coordinator_trigger_to_job_created_seconds_sum"):
			h.sum = v
		case strings.HasPrefix(line, "depwatch_coordinator_trigger_to_job_created_seconds_count"):
			h.count = v
		}
	}
	return h
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtSeconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
