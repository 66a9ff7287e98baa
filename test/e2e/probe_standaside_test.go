//go:build e2e

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator/prober"
)

// dwdLeaseSeconds is the leaseDurationSeconds of the stand-in for dependency-watchdog's
// prober Lease: controller-runtime's default, which dependency-watchdog keeps.
const dwdLeaseSeconds = 15

// TestProbeStandsAsideWhileDependencyWatchdogsProberHoldsItsLease: beside a live
// dwd-prober-leader-election Lease (held by a stand-in for dependency-watchdog's prober, which
// the test renews every 2 s), a prober whose namespace's node leases have expired probes and
// scales nothing: it pauses the namespace, and its log line, an Event on its own Lease and
// depwatch_coordinator_probe_standing_aside say why. Once the test stops renewing the Lease,
// the prober says it no longer stands aside, and only then launches the namespace's first
// probe Job, which scales the dependents down in level order as usual.
func TestProbeStandsAsideWhileDependencyWatchdogsProberHoldsItsLease(t *testing.T) {
	parallelLong(t, 120*time.Second)
	ensureCoordinator(t)                    // its private prober copies the lab coordinator's Deployment and config
	garden := newNamespace(t, "dwd-garden") // stands in for garden
	stopRenewing := holdDWDProberLease(t, garden)
	c, home := privateProberWith(t, "aside", 30*time.Second, func(p map[string]any) {
		p["standAsideForDependencyWatchdog"] = map[string]any{"namespace": garden}
	})
	timing := labProberTiming(t)
	s := newProbeScenario(t, "probe-aside", probeSetup{expired: []string{"w1", "w2", "w3"}})

	// Standing aside before the namespace is selected: said in the log, the metric, an Event.
	aside := c.waitStandAsideLine(t, "Standing aside")
	if aside.str("lease") != garden+"/"+prober.DefaultDWDLeaseName || aside.str("holder") != dwdStandIn {
		t.Errorf("the standing-aside line names lease %q holder %q, want %s/%s held by %s", aside.str("lease"), aside.str("holder"), garden, prober.DefaultDWDLeaseName, dwdStandIn)
	}
	if v := c.metric(t, "depwatch_coordinator_probe_standing_aside"); v != 1 {
		t.Errorf("depwatch_coordinator_probe_standing_aside = %g while the Lease is renewed, want 1", v)
	}
	waitFor(t, time.Minute, "the Event ProberStandingAside on the coordinator's Lease", func() (bool, error) {
		return len(eventsFor(t, c.leaseNS, "depwatch-coordinator")["ProberStandingAside"]) > 0, nil
	})

	// Selected, its leases expired: the prober pauses it, and over the time its first probes
	// would take it neither probes nor scales it.
	s.startFor(home)
	waitFor(t, 2*time.Minute, "the prober to pause the namespace", func() (bool, error) {
		return c.metric(t, `depwatch_coordinator_probe_namespaces{state="paused"}`) == 1, nil
	})
	time.Sleep(timing.firstProbes())
	s.assertNotProbed("dependency-watchdog's prober holds its Lease")
	if jobs := s.probeJobs(); len(jobs) > 0 {
		t.Errorf("probe Job %s launched while dependency-watchdog's prober holds its Lease", jobs[0].Name)
	}

	// The Lease is no longer renewed: the prober says so, then probes and scales as usual.
	stopped := time.Now()
	stopRenewing()
	resumed := c.waitStandAsideLine(t, "No longer standing aside")
	for _, name := range dependents {
		s.waitReplicas(name, 0, 3*time.Minute)
	}
	down := s.phase(30*time.Second, "scale-down", stopped, map[string]string{"action": "scaled-down", "name": ca})
	assertOrder(t, "scale-down", down, levelOrderDown)
	s.assertLaunchedAfter(resumed)
	if v := c.metric(t, "depwatch_coordinator_probe_standing_aside"); v != 0 {
		t.Errorf("depwatch_coordinator_probe_standing_aside = %g after the Lease expired, want 0", v)
	}
	if len(eventsFor(t, c.leaseNS, "depwatch-coordinator")["ProberResumed"]) == 0 {
		t.Errorf("no Event ProberResumed on %s/depwatch-coordinator", c.leaseNS)
	}
}

// assertLaunchedAfter: every probe Job of the namespace was created after the coordinator's
// line (its creationTimestamp has whole seconds: compared with the line's second).
func (s *probeScenario) assertLaunchedAfter(line logLine) {
	s.t.Helper()
	at, err := time.Parse(time.RFC3339, line.str("time"))
	if err != nil {
		s.t.Fatalf("the line's time %q: %v", line.str("time"), err)
	}
	for _, j := range s.probeJobs() {
		if j.CreationTimestamp.Time.Before(at.Truncate(time.Second)) {
			s.t.Errorf("probe Job %s was created at %s, before the coordinator said %q (%s)", j.Name, j.CreationTimestamp.Time, line.str("msg"), at)
		}
	}
}

// dwdStandIn is the holder of the stand-in Lease, as a dependency-watchdog prober pod names
// itself (pod name, underscore, controller-runtime's random suffix).
const dwdStandIn = "dependency-watchdog-prober-7d9f8c6b5-x2x4q_4b0b6f2c"

// holdDWDProberLease creates dependency-watchdog's prober Lease in ns, held by dwdStandIn and
// renewed every 2 s (controller-runtime's retry period) until the returned func is called
// (or the test ends).
func holdDWDProberLease(t *testing.T, ns string) (stop func()) {
	t.Helper()
	now := metav1.NowMicro()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: prober.DefaultDWDLeaseName, Namespace: ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(dwdStandIn), LeaseDurationSeconds: ptr.To(int32(dwdLeaseSeconds)),
			AcquireTime: &now, RenewTime: &now},
	}
	if _, err := kube.CoordinationV1().Leases(ns).Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating dependency-watchdog's prober Lease in %s: %v", ns, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		everyTick(ctx, 2*time.Second, func() {
			cur, err := kube.CoordinationV1().Leases(ns).Get(ctx, prober.DefaultDWDLeaseName, metav1.GetOptions{})
			if err != nil {
				return
			}
			cur.Spec.RenewTime = ptr.To(metav1.NowMicro())
			_, _ = kube.CoordinationV1().Leases(ns).Update(ctx, cur, metav1.UpdateOptions{})
		})
	})
	stop = func() {
		cancel()
		wg.Wait()
	}
	t.Cleanup(stop)
	return stop
}

// waitStandAsideLine waits for c's prober log line (action=stand-aside) whose message begins
// with prefix, and returns it. Its timeout is a hang catcher: the Lease's expiry
// (leaseDurationSeconds + the grace) is a fraction of it.
func (c *deployedCoordinator) waitStandAsideLine(t *testing.T, prefix string) logLine {
	t.Helper()
	var found logLine
	waitFor(t, 2*time.Minute, "coordinator "+c.name+" to log \""+prefix+"\"", func() (bool, error) {
		out, err := kubectl(t, "-n", depwatchNS, "logs", "deployment/"+c.name, "--tail=-1")
		if err != nil {
			return false, err
		}
		for _, l := range parseLogLines(out) {
			if l.str("action") == "stand-aside" && strings.HasPrefix(l.str("msg"), prefix) {
				found = l
				return true, nil
			}
		}
		return false, nil
	})
	return found
}
