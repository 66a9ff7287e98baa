//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
)

// The armed weeder: the coordinator launches the weeder Job when the upstream goes
// down; it waits for the upstream (START_WHEN_READY) and restarts the crash-looping dependent
// the moment the upstream is Ready again.

// armedJobs keeps the Jobs launched armed on an outage.
func armedJobs(jobs []batchv1.Job) []batchv1.Job {
	var out []batchv1.Job
	for _, j := range jobs {
		if j.Annotations["depwatch.io/trigger"] == "outage" {
			out = append(out, j)
		}
	}
	return out
}

// waitArmedJob waits for the pair's armed weeder Job (created at or after since) to log that
// it is armed, so the Job is running and waiting before the test brings the upstream back.
func (p *pair) waitArmedJob(since time.Time, timeout time.Duration) batchv1.Job {
	p.t.Helper()
	var job batchv1.Job
	waitFor(p.t, timeout, fmt.Sprintf("an armed weeder Job for %s/%s, waiting", p.ns, p.svc), func() (bool, error) {
		armed := armedJobs(jobsCreatedAfter(p.weederJobs(), since))
		if len(armed) == 0 {
			return false, nil
		}
		job = armed[len(armed)-1]
		out, err := runKubectl("-n", p.jobsNamespace(), "logs", "job/"+job.Name)
		return err == nil && strings.Contains(out, "Reaper armed at"), nil
	})
	return job
}

// beginOutage takes the pair's upstream away once no armed weeder Job covers the service,
// and returns when it did. A service can flap while its pair is set up (its EndpointSlice briefly
// without a ready endpoint, seen on the lab under load): the coordinator rightly arms a weeder
// for that, and keeps it through the test's own outage (PlanWeeder keeps an active armed
// weeder), so a test that waits for a weeder armed on its outage first lets that one end
// (it opens when the service is back and runs its watchDuration). An unarmed weeder still
// running from the pair's start is replaced by the outage's armed one, as it should be.
func (p *pair) beginOutage() time.Time {
	p.t.Helper()
	waitFor(p.t, 3*time.Minute, fmt.Sprintf("no active armed weeder Job for %s/%s before its outage", p.ns, p.svc), func() (bool, error) {
		for _, j := range armedJobs(p.weederJobs()) {
			if j.DeletionTimestamp == nil && !jobDone(&j) {
				return false, nil
			}
		}
		return true, nil
	})
	start := time.Now()
	p.scaleUpstream(0)
	return start
}

// TestArmedWeederWaitsDuringTheOutageAndRestartsTheDependentOnReturn: the weeder Job is
// launched, armed, as the outage begins; at the return it (not the kubelet) restarts the
// crash-looping dependent, and the return launches nothing more.
func TestArmedWeederWaitsDuringTheOutageAndRestartsTheDependentOnReturn(t *testing.T) {
	parallelLong(t, 60*time.Second)
	ensureCoordinator(t)
	ns := newNamespace(t, "armed")
	p := newPair(t, ns)

	outageStart := p.beginOutage()
	p.waitServiceReady(false, time.Minute)
	job := p.waitArmedJob(outageStart, time.Minute)
	t.Logf("armed weeder Job %s is waiting (armed at %s)", job.Name, job.Annotations["depwatch.io/armed-at"])
	if job.Annotations["depwatch.io/armed-at"] == "" {
		t.Errorf("armed Job %s has no depwatch.io/armed-at annotation", job.Name)
	}
	// The armed weeder acts within seconds of the return; 30 s ahead (the 40 s back-off)
	// leaves the kubelet far behind it.
	cl := p.waitCrashLoop(30*time.Second, 3*time.Minute)
	t.Logf("dependent %s is in CrashLoopBackOff (back-off %s)", cl.pod.Name, cl.backoff)

	p.scaleUpstream(1)
	p.waitServiceReady(true, time.Minute)
	ready, took := p.restartedByWeeder(cl)
	t.Logf("upstream Ready → dependent %s Ready: %s (armed weeder)", ready.Name, took)

	// Exactly one Job for this outage: the armed one (the return launched nothing).
	time.Sleep(2 * time.Second) // room for a (wrong) second launch
	all := jobsCreatedAfter(p.weederJobs(), outageStart)
	if len(all) != 1 || all[0].Name != job.Name {
		t.Fatalf("weeder Jobs since the outage began: %v, want only the armed %s", jobNames(all), job.Name)
	}

	// Its log tells the story: armed, service Ready, the pod reaped.
	_, lines := waitJobLogLine(t, depwatchNS, job.Name, map[string]string{"namespace": ns, "pod": cl.pod.Name, "action": "deleted"}, 30*time.Second)
	var armedAt, readyLine bool
	for _, l := range lines {
		armedAt = armedAt || strings.HasPrefix(l.str("msg"), "Reaper armed at ")
		readyLine = readyLine || (strings.HasPrefix(l.str("msg"), "Service "+ns+"/"+upstreamName+" is Ready at ") && l["waited_seconds"] != nil)
	}
	if !armedAt || !readyLine {
		t.Errorf("the armed Job's log lacks the armed line (%v) or the Ready line (%v)", armedAt, readyLine)
	}
	if len(eventsFor(t, ns, upstreamName)["WeederArmed"]) != 1 {
		t.Errorf("want one WeederArmed event on service %s/%s", ns, upstreamName)
	}
}

func TestArmedWeederKeepsOneJobWhileTheUpstreamFlaps(t *testing.T) {
	parallel(t)
	ensureCoordinator(t)
	ns := newNamespace(t, "flap")
	p := newPair(t, ns)

	outageStart := p.beginOutage()
	p.waitServiceReady(false, time.Minute)
	job := p.waitArmedJob(outageStart, time.Minute)
	for i := 0; i < 2; i++ {
		p.scaleUpstream(1)
		p.waitServiceReady(true, time.Minute)
		time.Sleep(2 * time.Second)
		p.scaleUpstream(0)
		p.waitServiceReady(false, time.Minute)
		time.Sleep(2 * time.Second)
	}
	p.scaleUpstream(1)
	p.waitServiceReady(true, time.Minute)
	time.Sleep(3 * time.Second) // room for a (wrong) second launch

	all := jobsCreatedAfter(p.weederJobs(), outageStart)
	if len(all) != 1 || all[0].Name != job.Name {
		t.Fatalf("weeder Jobs since the flapping began: %v, want only the armed %s", jobNames(all), job.Name)
	}
	if all[0].Status.Succeeded > 0 || all[0].Status.Failed > 0 {
		t.Errorf("the armed Job ended: %+v", all[0].Status)
	}
	out := mustKubectl(t, "-n", depwatchNS, "logs", "job/"+job.Name)
	for _, want := range []string{"is Ready at", "reaping paused", "reaping resumes"} {
		if !strings.Contains(out, want) {
			t.Errorf("the armed Job's log lacks %q:\n%s", want, out)
		}
	}
	p.waitDependentReady(2*time.Minute, "")
}

func jobNames(jobs []batchv1.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return out
}
