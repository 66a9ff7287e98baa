//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/test/upstream"
)

// TestProbeScalesDependentsDownInLevelOrderAndBackUp: most worker leases stop being renewed
// → a probe Job scales kube-controller-manager (level 0), then machine-controller-manager
// (1), then cluster-autoscaler (2) to 0, keeping replicas=2 in the annotation; renewed again
// → cluster-autoscaler (level 0 up) then the other two (level 1) back to 2, annotations gone.
func TestProbeScalesDependentsDownInLevelOrderAndBackUp(t *testing.T) {
	parallelLong(t, 110*time.Second)
	s := newProbeScenario(t, "probe-cycle", probeSetup{})
	started := s.start()

	// Healthy leases: the first probe decides scale-up, finds everything up: "healthy".
	lines := s.waitLog(2*time.Minute, map[string]string{"result": "healthy", "msg": "Probe done: healthy."})
	if _, ok := findLine(lines, map[string]string{"action": "scale-up"}); !ok {
		t.Errorf("the healthy probe's log has no scale-up decision line")
	}
	t.Logf("first probe finished %.1fs after the namespace was selected", time.Since(started).Seconds())
	// kubectl logs of a probe Job of the namespace whose pod has started (a shard's Job covers
	// other namespaces too: its log names each).
	s.mu.Lock()
	named := slices.Clone(s.order)
	s.mu.Unlock()
	if len(named) == 0 {
		t.Fatal("no probe Job left to read with kubectl logs")
	}
	job := named[len(named)-1]
	out := jobLogs(t, depwatchNS, job)
	if !strings.Contains(out, `"namespace":"`+s.ns+`"`) || (!strings.Contains(out, `"action":"scale-up"`) && !strings.Contains(out, `"action":"none"`) && !strings.Contains(out, `"action":"scale-down"`)) {
		t.Errorf("kubectl logs job/%s does not show the namespace's decision:\n%s", job, out)
	}

	// 3 of 4 workers stop renewing: 3 of 5 leases (with the real node's) expire 15 s later.
	stopped := time.Now()
	s.setRenewing(false, "w1", "w2", "w3")
	for _, name := range dependents {
		s.waitReplicas(name, 0, 120*time.Second)
	}
	t.Logf("all dependents at 0 replicas %.1fs after the leases stopped being renewed (15 s of it is the expiry)", time.Since(stopped).Seconds())
	for _, name := range dependents {
		d := s.deployment(name)
		if got := d.Annotations[annReplicas]; got != "2" {
			t.Errorf("%s: annotation %s=%q, want 2", name, annReplicas, got)
		}
		if _, ok := d.Annotations[annMeltdown]; !ok {
			t.Errorf("%s: annotation %s missing", name, annMeltdown)
		}
		if ev := eventsFor(t, s.ns, name)["ScaledDown"]; len(ev) == 0 {
			t.Errorf("%s: no ScaledDown Event", name)
		}
	}
	down := s.phase(30*time.Second, "scale-down", stopped, map[string]string{"action": "scaled-down", "name": ca})
	assertOrder(t, "scale-down", down, levelOrderDown)

	// Renewed again: scale-up, cluster-autoscaler first.
	renewed := time.Now()
	s.setRenewing(true, "w1", "w2", "w3")
	for _, name := range dependents {
		s.waitReplicas(name, dependentReplicas, 120*time.Second)
	}
	waitFor(t, 60*time.Second, "the scale-down annotations removed", func() (bool, error) {
		for _, name := range dependents {
			d, err := kube.AppsV1().Deployments(s.ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if _, ok := d.Annotations[annReplicas]; ok {
				return false, nil
			}
			if _, ok := d.Annotations[annMeltdown]; ok {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("all dependents back at 2 ready replicas, annotations removed, %.1fs after the leases were renewed", time.Since(renewed).Seconds())
	up := s.phase(30*time.Second, "scale-up", renewed, map[string]string{"action": "scaled-up", "name": kcm})
	assertOrder(t, "scale-up", up, []step{{ca, "scaled-up"}, {ca, "ready"}, {kcm, "scaled-up"}})
	assertOrder(t, "scale-up", up, []step{{ca, "ready"}, {mcm, "scaled-up"}})
	for _, name := range []string{kcm, mcm, ca} {
		if ev := eventsFor(t, s.ns, name)["ScaledUp"]; len(ev) == 0 {
			t.Errorf("%s: no ScaledUp Event", name)
		}
	}
}

// TestProbeConvergesAfterAHalfDoneScaleDownAndHonoursIgnoreScaling: kube-controller-manager
// is left as a probe Job killed after level 0 leaves it (replicas 0, annotated replicas=2);
// cluster-autoscaler is annotated ignore-scaling=true. The next probe (leases expired) scales
// machine-controller-manager down, keeps the stored 2 of kube-controller-manager and leaves
// cluster-autoscaler alone; once the leases are renewed both come back to 2.
func TestProbeConvergesAfterAHalfDoneScaleDownAndHonoursIgnoreScaling(t *testing.T) {
	parallelLong(t, 80*time.Second)
	s := newProbeScenario(t, "probe-resume", probeSetup{expired: []string{"w1", "w2", "w3"}})
	mustKubectl(t, "-n", s.ns, "annotate", "deployment", ca, annIgnoreScaling+"=true")
	mustKubectl(t, "-n", s.ns, "annotate", "deployment", kcm, annReplicas+"=2", annMeltdown+"=")
	mustKubectl(t, "-n", s.ns, "scale", "deployment", kcm, "--replicas=0")
	s.waitReplicas(kcm, 0, 60*time.Second)
	s.start()

	s.waitReplicas(mcm, 0, 90*time.Second)
	lines := s.waitLog(30*time.Second, map[string]string{"action": "scaled-down", "name": mcm})
	if _, ok := findLine(lines, map[string]string{"action": "already-down", "name": kcm}); !ok {
		t.Errorf("kube-controller-manager was not reported already-down")
	}
	if _, ok := findLine(lines, map[string]string{"action": "ignored", "name": ca}); !ok {
		t.Errorf("cluster-autoscaler was not reported ignored")
	}
	if got := s.deployment(kcm).Annotations[annReplicas]; got != "2" {
		t.Errorf("kube-controller-manager's stored replicas = %q after the second scale-down, want 2", got)
	}
	if d := s.deployment(ca); *d.Spec.Replicas != 2 || d.Annotations[annReplicas] != "" {
		t.Errorf("cluster-autoscaler (ignore-scaling) was touched: replicas %d, annotations %v", *d.Spec.Replicas, d.Annotations)
	}

	s.setRenewing(true, "w1", "w2", "w3")
	s.waitReplicas(kcm, dependentReplicas, 120*time.Second)
	s.waitReplicas(mcm, dependentReplicas, 60*time.Second)
	if d := s.deployment(ca); *d.Spec.Replicas != 2 {
		t.Errorf("cluster-autoscaler (ignore-scaling) replicas = %d, want 2", *d.Spec.Replicas)
	}
}

// TestProbeScalesNothingWhenTheAPIServerIsUnreachable: the Secret's kubeconfig points at a
// closed loopback port; the leases say scale down, but without a reachable API server there
// is no decision: nothing is scaled and the log says api-unreachable.
func TestProbeScalesNothingWhenTheAPIServerIsUnreachable(t *testing.T) {
	parallel(t)
	port := freePort(t) // nothing listens there
	kc := strings.ReplaceAll(mustKubectl(t, "config", "view", "--raw", "--flatten", "--minify"),
		"https://"+apiServerHost+":"+apiServerPort, fmt.Sprintf("https://127.0.0.1:%d", port))
	s := newProbeScenario(t, "probe-unreach", probeSetup{kubeconfig: kc, expired: []string{"w1", "w2", "w3", "w4"}})
	s.start()

	lines := s.waitLog(2*time.Minute, map[string]string{"result": "api-unreachable"})
	if l, ok := findLine(lines, map[string]string{"result": "api-unreachable"}); ok {
		t.Logf("probe: %s (%s)", l.str("msg"), l.str("reason"))
	}
	// Two more intervals: still nothing scaled.
	time.Sleep(10 * time.Second)
	for _, name := range dependents {
		d := s.deployment(name)
		if *d.Spec.Replicas != dependentReplicas || d.Annotations[annReplicas] != "" {
			t.Errorf("%s was touched with the API server unreachable: replicas %d, annotations %v", name, *d.Spec.Replicas, d.Annotations)
		}
	}
	msg := s.report(2 * time.Minute)
	if rep, err := probe.DecodeReport(msg); err != nil || rep.Namespaces[s.ns].Last != probe.ResultAPIUnreachable {
		t.Errorf("the report does not say api-unreachable for %s: %+v (%v) in %q", s.ns, rep.Namespaces[s.ns], err, msg)
	}
}

// TestProbeSkipsAHibernatedShoot: with Gardener's Cluster kind installed and the namespace's
// Cluster saying hibernation.enabled, no probe Job is launched; when hibernation ends,
// probing starts.
func TestProbeSkipsAHibernatedShoot(t *testing.T) {
	parallelLong(t, 75*time.Second)
	s := newProbeScenario(t, "probe-hib", probeSetup{noWorkload: true})
	found := func() int {
		out, _ := kubectl(t, "-n", depwatchNS, "logs", "deployment/depwatch-coordinator", "--tail=-1")
		return strings.Count(out, "Gardener Cluster resources found")
	}
	ensureClusterCRD(t) // kept afterwards: other tests use it
	writeCluster := func(hibernated bool) {
		applyCluster(t, s.ns, upstream.Shoot{HibernationEnabled: hibernated, Hibernated: hibernated})
	}
	writeCluster(true)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "cluster.extensions.gardener.cloud", s.ns, "--ignore-not-found") })
	waitFor(t, 60*time.Second, "the coordinator to find Gardener's Cluster kind", func() (bool, error) {
		return found() > 0, nil
	})

	s.start()
	time.Sleep(15 * time.Second) // initialDelay 2 s + two intervals of 5 s, and more
	if jobs := s.probeJobs(); len(jobs) > 0 {
		t.Fatalf("%d probe Jobs launched for a hibernated shoot, first %s", len(jobs), jobs[0].Name)
	}
	woke := time.Now()
	writeCluster(false)
	// A bound on progress, not speed: the shard's next Job, under a busy suite.
	waitFor(t, 2*time.Minute, "a probe Job once hibernation ended", func() (bool, error) {
		return len(s.probeJobs()) > 0, nil
	})
	t.Logf("first probe Job %.1fs after hibernation ended", time.Since(woke).Seconds())
}

// step is a resource's action in a log; action may name alternatives, "ready|already-down".
type step struct{ name, action string }

// levelOrderDown is dependency-watchdog's scale-down order for the three dependents: each
// level has no ready replica before the next is scaled. A level an earlier probe set to 0
// (its Job's run ended while it waited) is found "already-down" by the next probe, which
// waits for its last ready replica and says so.
var levelOrderDown = []step{
	{kcm, "scaled-down"}, {kcm, "ready|already-down"}, {mcm, "scaled-down"}, {mcm, "ready|already-down"}, {ca, "scaled-down"},
}

// assertOrder checks that the log lines for the steps appear in this order (a step with
// alternatives: the first line of any of them, as lineIndex finds it).
func assertOrder(t *testing.T, what string, lines []logLine, steps []step) {
	t.Helper()
	last := -1
	for _, st := range steps {
		i := lineIndex(lines, map[string]string{"name": st.name, "action": st.action})
		if i < 0 {
			t.Errorf("%s: no %s line for %s", what, st.action, st.name)
			return
		}
		if i < last {
			t.Errorf("%s: %s %s came before the step preceding it (line %d < %d)", what, st.name, st.action, i, last)
		}
		last = i
	}
}
