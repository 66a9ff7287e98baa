//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/jobs"
)

// coveringJobs maps each service (<namespace>/<service>) to the weeder Jobs created since
// `since` that cover it, counting only Jobs for services in the namespaces nss (the other
// tests' Jobs are in the depwatch namespace too; nil: every namespace).
func coveringJobs(t *testing.T, since time.Time, nss map[string]bool) (map[string][]string, []batchv1.Job) {
	t.Helper()
	list, err := kube.BatchV1().Jobs(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/kind=weeder"})
	if err != nil {
		t.Fatalf("listing weeder Jobs: %v", err)
	}
	var recent []batchv1.Job
	by := map[string][]string{}
	for _, j := range jobsCreatedAfter(list.Items, since) {
		ours := false
		for _, k := range jobs.ReadFacts(&j).Covers() {
			if ns, _, _ := strings.Cut(k, "/"); nss == nil || nss[ns] {
				by[k] = append(by[k], j.Name)
				ours = true
			}
		}
		if ours {
			recent = append(recent, j)
		}
	}
	return by, recent
}

// stormPairs is how many real upstream/dependent pairs go down at once: as many as the
// 2-core lab runs beside the rest of the suite, and enough that batching must show.
const stormPairs = 8

// TestAStormOfOutagesIsCoveredByFewWeederJobsAndEveryDependentRecovers: with the batching
// threshold set low (2 Jobs of their own per window), 8 real upstreams go down at once. The
// first 2 get Jobs of their own, the others share batch Jobs; every service is covered by an
// armed Job and gets its WeederArmed Event; when the upstreams return, every crash-looping
// dependent is restarted by its weeder well before the kubelet's own restart. A lone outage
// afterwards still gets a Job of its own.
func TestAStormOfOutagesIsCoveredByFewWeederJobsAndEveryDependentRecovers(t *testing.T) {
	parallelLong(t, 210*time.Second)
	// A private coordinator: its batching counts only this test's launches.
	c := privateCoordinator(t, "wstorm", map[string]string{"DEPWATCH_WEEDER_BATCH_AFTER": "2", "DEPWATCH_WEEDER_BATCH_WINDOW": "20s"})
	pairs := make([]*pair, stormPairs)
	nss := map[string]bool{}
	for i := range pairs {
		pairs[i] = startPair(t, c.namespace(t, fmt.Sprintf("wstorm%d", i)), upstreamName)
		nss[pairs[i].ns] = true
	}
	lone := startPair(t, c.namespace(t, "wstorm-lone"), upstreamName)
	lone.waitServiceReady(true, 2*time.Minute)
	for _, p := range pairs {
		p.waitServiceReady(true, 2*time.Minute)
		p.startDependent()
	}
	for _, p := range pairs {
		p.waitDependentReady(2*time.Minute, "")
	}
	time.Sleep(25 * time.Second) // past the window: the storm starts from no recent launch

	stormStart := time.Now()
	for _, p := range pairs {
		p.scaleUpstream(0)
	}
	for _, p := range pairs {
		p.waitServiceReady(false, time.Minute)
	}
	var by map[string][]string
	var created []batchv1.Job
	waitFor(t, 90*time.Second, "every service of the storm to be covered by an armed weeder Job", func() (bool, error) {
		by, created = coveringJobs(t, stormStart, nss)
		for _, p := range pairs {
			if len(by[p.ns+"/"+p.svc]) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	own, batch := 0, 0
	for _, j := range created {
		if !jobs.Armed(&j) {
			t.Errorf("weeder Job %s is not armed", j.Name)
		}
		if j.Labels[jobs.LabelBatch] == "true" {
			batch++
		} else {
			own++
		}
	}
	t.Logf("%d services down: %d Jobs of their own, %d batch Jobs (%s after the storm began)", len(pairs), own, batch, time.Since(stormStart).Round(time.Second))
	if len(created) >= len(pairs) || own != 2 || batch == 0 {
		t.Errorf("Jobs for the storm: %d own + %d batch; want the 2 the threshold allows of their own and the other services in batch Jobs", own, batch)
	}
	for _, p := range pairs {
		if n := len(by[p.ns+"/"+p.svc]); n != 1 {
			t.Errorf("%s/%s is covered by %d Jobs, want exactly 1", p.ns, p.svc, n)
		}
	}

	// Dependents in back-off long enough that only a weeder can restart them in time, at the
	// same moment (waited one by one, the first one's back-off could run out while the last
	// one's grows): at least half of them, each judged; on a quiet machine, all.
	deps := make([]podsOf, len(pairs))
	for i, p := range pairs {
		deps[i] = p.dependent()
	}
	cls := waitForBackOffOfMost(t, 30*time.Second, 8*time.Minute, deps...)
	for i := range pairs {
		if cls[i].judged() {
			requireBackOffAhead(t, cls[i], 20*time.Second, "bringing the upstreams back")
		}
	}
	for _, p := range pairs {
		p.scaleUpstream(1)
	}
	for i, p := range pairs {
		p.waitServiceReady(true, time.Minute)
		if cls[i].judged() {
			ready, took := p.restartedByWeeder(cls[i])
			t.Logf("%s: upstream Ready → dependent %s Ready in %s", p.ns, ready.Name, took)
		}
		if ev := eventsFor(t, p.ns, p.svc)["WeederArmed"]; len(ev) != 1 {
			t.Errorf("%s/%s: %d WeederArmed Events, want 1", p.ns, p.svc, len(ev))
		} else if !strings.Contains(ev[0].Message, by[p.ns+"/"+p.svc][0]) {
			t.Errorf("%s/%s: WeederArmed %q does not name its Job %s", p.ns, p.svc, ev[0].Message, by[p.ns+"/"+p.svc][0])
		}
	}
	// The returns launched nothing: the armed Jobs covered them.
	if _, after := coveringJobs(t, stormStart, nss); len(after) != len(created) {
		t.Errorf("the returns launched %d more weeder Jobs", len(after)-len(created))
	}
	// A batch Job's log names the service on each of its lines.
	for _, j := range created {
		if j.Labels[jobs.LabelBatch] != "true" {
			continue
		}
		out := mustKubectl(t, "-n", depwatchNS, "logs", "job/"+j.Name)
		targets := map[string]bool{}
		for _, l := range parseLogLines(out) {
			targets[l.str("target")] = true
		}
		for _, k := range jobs.ReadFacts(&j).Covers() {
			if !targets[k] {
				t.Errorf("batch Job %s's log has no line for its target %s", j.Name, k)
			}
		}
	}

	// A lone outage once the window has passed: a Job of its own (the storm's services are
	// still covered by theirs).
	time.Sleep(21 * time.Second)
	loneStart := lone.beginOutage()
	lone.waitServiceReady(false, time.Minute)
	job := lone.waitArmedJob(loneStart, time.Minute)
	if job.Labels[jobs.LabelBatch] == "true" || job.Labels[jobs.LabelNamespace] != lone.ns {
		t.Errorf("the lone outage's Job %s is a batch Job (labels %v); want one of its own", job.Name, job.Labels)
	}
}
