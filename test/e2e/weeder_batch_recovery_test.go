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
	"k8s.io/apimachinery/pkg/types"

	"github.com/depwatch/depwatch/jobs"
)

// recoveryPairs is how many real pairs share the one batch Job: as many as the storm test's.
const recoveryPairs = stormPairs

// TestABatchWeederRestartsEachDependentAtItsOwnServicesReturn: 8 real upstreams go down at
// once and are covered by ONE batch weeder Job (a private coordinator that always batches and
// lingers long enough for all 8). They come back one after the other, a second apart; each
// crash-looping dependent is reaped by depwatch after its own upstream's return (not held
// for the batch's other services) and before the kubelet's own restart; how soon
// after its return (about 1 s on a quiet machine, as a lone pair's) is in the log.
func TestABatchWeederRestartsEachDependentAtItsOwnServicesReturn(t *testing.T) {
	parallelLong(t, 180*time.Second)
	c := privateCoordinator(t, "wrecov", map[string]string{"DEPWATCH_WEEDER_BATCH_AFTER": "0", "DEPWATCH_WEEDER_BATCH_LINGER": "15s"})
	pairs := make([]*pair, recoveryPairs)
	nss := map[string]bool{}
	for i := range pairs {
		pairs[i] = startPair(t, c.namespace(t, fmt.Sprintf("wrecov%d", i)), upstreamName)
		nss[pairs[i].ns] = true
	}
	for _, p := range pairs {
		p.waitServiceReady(true, 2*time.Minute)
		p.startDependent()
	}
	for _, p := range pairs {
		p.waitDependentReady(2*time.Minute, "")
	}
	waitFirstReturnsLaunched(t, c, len(pairs))

	stormStart := time.Now()
	for _, p := range pairs {
		p.scaleUpstream(0)
	}
	var by map[string][]string
	waitFor(t, 90*time.Second, "every service to be covered by the one batch weeder Job", func() (bool, error) {
		by, _ = coveringJobs(t, stormStart, nss)
		for _, p := range pairs {
			if len(by[p.ns+"/"+p.svc]) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	_, created := coveringJobs(t, stormStart, nss)
	if len(created) != 1 || created[0].Labels[jobs.LabelBatch] != "true" || !jobs.Armed(&created[0]) {
		t.Fatalf("%d weeder Jobs cover the storm (%v); want one armed batch Job for all %d services", len(created), by, len(pairs))
	}
	job := created[0]
	t.Logf("%d services down: covered by batch Job %s (%s after the storm began)", len(pairs), job.Name, time.Since(stormStart).Round(time.Second))

	deps := make([]podsOf, len(pairs))
	for i, p := range pairs {
		deps[i] = p.dependent()
	}
	cls := waitForBackOffOfMost(t, 30*time.Second, 8*time.Minute, deps...)
	for i := range pairs {
		if cls[i].judged() {
			requireBackOffAhead(t, cls[i], 25*time.Second, "bringing the upstreams back")
		}
	}

	// The returns, a second apart, and one poller that notes when each upstream is Ready and
	// when each dependent has a new Ready pod (the test's own waits would note later pairs late).
	upAt, readyAt := make([]time.Time, len(pairs)), make([]time.Time, len(pairs))
	for i := range readyAt {
		if !cls[i].judged() {
			readyAt[i] = time.Now() // not judged: not waited for
		}
	}
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		pollReturns(pairs, cls, upAt, readyAt, stop)
	}()
	for _, p := range pairs {
		p.scaleUpstream(1)
		time.Sleep(time.Second)
	}
	// The poller's figures are for the log; the verdict is each pair's own (restartedByWeeder):
	// reaped by depwatch after its own upstream's return and before the kubelet's restart.
	// The wait ends with the last kubelet restart any of them could have had.
	var last time.Time
	for _, cl := range cls {
		if cl.kubeletRestart.After(last) {
			last = cl.kubeletRestart
		}
	}
	for time.Now().Before(last) && slices.ContainsFunc(readyAt, func(at time.Time) bool { return at.IsZero() }) {
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	<-polled

	var took []time.Duration // as the poller saw them: finer than the cluster's whole seconds
	for i, p := range pairs {
		if !cls[i].judged() {
			continue
		}
		ready, _ := p.restartedByWeeder(cls[i])
		if upAt[i].IsZero() || readyAt[i].IsZero() {
			continue
		}
		d := readyAt[i].Sub(upAt[i])
		took = append(took, d)
		t.Logf("%s: upstream Ready %s → new dependent %s Ready in %s", p.ns, clock(upAt[i]), ready.Name, d.Round(10*time.Millisecond))
	}
	t.Logf("upstream Ready → dependent Ready over %d pairs in one batch Job: p50 %s, max %s", len(took), percentile(took, .5).Round(10*time.Millisecond), percentile(took, 1).Round(10*time.Millisecond))

	// The Job's log tells each target's story on its own: the line that starts its reaping at
	// its own return. The crash-looping pod carries the Reaped Event of the weeder that
	// deleted it: this Job's, or that of the unarmed batch Job that covered the services'
	// first return when the pairs were started (BATCH_AFTER 0), still in its RUN_DURATION and
	// reaping again at this return (its gate paused it through the outage). Either restarts
	// the dependent once; which one deletes first is a race this test does not fix. When the
	// other Job won it, this Job's turn at that return may come a moment after the dependent
	// is Ready: its log is read until every target's line is there (a hang catcher, not a
	// figure).
	started := map[string]bool{}
	waitFor(t, minWait, "the batch Job's log to start every target's reaping", func() (bool, error) {
		out, err := kubectl(t, "-n", depwatchNS, "logs", "job/"+job.Name)
		if err != nil {
			return false, nil
		}
		for _, l := range parseLogLines(out) {
			if _, ok := l["ready_at"]; ok && strings.Contains(l.str("msg"), "reaping starts now") {
				started[l.str("target")] = true
			}
		}
		var missing []string
		for _, p := range pairs {
			if !started[p.ns+"/"+p.svc] {
				missing = append(missing, p.ns+"/"+p.svc)
			}
		}
		if len(missing) > 0 {
			return false, fmt.Errorf("batch Job %s's log has no line starting the reaping of %v at its return", job.Name, missing)
		}
		return true, nil
	})
}

// waitFirstReturnsLaunched waits until c has launched what the pairs' first return asked of
// it: all n services Ready in its eyes and none waiting for a batch Job, on two looks a second
// apart. The storm must form a batch of its own: an outage that meets its service's return
// still lingering in a batch keeps that place, so a storm begun just as that batch falls due
// leaves in it with only the outages seen so far, the rest in another Job.
func waitFirstReturnsLaunched(t *testing.T, c *deployedCoordinator, n int) {
	t.Helper()
	settled := func() bool {
		return c.metric(t, "depwatch_coordinator_services_ready") >= float64(n) &&
			c.metric(t, "depwatch_coordinator_weeder_services_waiting") == 0
	}
	waitFor(t, time.Minute, "the coordinator to have launched the weeders of the pairs' first return", func() (bool, error) {
		if !settled() {
			return false, nil
		}
		time.Sleep(time.Second)
		return settled(), nil
	})
}

// pollReturns notes, every 200 ms until stop, when each pair's upstream is first seen Ready and
// when its dependent first has a Ready pod other than the crash-looping one.
func pollReturns(pairs []*pair, cls []crashLoop, upAt, readyAt []time.Time, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		for i, p := range pairs {
			now := time.Now()
			if upAt[i].IsZero() {
				if ok, err := p.serviceReady(); err == nil && ok {
					upAt[i] = now
				}
			}
			if readyAt[i].IsZero() && newReadyPod(p, cls[i].pod.UID) {
				readyAt[i] = now
			}
		}
	}
}

func newReadyPod(p *pair, old types.UID) bool {
	list, err := kube.CoreV1().Pods(p.ns).List(context.Background(), metav1.ListOptions{LabelSelector: p.dependent().selector})
	if err != nil {
		return false
	}
	for _, pod := range list.Items {
		if pod.DeletionTimestamp == nil && pod.UID != old && podReady(pod) {
			return true
		}
	}
	return false
}
