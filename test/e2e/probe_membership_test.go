//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/test/upstream"
)

// privateProber is a private coordinator that probes the namespaces labelled
// privateProberLabel=<its home namespace>, with the lab's prober settings (interval 5s,
// initial delay 2s, grace 20s) but shard Jobs that run for runFor: a change that waited for
// the shard's next Job would wait that long.
func privateProber(t *testing.T, prefix string, runFor time.Duration) (*deployedCoordinator, string) {
	t.Helper()
	return privateProberWith(t, prefix, runFor, nil)
}

// privateProberWith is privateProber whose prober section edit may change further before
// the coordinator starts.
func privateProberWith(t *testing.T, prefix string, runFor time.Duration, edit func(prober map[string]any)) (*deployedCoordinator, string) {
	t.Helper()
	ensureCoordinator(t) // the lab's config is read from its Deployment, which a first test installs
	var labCfg map[string]any
	if err := yaml.Unmarshal([]byte(labConfig(t)), &labCfg); err != nil {
		t.Fatalf("reading the lab's config: %v", err)
	}
	// Its shards' Jobs and ConfigMaps go with it (a shard's Job would run on for runFor),
	// once its Deployment is gone: registered first, this cleanup runs after the coordinator's.
	var home string
	t.Cleanup(func() {
		if home == "" {
			return
		}
		suffix := strings.TrimPrefix(prober.ShardName(0, privateProberLabel+"="+home), "shard-0")
		ctx := context.Background()
		sel := metav1.ListOptions{LabelSelector: "depwatch.io/kind=probe"}
		if list, err := kube.BatchV1().Jobs(depwatchNS).List(ctx, sel); err == nil {
			for _, j := range list.Items {
				if strings.HasSuffix(j.Labels[jobs.LabelNamespace], suffix) {
					_ = kube.BatchV1().Jobs(depwatchNS).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
				}
			}
		}
		if list, err := kube.CoreV1().ConfigMaps(depwatchNS).List(ctx, sel); err == nil {
			for _, cm := range list.Items {
				if strings.HasSuffix(cm.Labels[jobs.LabelNamespace], suffix) {
					_ = kube.CoreV1().ConfigMaps(depwatchNS).Delete(ctx, cm.Name, metav1.DeleteOptions{})
				}
			}
		}
	})
	c := privateCoordinatorWith(t, prefix, nil, func(h string, cfg map[string]any) {
		home = h
		p, _ := labCfg["prober"].(map[string]any)
		p["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{privateProberLabel: h}}
		p["probeJobRunDuration"] = runFor.String()
		if edit != nil {
			edit(p)
		}
		cfg["prober"] = p
	})
	return c, home
}

const privateProberLabel = "depwatch.io/e2e-prober"

// startFor labels the namespace for prober c (home): c probes it from now on.
func (s *probeScenario) startFor(home string) {
	s.t.Helper()
	mustKubectl(s.t, "label", "namespace", s.ns, privateProberLabel+"="+home)
}

// proberTiming is what a prober's config lets a probe take: the namespace's first probe
// comes initialDelay after it joins its shard, and each next one probeInterval × (1 ± jitter)
// later; a node lease counts as expired expiry after its last renewal.
type proberTiming struct {
	delay, interval, expiry time.Duration
	jitter                  float64
}

// labProberTiming reads the lab's prober timing from its config (the private probers run
// with the same).
func labProberTiming(t *testing.T) proberTiming {
	t.Helper()
	cfg, err := config.Parse([]byte(labConfig(t)))
	if err != nil || cfg.Prober == nil {
		t.Fatalf("reading the lab's prober config: %v", err)
	}
	p := cfg.Prober
	expiry := time.Duration(float64(p.KCMGrace()) * p.ExpiryBuffer())
	return proberTiming{delay: p.Delay(), interval: p.Interval(), expiry: expiry, jitter: p.Jitter()}
}

// firstProbes is the longest a namespace that joined its shard waits for its first probe and
// the one after: initialDelay and two intervals at their longest jitter (the first probes of
// a Job are spread over the jitter too). A namespace wrongly let in would be probed (and,
// its leases expired, scaled down) within it.
func (p proberTiming) firstProbes() time.Duration {
	return p.delay + time.Duration(2*float64(p.interval)*(1+p.jitter))
}

// hangAfter is the deadline of a wait for a probe that must come: not the property tested
// (that is order and actor), only a catch for a probe that never comes. Ten times what the
// config lets the first probes take, at least two minutes, and well inside the shard Job's
// run, so that no other Job can be the one that probed.
func (p proberTiming) hangAfter(runFor time.Duration) time.Duration {
	return min(max(2*time.Minute, 10*p.firstProbes()), runFor/2)
}

// membershipOf is the names of the probe membership ConfigMaps that list namespace ns.
func membershipOf(t *testing.T, ns string) []string {
	t.Helper()
	cms, err := kube.CoreV1().ConfigMaps(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/kind=probe"})
	if err != nil {
		t.Fatalf("listing the probe membership ConfigMaps: %v", err)
	}
	var in []string
	for _, cm := range cms.Items {
		if m, err := probe.ParseMembership(cm.Data); err == nil && slices.Contains(m.Namespaces, ns) {
			in = append(in, cm.Name)
		}
	}
	return in
}

// assertNotProbed: the scenario's namespace is in no shard's membership and its dependents
// are untouched.
func (s *probeScenario) assertNotProbed(why string) {
	s.t.Helper()
	if in := membershipOf(s.t, s.ns); len(in) > 0 {
		s.t.Errorf("%s joined the probe membership %v although %s", s.ns, in, why)
	}
	s.assertUntouched(why)
}

// firstSeen waits until cond holds for every name, polling them together, and returns for
// each how long after since it was first seen to hold. timeout only catches a hang.
func firstSeen(t *testing.T, timeout time.Duration, what string, names []string, since time.Time, cond func(string) (bool, error)) map[string]time.Duration {
	t.Helper()
	seen := map[string]time.Duration{}
	waitFor(t, timeout, what, func() (bool, error) {
		for _, name := range names {
			if _, ok := seen[name]; ok {
				continue
			}
			ok, err := cond(name)
			if err != nil {
				return false, err
			}
			if ok {
				seen[name] = time.Since(since)
			}
		}
		return len(seen) == len(names), nil
	})
	return seen
}

// The states of a shoot this test walks, as Gardener writes them (test/upstream).
var (
	activeShoot = upstream.Shoot{}
	// wakingShoot: spec.hibernation.enabled has been set to false and the wake-up's
	// Reconcile runs, but status.hibernated is still true until it has finished:
	// dependency-watchdog's canStartProber starts no prober for it ("Cluster is waking up
	// from hibernation").
	wakingShoot = upstream.Shoot{Hibernated: true, OpState: "Processing"}
	// hibernatingShoot: spec.hibernation.enabled true, status.hibernated not yet.
	hibernatingShoot = upstream.Shoot{HibernationEnabled: true}
)

// The prober follows the seed as it changes, whatever the age of the shard's Job. With the
// leases of four shoots already expired, (a) a Create that Succeeds, (b) a wake-up from
// hibernation and (c) a first worker pool each get the shoot scaled down after the change,
// not before, by the shard's Job that was running long before; (d) a shoot whose hibernation
// starts, and whose leases then expire, is never scaled or annotated once the change is seen.
// No Job is launched for any of it.
//
// The waking shoot (b) is the one dependency-watchdog leaves alone: spec.hibernation.enabled
// false and status.hibernated still true. Its namespace stays out of the shard's membership,
// and its dependents untouched, for as long as a probe of a member would take to come and
// until status.hibernated turns false; then it joins and is scaled down. Time bounds here
// are hang catchers derived from the prober's config, not the property: the property is the
// order (nothing while not probe-able, scale-down after) and the actor (the running Job).
func TestProbeFollowsShootsJoiningAndLeavingWhileTheShardsJobRuns(t *testing.T) {
	parallelLong(t, 110*time.Second)
	const runFor = 10 * time.Minute
	c, home := privateProber(t, "probe-follow", runFor)
	timing := labProberTiming(t)
	hang := timing.hangAfter(runFor)
	ensureClusterCRD(t)
	waitFor(t, 60*time.Second, "the private prober to find Gardener's Cluster kind", func() (bool, error) {
		out, err := kubectl(t, "-n", depwatchNS, "logs", "deployment/"+c.name, "--tail=-1")
		return strings.Contains(out, "Gardener Cluster resources found"), err
	})

	expired := probeSetup{expired: []string{"w1", "w2", "w3"}}
	scenarios := map[string]*probeScenario{}
	before := map[string]upstream.Shoot{
		"anchor":    activeShoot,
		"create":    {OpType: "Create", OpState: "Processing"},
		"wake":      wakingShoot,
		"workers":   {NoWorkers: true},
		"hibernate": activeShoot,
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, sh := range before {
		wg.Go(func() {
			setup := expired
			if name == "anchor" || name == "hibernate" {
				setup = probeSetup{} // healthy until the test says otherwise
			}
			s := newProbeScenario(t, "follow-"+name, setup)
			applyCluster(t, s.ns, sh)
			t.Cleanup(func() { _, _ = kubectl(t, "delete", "cluster.extensions.gardener.cloud", s.ns, "--ignore-not-found") })
			mu.Lock()
			scenarios[name] = s
			mu.Unlock()
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	anchor, hib := scenarios["anchor"], scenarios["hibernate"]
	anchor.startFor(home)
	hib.startFor(home)
	anchor.waitLog(hang, map[string]string{"result": "healthy"})
	hib.waitLog(hang, map[string]string{"result": "healthy"})
	shardJobs := func() []string {
		list, err := kube.BatchV1().Jobs(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/kind=probe," + jobs.ProbeLabel(anchor.ns)})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, j := range list.Items {
			names = append(names, j.Name)
		}
		return names
	}
	running := shardJobs()
	if len(running) != 1 {
		t.Fatalf("probe Jobs of the shard: %v, want one", running)
	}
	notYet := []string{"create", "wake", "workers"}
	for _, name := range notYet {
		scenarios[name].startFor(home)
	}
	// Watched for as long as a member's first probes would take to come (its leases are
	// expired: it would be scaled down within it): none of the three joins the membership,
	// none is touched.
	labelled := time.Now()
	for time.Since(labelled) < timing.firstProbes() {
		for _, name := range notYet {
			scenarios[name].assertNotProbed("its shoot is not probe-able yet (" + name + ")")
		}
		if t.Failed() {
			t.FailNow()
		}
		time.Sleep(time.Second)
	}

	// (d) first: the hibernation is seen before its leases expire (timing.expiry after the
	// last renewal).
	applyCluster(t, hib.ns, hibernatingShoot)
	waitFor(t, hang, "the hibernating shoot to leave its shard's membership", func() (bool, error) {
		return len(membershipOf(t, hib.ns)) == 0, nil
	})
	hib.setRenewing(false, "w1", "w2", "w3", "w4")

	// Until the very change, the three are out and untouched: whatever scales them below
	// came after it.
	for _, name := range notYet {
		scenarios[name].assertNotProbed("its shoot is not probe-able yet (" + name + ")")
	}
	if t.Failed() {
		t.FailNow()
	}
	changed := time.Now()
	applyCluster(t, scenarios["create"].ns, upstream.Shoot{OpType: "Create", OpState: "Succeeded"})
	applyCluster(t, scenarios["wake"].ns, activeShoot) // the wake-up has finished: status.hibernated false
	applyCluster(t, scenarios["workers"].ns, activeShoot)
	// Each one joins the running Job's membership, and only then is scaled down: seen as
	// they come, all at once (one slow to come does not delay the figures of the others).
	var steps []string
	for _, name := range notYet {
		steps = append(steps, name+" joined", name+" scaled down")
	}
	seen := firstSeen(t, hang, "the three to join their shard's membership and be scaled down", steps, changed, func(step string) (bool, error) {
		name, what, _ := strings.Cut(step, " ")
		if what == "joined" {
			return len(membershipOf(t, scenarios[name].ns)) > 0, nil
		}
		return scenarios[name].atReplicas(kcm, 0)
	})
	var took []string
	for _, name := range notYet {
		joined, scaled := seen[name+" joined"], seen[name+" scaled down"]
		if scaled < joined {
			t.Errorf("%s was scaled down (%.1fs after the change) before it joined the shard's membership (%.1fs): not by the shard's Job", name, scaled.Seconds(), joined.Seconds())
		}
		took = append(took, fmt.Sprintf("%s joined %.1fs, scaled down %.1fs", name, joined.Seconds(), scaled.Seconds()))
	}
	t.Logf("after the change (initialDelay %s, probeInterval %s ± %.0f%%): %s", timing.delay, timing.interval, 100*timing.jitter, strings.Join(took, "; "))
	if now := shardJobs(); !slices.Equal(now, running) {
		t.Errorf("probe Jobs of the shard went from %v to %v: a membership change must cost no Job", running, now)
	}

	// The hibernating shoot's leases expire timing.expiry after they stopped and stay so: a
	// probe would scale it down within an interval. Nothing may touch it, watched until the
	// first probes of a member would have come after its leases expired.
	time.Sleep(time.Until(changed.Add(timing.expiry + timing.firstProbes())))
	hib.assertNotProbed("its shoot started hibernating before its leases expired")
	anchor.assertUntouched("its leases are renewed")
}
