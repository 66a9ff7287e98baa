package jobs

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/reaper"
)

// lookupEnv reads a Job container's env the way the reaper's process sees it.
func lookupEnv(env []corev1.EnvVar) func(string) (string, bool) {
	m := envMap(env)
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestWeederJobsAreReadByTheReaperAsWritten: the env a weeder Job is built with (one
// service, armed or not, and a batch) is what `depwatch reap` parses back: the same
// namespace, gate, selectors, windows and targets. The contract is written here and read
// in package reaper; this is its round trip.
func TestWeederJobsAreReadByTheReaperAsWritten(t *testing.T) {
	grace, cooldown := 30*time.Second, 45*time.Second
	for _, armed := range []bool{false, true} {
		s, err := Weeder(WeederSpec{Namespace: "shoot--a", Service: "etcd-main-client", Selectors: apiserverSelectors(),
			WatchDuration: 4 * time.Minute, GracePeriod: &grace, ReapCooldown: cooldown, Armed: armed, MaxWait: 3 * time.Hour, TriggerTime: t0})
		if err != nil {
			t.Fatal(err)
		}
		o, err := reaper.LoadOptions(lookupEnv(s.Env))
		if err != nil {
			t.Fatalf("armed=%v: the reaper refuses the weeder's env: %v", armed, err)
		}
		wantWait := UnarmedGateWait
		if armed {
			wantWait = 3 * time.Hour
		}
		want, _ := SelectorStrings(apiserverSelectors())
		var got []string
		for _, sel := range o.Selectors {
			got = append(got, sel.String())
		}
		if o.Namespace != "shoot--a" || o.StartWhenReady == nil || o.StartWhenReady.String() != "shoot--a/etcd-main-client" ||
			o.RunDuration != 4*time.Minute || o.MaxWait != wantWait || !o.Watch || o.ReapCooldown != cooldown ||
			o.GracePeriod == nil || *o.GracePeriod != 30 || strings.Join(got, ";") != strings.Join(want, ";") || len(o.Rules) != 1 {
			t.Errorf("armed=%v: the reaper read %+v", armed, o)
		}
	}

	targets := []WeederTarget{
		{Namespace: "shoot--a", Service: "etcd-main-client", Selectors: apiserverSelectors()},
		{Namespace: "shoot--b", Service: "kube-apiserver", Selectors: apiserverSelectors()},
	}
	s, err := WeederBatch(WeederSpec{WatchDuration: 4 * time.Minute, Armed: true, MaxWait: 3 * time.Hour, TriggerTime: t0}, targets)
	if err != nil {
		t.Fatal(err)
	}
	o, err := reaper.LoadOptions(lookupEnv(s.Env))
	if err != nil {
		t.Fatalf("the reaper refuses the batch weeder's env: %v", err)
	}
	if len(o.Targets) != 2 || o.MaxWait != 3*time.Hour || o.RunDuration != 4*time.Minute || o.StartWhenReady != nil || o.Namespace != "" {
		t.Fatalf("the reaper read %+v", o)
	}
	for i, tg := range o.Targets {
		want, _ := SelectorStrings(targets[i].Selectors)
		if tg.Namespace+"/"+tg.Service != targets[i].Key() || strings.Join(tg.Selectors, ";") != strings.Join(want, ";") {
			t.Errorf("target %d read as %+v, want %s %v", i, tg, targets[i].Key(), want)
		}
	}
}

// TestProbeJobsAreReadByTheProbeAsWritten: the env of a probe Job (one namespace, and a
// shard's that probes on a schedule and follows its membership) is what `depwatch probe`
// parses back. Probe does not read its Job's env back at launch: this is where the contract
// is held.
func TestProbeJobsAreReadByTheProbeAsWritten(t *testing.T) {
	shard := probeSpec()
	shard.Namespace, shard.Shard, shard.Namespaces, shard.MembershipIn = "", "shard-0", []string{"shoot--a", "shoot--b"}, "depwatch"
	shard.Concurrency, shard.Jitter, shard.RunDuration = 2, 0.2, time.Hour
	shard.NamespaceSettings = map[string]probe.NamespaceSettings{"shoot--b": {NodeMonitorGrace: time.Minute}}
	for _, p := range []ProbeSpec{probeSpec(), shard} {
		s, err := Probe(p)
		if err != nil {
			t.Fatal(err)
		}
		o, err := probe.LoadOptions(lookupEnv(s.Env))
		if err != nil {
			t.Fatalf("%s: the probe refuses its Job's env: %v", p.target(), err)
		}
		if o.Namespace != p.Namespace || strings.Join(o.Namespaces, ",") != strings.Join(p.Namespaces, ",") ||
			o.ProbeTimeout != p.ProbeTimeout || o.NodeMonitorGrace != p.NodeMonitorGrace || o.RunDuration != p.RunDuration ||
			len(o.Resources) != 1 || (p.MembershipIn != "") != (o.MembershipName != "") || o.Settings["shoot--b"].NodeMonitorGrace != p.NamespaceSettings["shoot--b"].NodeMonitorGrace {
			t.Errorf("%s: the probe read %+v", p.target(), o)
		}
	}
}
