//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// TestProbeKilledBetweenLevelsIsFinishedByTheNextProbe: a probe Job (launched by hand, as an
// operator would) scales level 0 (kube-controller-manager, 3 replicas) down and annotates it,
// then waits out a long initialDelay before level 1; its process is killed (SIGKILL) there.
// The next probe Job, the coordinator's, finishes the scale-down and keeps the stored 3; once
// the leases are renewed the scale-up brings back exactly 3: never 1 or 2, never 0 without
// the annotation.
func TestProbeKilledBetweenLevelsIsFinishedByTheNextProbe(t *testing.T) {
	parallelLong(t, 110*time.Second)
	s := newProbeScenario(t, "probe-kill", probeSetup{expired: []string{"w1", "w2", "w3"}})
	scaleDeployment(t, s.ns, kcm, 3)
	s.waitReplicas(kcm, 3, 90*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scaling := watchScaling(ctx, s.ns, dependents, map[string]int32{kcm: 3, mcm: dependentReplicas, ca: dependentReplicas})

	job := manualProbeJob(t, s.ns, `[
	  {"ref":{"kind":"Deployment","name":"kube-controller-manager","apiVersion":"apps/v1"},"scaleUp":{"level":1},"scaleDown":{"level":0}},
	  {"ref":{"kind":"Deployment","name":"machine-controller-manager","apiVersion":"apps/v1"},"scaleUp":{"level":1},"scaleDown":{"level":1,"initialDelay":"10m"}},
	  {"ref":{"kind":"Deployment","name":"cluster-autoscaler","apiVersion":"apps/v1"},"optional":true,"scaleUp":{"level":0},"scaleDown":{"level":2}}]`)
	waitFor(t, 90*time.Second, "the hand-run probe to scale kube-controller-manager down", func() (bool, error) {
		d := s.deployment(kcm)
		return *d.Spec.Replicas == 0 && d.Annotations[annReplicas] == "3", nil
	})
	killProcessWith(t, "NAMESPACE="+s.ns)
	if got := waitJobFinished(t, depwatchNS, job, time.Minute); got != "Failed" {
		t.Fatalf("the killed probe Job ended %s, want Failed", got)
	}
	if d := s.deployment(mcm); *d.Spec.Replicas != dependentReplicas || d.Annotations[annReplicas] != "" {
		t.Fatalf("machine-controller-manager was touched before the kill: replicas %d, annotations %v", *d.Spec.Replicas, d.Annotations)
	}

	s.start()
	s.waitReplicas(mcm, 0, 90*time.Second)
	s.waitReplicas(ca, 0, 60*time.Second)
	if got := s.deployment(kcm).Annotations[annReplicas]; got != "3" {
		t.Errorf("kube-controller-manager's stored replicas = %q after the next probe, want 3", got)
	}
	s.setRenewing(true, "w1", "w2", "w3")
	s.waitReplicas(kcm, 3, 2*time.Minute)
	s.waitReplicas(mcm, dependentReplicas, time.Minute)
	s.waitReplicas(ca, dependentReplicas, time.Minute)
	cancel()
	scaling.report(t)
}

// manualProbeJob creates, in the depwatch namespace, the probe Job the coordinator would for
// namespace ns, with these dependent resources, marked as run by hand and with no retry
// (backoffLimit 0), and returns its name.
func manualProbeJob(t *testing.T, ns, resources string) string {
	t.Helper()
	spec, err := jobs.Probe(jobs.ProbeSpec{
		JobSettings: probe.JobSettings{
			Namespace: ns, KubeconfigSecretName: probeSecret, ProbeTimeout: 5 * time.Second,
			NodeMonitorGrace: 20 * time.Second, NodeLeaseFailureFraction: 0.6,
			LeaseExpiryBufferFraction: 0.75, DependentResources: resources,
		},
		ScaleChain: 12 * time.Minute, TriggerTime: time.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	spec.Trigger = jobs.TriggerManual
	tpl := localJobTemplate(t)
	tpl.BackoffLimit = ptr.To(int32(0))
	return createDepwatchJob(t, tpl, spec)
}

// killProcessWith sends SIGKILL to the one process on this machine whose command line or
// environment has the entry want (the local cluster's pods are this machine's processes).
func killProcessWith(t *testing.T, want string) {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		for _, file := range []string{"cmdline", "environ"} {
			data, err := os.ReadFile(filepath.Join("/proc", d.Name(), file))
			if err == nil && containsEntry(string(data), want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	if len(pids) != 1 {
		t.Fatalf("want exactly one process with %q in its command line or environment, found %v", want, pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatalf("killing process %d: %v", pids[0], err)
	}
	t.Logf("killed process %d (%s)", pids[0], want)
}

// containsEntry tells whether a NUL-separated /proc list has the entry.
func containsEntry(list, entry string) bool {
	for _, e := range strings.Split(list, "\x00") {
		if e == entry {
			return true
		}
	}
	return false
}
