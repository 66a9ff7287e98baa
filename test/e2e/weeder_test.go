//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The weeder scenarios share the one coordinator installed from manifests/overlays/local.
// Each has its own namespace and finds its Jobs by their targets, so they run in parallel;
// the one that stops its coordinator has a private one.

func TestWeederRestartsCrashLoopingDependentWhenUpstreamComesBack(t *testing.T) {
	parallelLong(t, 50*time.Second)
	ensureCoordinator(t)
	ns := newNamespace(t, "weeder")
	p := newPair(t, ns)

	outageStart := p.beginOutage()
	p.waitServiceReady(false, time.Minute)
	// The armed weeder acts within seconds of the return; 30 s ahead (the 40 s back-off)
	// leaves the kubelet far behind it.
	cl := p.waitCrashLoop(30*time.Second, 3*time.Minute)
	t.Logf("dependent %s is in CrashLoopBackOff (back-off %s); the kubelet would restart it at %s",
		cl.pod.Name, cl.backoff, cl.kubeletRestart.Format(time.RFC3339))

	p.returnBeforeTheKubelet(cl)
	jobs := jobsCreatedAfter(p.weederJobs(), outageStart)
	if len(jobs) != 1 {
		t.Fatalf("got %d weeder jobs for %s/%s since the outage began, want exactly 1", len(jobs), ns, upstreamName)
	}
	job := jobs[0]
	if got := job.Annotations["depwatch.io/trigger-time"]; got == "" {
		t.Errorf("weeder job %s has no depwatch.io/trigger-time annotation", job.Name)
	}
	logs, _ := waitJobLogLine(t, depwatchNS, job.Name, map[string]string{"namespace": ns, "pod": cl.pod.Name, "action": "deleted"}, 30*time.Second)
	if !strings.Contains(logs, "CrashLoopBackOff") {
		t.Errorf("the weeder's log gives no CrashLoopBackOff reason:\n%s", logs)
	}
	// With arming on (the local config's default) the one Job was launched as the outage
	// began, armed: Event WeederArmed; with arming off it would be WeederStarted.
	ev := eventsFor(t, ns, upstreamName)
	if len(ev["WeederArmed"])+len(ev["WeederStarted"]) == 0 {
		t.Errorf("no WeederArmed or WeederStarted event was recorded on service %s/%s", ns, upstreamName)
	}
}

// returnBeforeTheKubelet brings the pair's upstream back and checks that depwatch's weeder,
// not the kubelet, restarted cl's crash-looping pod (restartedByWeeder).
func (p *pair) returnBeforeTheKubelet(cl crashLoop) {
	p.t.Helper()
	p.scaleUpstream(1)
	p.waitServiceReady(true, time.Minute)
	ready, took := p.restartedByWeeder(cl)
	p.t.Logf("upstream Ready → dependent %s Ready: %s", ready.Name, took)
}

func TestWeederLaunchesNothingWhenAReadyServiceStaysReady(t *testing.T) {
	parallel(t)
	ensureCoordinator(t)
	ns := newNamespace(t, "steady")
	p := newPair(t, ns)
	// Let the coordinator see the pair's start-up before counting.
	time.Sleep(3 * time.Second)
	before := len(p.weederJobs())

	// A second ready endpoint, then back to one: the service is Ready throughout.
	p.addUpstream("upstream-b", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	waitFor(t, time.Minute, "two ready upstream endpoints", func() (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(context.Background(), "upstream-b", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 1, err
	})
	scaleDeployment(t, ns, "upstream-b", 0)
	time.Sleep(5 * time.Second)
	if after := len(p.weederJobs()); after != before {
		t.Errorf("a Ready → Ready change launched %d weeder job(s); it must launch none", after-before)
	}
}

func TestCoordinatorCatchesUpOnRecoveryThatHappenedWhileItWasDown(t *testing.T) {
	parallelLong(t, 5*time.Minute)
	c := privateCoordinator(t, "catchup", nil)
	ns := c.namespace(t, "catchup")
	p := newPair(t, ns)

	// The outage begins with the coordinator up: it stops the weeder still running from the
	// pair's start and arms one. Then the coordinator goes down and the armed Job goes away
	// too (as when it gave up after armedMaxWait): nothing is left to act on the return.
	outageStart := p.beginOutage()
	p.waitServiceReady(false, time.Minute)
	armed := p.waitArmedJob(outageStart, time.Minute)
	c.scale(t, 0)
	c.waitReplicas(t, 0)
	mustKubectl(t, "-n", depwatchNS, "delete", "job", armed.Name, "--wait=true")
	// After the return the coordinator's pod must start, take the Lease and launch the
	// catch-up Job, that Job's pod must start and the replacement dependent too, all before
	// the kubelet's own restart: seconds on an idle machine, 70 s on one running make test
	// (three pod starts). Two minutes ahead takes the 160 s back-off.
	cl := p.waitCrashLoop(2*time.Minute, 7*time.Minute)

	p.scaleUpstream(1)
	upAt := p.waitServiceReady(true, time.Minute)
	c.scale(t, 1)

	ready, took := p.restartedByWeeder(cl)
	t.Logf("upstream Ready (coordinator down) → dependent %s Ready: %s", ready.Name, took)
	var catchUp int
	for _, j := range jobsCreatedAfter(p.weederJobs(), upAt) {
		if j.Annotations["depwatch.io/trigger"] == "catch-up" {
			catchUp++
		}
	}
	if catchUp != 1 {
		t.Errorf("got %d catch-up weeder jobs for %s/%s, want 1", catchUp, ns, upstreamName)
	}
}
