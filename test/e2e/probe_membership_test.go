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

	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/jobs"
)

// shoot is a Gardener shoot's state as its Cluster resource tells the prober.
type shoot struct {
	hibernated bool   // spec.hibernation.enabled and status.isHibernated
	noWorkers  bool   // spec.provider.workers empty
	opType     string // status.lastOperation
	opState    string
}

func (s shoot) cluster(ns string) string {
	workers := "[{name: pool-a, minimum: 1, maximum: 3}]"
	if s.noWorkers {
		workers = "[]"
	}
	return fmt.Sprintf(`apiVersion: extensions.gardener.cloud/v1alpha1
kind: Cluster
metadata:
  name: %s
spec:
  cloudProfile: {}
  seed: {}
  shoot:
    apiVersion: core.gardener.cloud/v1beta1
    kind: Shoot
    spec:
      hibernation: {enabled: %t}
      provider:
        workers: %s
    status:
      isHibernated: %t
      lastOperation: {type: %s, state: %s}
`, ns, s.hibernated, workers, s.hibernated, s.opType, s.opState)
}

var activeShoot = shoot{opType: "Reconcile", opState: "Succeeded"}

// privateProber is a private coordinator that probes the namespaces labelled
// privateProberLabel=<its home namespace>, with the lab's prober settings (interval 5s,
// initial delay 2s, grace 20s) but shard Jobs that run for runFor: a change that waited for
// the shard's next Job would wait that long.
func privateProber(t *testing.T, prefix string, runFor time.Duration) (*deployedCoordinator, string) {
	t.Helper()
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

// The prober follows the seed as it changes, whatever the age of the shard's Job. With the
// leases of four shoots already expired, (a) a Create that Succeeds, (b) a wake-up from
// hibernation and (c) a first worker pool each get the shoot scaled down within the initial
// delay and two probe intervals of the change, by the shard's Job that was running long
// before; (d) a shoot whose hibernation starts, and whose leases then expire, is never
// scaled or annotated once the change is seen. No Job is launched for any of it.
func TestProbeFollowsShootsJoiningAndLeavingWhileTheShardsJobRuns(t *testing.T) {
	parallelLong(t, 100*time.Second)
	const runFor = 10 * time.Minute
	c, home := privateProber(t, "probe-follow", runFor)
	ensureClusterCRD(t)
	waitFor(t, 60*time.Second, "the private prober to find Gardener's Cluster kind", func() (bool, error) {
		out, err := kubectl(t, "-n", depwatchNS, "logs", "deployment/"+c.name, "--tail=-1")
		return strings.Contains(out, "Gardener Cluster resources found"), err
	})

	expired := probeSetup{expired: []string{"w1", "w2", "w3"}}
	scenarios := map[string]*probeScenario{}
	before := map[string]shoot{
		"anchor":    activeShoot,
		"create":    {opType: "Create", opState: "Processing"},
		"wake":      {hibernated: true, opType: "Reconcile", opState: "Succeeded"},
		"workers":   {noWorkers: true, opType: "Reconcile", opState: "Succeeded"},
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
			applyYAML(t, sh.cluster(s.ns))
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
	anchor.waitLog(time.Minute, map[string]string{"result": "healthy"})
	hib.waitLog(time.Minute, map[string]string{"result": "healthy"})
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
	for _, name := range []string{"create", "wake", "workers"} {
		scenarios[name].startFor(home)
	}
	// Long enough for any probe of the three to have happened: none may be probed yet.
	time.Sleep(12 * time.Second)
	for _, name := range []string{"create", "wake", "workers"} {
		scenarios[name].assertUntouched("its shoot is not probe-able yet (" + name + ")")
	}

	// (d) first: the hibernation is seen before its leases expire (they expire 20 s after
	// the last renewal).
	applyYAML(t, shoot{hibernated: true, opType: "Reconcile", opState: "Succeeded"}.cluster(hib.ns))
	waitFor(t, 30*time.Second, "the hibernating shoot to leave its shard's membership", func() (bool, error) {
		cms, err := kube.CoreV1().ConfigMaps(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/kind=probe"})
		if err != nil {
			return false, err
		}
		for _, cm := range cms.Items {
			if strings.Contains(cm.Data["NAMESPACES"], hib.ns) {
				return false, nil
			}
		}
		return true, nil
	})
	hib.setRenewing(false, "w1", "w2", "w3", "w4")

	changed := time.Now()
	applyYAML(t, shoot{opType: "Create", opState: "Succeeded"}.cluster(scenarios["create"].ns))
	applyYAML(t, activeShoot.cluster(scenarios["wake"].ns))
	applyYAML(t, activeShoot.cluster(scenarios["workers"].ns))
	// initialDelay 2s + 2 × probeInterval 5s = 12s, plus the time the lab takes to start the
	// scaling's level and to see it: generous, and far below the running Job's 10 minutes.
	const bound = 12*time.Second + 18*time.Second
	var took []string
	for _, name := range []string{"create", "wake", "workers"} {
		s := scenarios[name]
		s.waitReplicas(kcm, 0, bound-time.Since(changed))
		took = append(took, fmt.Sprintf("%s %.1fs", name, time.Since(changed).Seconds()))
	}
	t.Logf("scaled down after the change: %s", strings.Join(took, ", "))
	if now := shardJobs(); !slices.Equal(now, running) {
		t.Errorf("probe Jobs of the shard went from %v to %v: a membership change must cost no Job", running, now)
	}

	// The hibernating shoot's leases have expired by now (20 s grace) and stay so: its probe
	// would scale it down within an interval. Nothing may touch it.
	time.Sleep(time.Until(changed.Add(35 * time.Second)))
	hib.assertUntouched("its shoot started hibernating before its leases expired")
	anchor.assertUntouched("its leases are renewed")
}
