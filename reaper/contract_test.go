package reaper

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/depwatch/depwatch/internal/podstate"
)

// settingsOf reads back the JobSettings that Options o means: the inverse of what LoadOptions
// does with JobSettings.Env, for the round trip.
func settingsOf(o Options) JobSettings {
	s := JobSettings{
		Watch: o.Watch, Namespace: o.Namespace, RunDuration: o.RunDuration, ReapCooldown: o.ReapCooldown,
		StartWhenReady: o.StartWhenReady, Targets: o.Targets, DryRun: o.DryRun, Client: o.Client,
		ReadyWhen: o.ReadyWhen, BackOffFloor: o.BackOffFloor, Evict: o.Evict,
	}
	if o.StartWhenReady != nil || len(o.Targets) > 0 {
		s.MaxWait = o.MaxWait
	}
	for _, r := range o.Rules {
		if c, ok := r.(containerStatusesRule); ok {
			s.ContainerStatuses = c.reasons
		}
	}
	if !(len(o.Selectors) == 1 && o.Selectors[0].Empty()) {
		for _, sel := range o.Selectors {
			s.Selectors = append(s.Selectors, sel.String())
		}
	}
	if o.GracePeriod != nil {
		d := time.Duration(*o.GracePeriod) * time.Second
		s.GracePeriod = &d
	}
	return s
}

func roundTrip(t *testing.T, s JobSettings) {
	t.Helper()
	o, err := LoadOptions(envconf.LookupIn(s.Env()))
	if err != nil {
		t.Fatalf("the run refuses the settings' own environment %v: %v", s.Env(), err)
	}
	if got := settingsOf(o); !reflect.DeepEqual(got, s) {
		t.Errorf("round trip through %v\n got %+v\nwant %+v", s.Env(), got, s)
	}
}

func weederSettings() JobSettings {
	grace := 10 * time.Second
	return JobSettings{
		Watch: true, ContainerStatuses: []string{ReasonCrashLoopBackOff},
		Selectors: []string{"app=kubernetes,role=apiserver"}, Namespace: "shoot--a",
		RunDuration: 5 * time.Minute, GracePeriod: &grace, ReapCooldown: time.Minute,
		StartWhenReady: &ServiceRef{Namespace: "shoot--a", Name: "etcd-main-client"}, MaxWait: 6 * time.Hour,
		BackOffFloor: DefaultBackOffFloor,
	}
}

func TestJobSettingsRoundTripThroughTheRunsParser(t *testing.T) {
	for name, mutate := range map[string]func(*JobSettings){
		"armed weeder":            func(*JobSettings) {},
		"unarmed weeder":          func(s *JobSettings) { s.MaxWait = time.Minute; s.GracePeriod = nil },
		"weeder without cooldown": func(s *JobSettings) { s.ReapCooldown = 0 },
		"dry run":                 func(s *JobSettings) { s.DryRun = true },
		"every endpoint ready":    func(s *JobSettings) { s.ReadyWhen = podstate.ReadyAll },
		"two ready endpoints":     func(s *JobSettings) { s.ReadyWhen = podstate.ReadyWhen{Min: 2} },
		"no back-off floor":       func(s *JobSettings) { s.BackOffFloor = 0 },
		"evictions (a reap run's own; no weeder's)": func(s *JobSettings) { s.Evict = true },
		"a batch's client limits": func(s *JobSettings) {
			s.Client = ClientLimits{API: apilimit.Limit{QPS: 200, Burst: 500}, Events: apilimit.Limit{QPS: 100.5, Burst: 200}}
		},
		"only a QPS":               func(s *JobSettings) { s.Client.API.QPS = 0.5 },
		"several selectors, OR-ed": func(s *JobSettings) { s.Selectors = []string{"app=a", "tier in (x,y)", "!gone"} },
		"no gate, forever":         func(s *JobSettings) { s.StartWhenReady, s.MaxWait, s.RunDuration, s.Watch = nil, 0, 0, false },
		"batch TARGETS weeder": func(s *JobSettings) {
			s.Namespace, s.Selectors, s.StartWhenReady = "", nil, nil
			s.Targets = []Target{{Namespace: "a", Service: "etcd-main-client", Selectors: []string{"app=x"}},
				{Namespace: "b", Service: "kube-apiserver", Selectors: []string{"app=y", "role in (p,q)"}, ReadyWhen: &podstate.ReadyAll},
				{Namespace: "c", Service: "etcd", Selectors: []string{"app=z"}, ReadyWhen: &podstate.ReadyWhen{Min: 3}}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := weederSettings()
			mutate(&s)
			roundTrip(t, s)
		})
	}
}

func TestJobSettingsRoundTripForGeneratedValues(t *testing.T) {
	t.Parallel() // seconds of work or waiting, none of it timed: the others need not wait for it
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		s := genSettings(r)
		t.Run(fmt.Sprint(i), func(t *testing.T) { roundTrip(t, s) })
	}
}

func genSettings(r *rand.Rand) JobSettings {
	name := func(prefix string) string { return fmt.Sprintf("%s%d", prefix, r.IntN(1000)) }
	dur := func(unit time.Duration) time.Duration { return time.Duration(1+r.IntN(10000)) * unit }
	selectors := func() []string {
		var out []string
		for range 1 + r.IntN(3) {
			sel := labels.NewSelector()
			for range 1 + r.IntN(3) {
				req, _ := labels.NewRequirement(name("k"), []selection.Operator{selection.Equals, selection.In, selection.NotIn, selection.NotEquals}[r.IntN(4)], []string{name("v")})
				sel = sel.Add(*req)
			}
			out = append(out, sel.String())
		}
		return out
	}
	s := JobSettings{Watch: r.IntN(2) == 0, DryRun: r.IntN(2) == 0, ReapCooldown: dur(time.Millisecond) * time.Duration(r.IntN(2)),
		BackOffFloor: dur(time.Millisecond) * time.Duration(r.IntN(2))}
	for _, reason := range []string{ReasonCrashLoopBackOff, "OOMKilled", "Error", "ImagePullBackOff"} {
		if r.IntN(2) == 0 || len(s.ContainerStatuses) == 0 && reason == "ImagePullBackOff" {
			s.ContainerStatuses = append(s.ContainerStatuses, reason)
		}
	}
	if r.IntN(2) == 0 {
		s.RunDuration = dur(time.Second)
	}
	if r.IntN(2) == 0 {
		s.Client.API = apilimit.Limit{QPS: float64(1+r.IntN(1000)) / 4, Burst: 1 + r.IntN(1000)}
	}
	if r.IntN(2) == 0 {
		s.Client.Events.QPS = float64(1 + r.IntN(100))
	}
	if r.IntN(2) == 0 {
		g := dur(time.Second)
		s.GracePeriod = &g
	}
	switch r.IntN(3) {
	case 0: // one service, gated
		s.Namespace, s.Selectors = name("ns-"), selectors()
		s.StartWhenReady = &ServiceRef{Namespace: s.Namespace, Name: name("svc-")}
		s.MaxWait = dur(time.Second)
		s.ReadyWhen = genReadyWhen(r)
	case 1: // a batch
		for i := range 1 + r.IntN(4) {
			t := Target{Namespace: name("ns-"), Service: fmt.Sprintf("svc-%d", i), Selectors: selectors()}
			if r.IntN(2) == 0 {
				w := genReadyWhen(r)
				t.ReadyWhen = &w
			}
			s.Targets = append(s.Targets, t)
		}
		s.MaxWait = dur(time.Second)
	default: // a plain run, maybe namespaced
		if r.IntN(2) == 0 {
			s.Namespace = name("ns-")
		}
		if r.IntN(2) == 0 {
			s.Selectors = selectors()
		}
	}
	return s
}

// genReadyWhen is any, all or a count of 2 to 5, at random.
func genReadyWhen(r *rand.Rand) podstate.ReadyWhen {
	if n := r.IntN(6); n > 1 {
		return podstate.ReadyWhen{Min: n}
	}
	return []podstate.ReadyWhen{podstate.ReadyAny, podstate.ReadyAll}[r.IntN(2)]
}

func TestWeederEnvKeepsItsNamesAndOrder(t *testing.T) {
	var names []string
	for _, e := range weederSettings().Env() {
		names = append(names, e.Name+"="+e.Value)
	}
	want := `WATCH=true CONTAINER_STATUSES=CrashLoopBackOff LABEL_SELECTORS=["app=kubernetes,role=apiserver"] NAMESPACE=shoot--a RUN_DURATION=5m0s GRACE_PERIOD=10s REAP_COOLDOWN=1m0s START_WHEN_READY=shoot--a/etcd-main-client MAX_WAIT=6h0m0s BACKOFF_FLOOR=2s EVICT=false`
	if got := strings.Join(names, " "); got != want {
		t.Errorf("env\n got %s\nwant %s", got, want)
	}
}

func TestTheRunRefusesSettingsItCannotRun(t *testing.T) {
	for name, mutate := range map[string]func(*JobSettings){
		"an empty selector": func(s *JobSettings) { s.Selectors = []string{""} },
		"no rule":           func(s *JobSettings) { s.ContainerStatuses = nil },
		"a service twice": func(s *JobSettings) {
			s.Namespace, s.Selectors, s.StartWhenReady = "", nil, nil
			s.Targets = []Target{{Namespace: "a", Service: "s", Selectors: []string{"x=y"}}, {Namespace: "a", Service: "s", Selectors: []string{"x=z"}}}
		},
		"a namespace too long": func(s *JobSettings) { s.Namespace = strings.Repeat("n", 64) },
	} {
		t.Run(name, func(t *testing.T) {
			s := weederSettings()
			mutate(&s)
			if _, err := LoadOptions(envconf.LookupIn(s.Env())); err == nil {
				t.Errorf("the run accepted %v", s.Env())
			}
		})
	}
}

func TestStartsWhenReadySeesAGateOnlyWhenOneIsSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []corev1.EnvVar
		want bool
	}{
		{"START_WHEN_READY", []corev1.EnvVar{{Name: "START_WHEN_READY", Value: "ns/svc"}}, true},
		{"empty", []corev1.EnvVar{{Name: "START_WHEN_READY"}}, false},
		{"no gate", []corev1.EnvVar{{Name: "WATCH", Value: "true"}}, false},
		{"the last value wins", []corev1.EnvVar{{Name: "START_WHEN_READY", Value: "svc"}, {Name: "START_WHEN_READY"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StartsWhenReady(tc.env); got != tc.want {
				t.Errorf("StartsWhenReady = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestJobEnvNamesAreWhatEnvWrites: over generated settings, every name Env writes is one of
// JobEnvNames, and every one of JobEnvNames is written by some: the admission policy's list
// of a weeder's variables is this one.
func TestJobEnvNamesAreWhatEnvWrites(t *testing.T) {
	want := map[string]bool{}
	for _, n := range JobEnvNames() {
		want[n] = true
	}
	seen := map[string]bool{}
	r := rand.New(rand.NewPCG(3, 4))
	limits := weederSettings()
	limits.Client = ClientLimits{API: apilimit.Limit{QPS: 5, Burst: 10}, Events: apilimit.Limit{QPS: 1, Burst: 2}}
	settings := []JobSettings{limits}
	for range 500 {
		settings = append(settings, genSettings(r))
	}
	for _, s := range settings {
		for _, e := range s.Env() {
			if !want[e.Name] {
				t.Errorf("Env writes %s, which JobEnvNames does not list", e.Name)
			}
			seen[e.Name] = true
		}
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("JobEnvNames lists %s, which Env never wrote", n)
		}
	}
}
