package prober

import (
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/jobs"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

var dwdLease = LeaseRef{Namespace: "garden", Name: "dwd-prober-leader-election"}

// lease is dependency-watchdog's prober Lease held by holder ("" none), renewed ago before
// testNow (negative: never), for seconds.
func lease(holder string, ago time.Duration, seconds int32) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: dwdLease.Namespace, Name: dwdLease.Name},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(seconds)}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	if ago >= 0 {
		l.Spec.RenewTime = &metav1.MicroTime{Time: standAsideNow.Add(-ago)}
	}
	return l
}

var standAsideNow = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func TestDecideStandAside(t *testing.T) {
	for _, tt := range []struct {
		name   string
		in     StandAsideInput
		aside  bool
		holder string
		until  time.Duration // after standAsideNow; 0: none
		why    string
	}{
		{name: "off: never aside", in: StandAsideInput{OffWhy: "enabled is false", Object: lease("dwd-0", 0, 15)}, why: "enabled is false"},
		{name: "the cache has not synced: aside, nothing is acted on unseen", in: StandAsideInput{}, aside: true, why: "cannot be read yet"},
		{name: "no Lease: dependency-watchdog does not run", in: StandAsideInput{Synced: true}, why: "no Lease garden/dwd-prober-leader-election"},
		{name: "renewed just now: aside until renewTime + duration + grace", in: StandAsideInput{Synced: true, Object: lease("dwd-0", 0, 15)},
			aside: true, holder: "dwd-0", until: 15*time.Second + StandAsideGrace, why: "dependency-watchdog's prober (dwd-0) holds the Lease"},
		{name: "expired, but inside the grace: still aside", in: StandAsideInput{Synced: true, Object: lease("dwd-0", 17*time.Second, 15)},
			aside: true, holder: "dwd-0", until: 3 * time.Second},
		{name: "the grace ends: no longer aside", in: StandAsideInput{Synced: true, Object: lease("dwd-0", 15*time.Second+StandAsideGrace, 15)},
			holder: "dwd-0", why: "has not been renewed since"},
		{name: "long expired", in: StandAsideInput{Synced: true, Object: lease("dwd-0", time.Hour, 15)}, holder: "dwd-0", why: "has not been renewed"},
		{name: "released (no holder)", in: StandAsideInput{Synced: true, Object: lease("", 0, 15)}, why: "has no holder"},
		{name: "held but never renewed", in: StandAsideInput{Synced: true, Object: lease("dwd-0", -1, 15)}, holder: "dwd-0", why: "never renewed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Lease, tt.in.Now = dwdLease, standAsideNow
			v := DecideStandAside(tt.in)
			if v.Aside != tt.aside || v.Holder != tt.holder || !strings.Contains(v.Why, tt.why) {
				t.Errorf("= aside %t holder %q why %q; want aside %t holder %q why containing %q", v.Aside, v.Holder, v.Why, tt.aside, tt.holder, tt.why)
			}
			var want time.Time
			if tt.until > 0 {
				want = standAsideNow.Add(tt.until)
			}
			if !v.Until.Equal(want) {
				t.Errorf("until %s, want %s", v.Until, want)
			}
		})
	}
}

func TestStandAsideSetting(t *testing.T) {
	base := strings.Replace(probeOnlyConfig, "prober:\n", "prober:\n  standAsideForDependencyWatchdog: SETTING\n", 1)
	for _, tt := range []struct {
		setting, defaultNS string
		want               LeaseRef
		on                 bool
		problem            string
	}{
		{setting: "{}", want: dwdLease, on: true},
		{setting: "{}", defaultNS: "dwd-home", want: LeaseRef{"dwd-home", dwdLease.Name}, on: true},
		{setting: "{namespace: seed-garden, leaseName: my-dwd}", defaultNS: "dwd-home", want: LeaseRef{"seed-garden", "my-dwd"}, on: true},
		{setting: "{enabled: false}", want: dwdLease},
		{setting: "{namespace: Garden}", problem: "prober.standAsideForDependencyWatchdog.namespace: \"Garden\""},
		{setting: "{leaseName: a_b}", problem: "prober.standAsideForDependencyWatchdog.leaseName: \"a_b\""},
		{setting: "{enabled: maybe}", problem: "prober.standAsideForDependencyWatchdog"},
		{setting: "{nameSpace: garden}", problem: "nameSpace"},
	} {
		cfg, err := parseFile([]byte(strings.Replace(base, "SETTING", tt.setting, 1)))
		if tt.problem != "" {
			if err == nil || !strings.Contains(err.Error(), tt.problem) {
				t.Errorf("%s: error %v, want one naming %q", tt.setting, err, tt.problem)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.setting, err)
		}
		if got, on := cfg.Prober.StandAsideLease(tt.defaultNS); got != tt.want || on != tt.on {
			t.Errorf("%s (default namespace %q): %s on=%t, want %s on=%t", tt.setting, tt.defaultNS, got, on, tt.want, tt.on)
		}
	}
	// Without the setting: on, dependency-watchdog's own Lease.
	cfg, err := parseFile([]byte(probeOnlyConfig))
	if err != nil {
		t.Fatal(err)
	}
	if got, on := cfg.Prober.StandAsideLease(""); got != dwdLease || !on {
		t.Errorf("unset: %s on=%t, want %s on", got, on, dwdLease)
	}
}

// The prober beside a live Lease of dependency-watchdog's: a selected namespace is not
// probed (paused, no Job) and the metric and an Event say why; once the Lease is not renewed,
// the namespace is probed from its initialDelay on. Its own Lease is never stood aside for.
func TestProberStandsAsideWhileDependencyWatchdogHoldsItsLease(t *testing.T) {
	h := newProbeHarness(t)
	w := h.c.aside
	if w.inf == nil || w.lease != dwdLease {
		t.Fatalf("the prober follows %s (informer %v), want %s", w.lease, w.inf != nil, dwdLease)
	}
	w.synced = func() bool { return true }
	w.self = &corev1.ObjectReference{Kind: "Lease", Namespace: "depwatch", Name: "depwatch-coordinator"}
	if err := w.inf.GetIndexer().Add(lease("dwd-prober-0", 0, 15)); err != nil {
		t.Fatal(err)
	}
	h.now = standAsideNow
	h.c.reconcileStandAside()
	h.namespace("shoot--p--a", map[string]string{"gardener.cloud/role": "shoot"})
	for range 3 {
		h.reconcile("shoot--p--a")
		h.now = h.now.Add(10 * time.Second)
		renewed := lease("dwd-prober-0", 0, 15)
		renewed.Spec.RenewTime = &metav1.MicroTime{Time: h.now}
		if err := w.inf.GetIndexer().Update(renewed); err != nil {
			t.Fatal(err)
		}
		h.reconcile(standAsideKey)
	}
	if n := len(h.jobs()); n != 0 {
		t.Fatalf("%d probe Jobs while dependency-watchdog's prober holds its Lease", n)
	}
	if got := gaugeValue(h.c.metrics.ProbeStandingAside); got != 1 {
		t.Errorf("%s = %g while standing aside, want 1", "depwatch_coordinator_probe_standing_aside", got)
	}
	if got := gaugeValue(h.c.metrics.ProbeNamespaces.WithLabelValues("paused")); got != 1 {
		t.Errorf("paused namespaces = %g, want 1", got)
	}
	h.wantEvent("ProberStandingAside")

	// No longer renewed: once renewTime + 15 s + the grace is past, probing starts over.
	h.now = h.now.Add(15*time.Second + StandAsideGrace)
	h.reconcile(standAsideKey)
	if got := gaugeValue(h.c.metrics.ProbeStandingAside); got != 0 {
		t.Errorf("standing aside = %g after the Lease expired, want 0", got)
	}
	h.wantEvent("ProberResumed")
	h.now = h.now.Add(h.c.cfg.Delay())
	h.reconcile("shoot--p--a")
	if n := len(h.jobs()); n != 1 {
		t.Fatalf("%d probe Jobs an initialDelay after the Lease expired, want 1", n)
	}
}

func (h *probeHarness) wantEvent(reason string) {
	h.t.Helper()
	for {
		select {
		case e := <-h.rec.(*record.FakeRecorder).Events:
			if strings.Contains(e, reason) {
				return
			}
		default:
			h.t.Errorf("no %s Event", reason)
			return
		}
	}
}

func TestProberNeverStandsAsideForItsOwnLeaseOrWhenTurnedOff(t *testing.T) {
	cfg, err := parseFile([]byte(probeOnlyConfig))
	if err != nil {
		t.Fatal(err)
	}
	own := LeaseRef{Namespace: "dwd-home", Name: DefaultDWDLeaseName}
	w, _ := (&Controller{}).newStandAsideWatch(Deps{Config: cfg.Prober, DWDLeaseNamespace: "dwd-home", OwnLease: &own})
	if w.inf != nil || !strings.Contains(w.off, "this coordinator's own") {
		t.Errorf("dependency-watchdog's replacement follows its own Lease: informer %v, off %q", w.inf != nil, w.off)
	}
	if v := w.decide(standAsideNow); v.Aside {
		t.Errorf("stands aside for its own Lease: %s", v.Why)
	}
	off, err := parseFile([]byte(strings.Replace(probeOnlyConfig, "prober:\n", "prober:\n  standAsideForDependencyWatchdog: {enabled: false}\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	w, _ = (&Controller{}).newStandAsideWatch(Deps{Config: off.Prober})
	if w.inf != nil || w.decide(standAsideNow).Aside {
		t.Errorf("turned off, it still follows the Lease (%v) or stands aside", w.inf != nil)
	}
}

func gaugeValue(g prometheus.Gauge) float64 {
	var d dto.Metric
	if err := g.Write(&d); err != nil {
		return -1
	}
	return d.Gauge.GetValue()
}

// A namespace being probed when dependency-watchdog's prober takes its Lease leaves its
// shard's running probe Job at once: the membership that Job follows lists it no more.
func TestProberStandingAsideTakesTheNamespacesOutOfTheRunningJob(t *testing.T) {
	h := newProbeHarnessWith(t, followingConfig)
	w := h.c.aside
	w.synced = func() bool { return true }
	h.now = standAsideNow
	h.c.reconcileStandAside() // no Lease: probing
	h.namespace("shoot--p--a", map[string]string{"gardener.cloud/role": "shoot"})
	h.reconcile("shoot--p--a")
	h.now = h.now.Add(h.c.cfg.Delay())
	h.reconcile("shoot--p--a")
	list := h.jobs()
	if len(list) != 1 {
		t.Fatalf("%d probe Jobs after the initial delay, want 1", len(list))
	}
	target := jobs.ReadFacts(&list[0]).Target
	if m := h.membership(target); len(m.Namespaces) != 1 {
		t.Fatalf("the running Job's membership is %v, want the namespace", m.Namespaces)
	}

	renewed := lease("dwd-prober-0", 0, 15)
	renewed.Spec.RenewTime = &metav1.MicroTime{Time: h.now}
	if err := w.inf.GetIndexer().Add(renewed); err != nil {
		t.Fatal(err)
	}
	h.reconcile(standAsideKey)
	if m := h.membership(target); len(m.Namespaces) != 0 {
		t.Errorf("standing aside, the running Job still probes %v", m.Namespaces)
	}
	if n := len(h.jobs()); n != 1 {
		t.Errorf("%d probe Jobs while standing aside, want the one running before", n)
	}
}
