package probe

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
)

// settingsOf reads back the JobSettings that Options o means: the inverse of what LoadOptions
// does with JobSettings.Env, for the round trip.
func settingsOf(t *testing.T, o Options) JobSettings {
	t.Helper()
	s := JobSettings{
		Namespace: o.Namespace, Namespaces: o.Namespaces, NamespaceSettings: o.Settings,
		Concurrency: o.Concurrency, Jitter: o.Jitter, KubeconfigSecretName: o.KubeconfigSecretName,
		ProbeTimeout: o.ProbeTimeout, NodeMonitorGrace: o.NodeMonitorGrace,
		NodeLeaseFailureFraction: o.NodeLeaseFailureFraction, LeaseExpiryBufferFraction: o.LeaseExpiryBufferFraction,
		DependentResources: EncodeDependentResources(o.Resources), DryRun: o.DryRun,
		NodeConditions: o.NodeConditions, RunDuration: o.RunDuration, Client: o.Client,
	}
	if spec, ok := strings.CutPrefix(o.ScheduleSpec, everyPrefix); ok {
		d, err := time.ParseDuration(spec)
		if err != nil {
			t.Fatalf("SCHEDULE %q: %v", o.ScheduleSpec, err)
		}
		s.Interval = d
	}
	return s
}

func roundTrip(t *testing.T, s JobSettings) {
	t.Helper()
	o, err := LoadOptions(envconf.LookupIn(s.Env()))
	if err != nil {
		t.Fatalf("the run refuses the settings' own environment %v: %v", s.Env(), err)
	}
	want := s
	if want.Concurrency == 0 { // not written: reads back as the probe's default
		want.Concurrency = DefaultProbeConcurrency
	}
	if got := settingsOf(t, o); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip through %v\n got %+v\nwant %+v", s.Env(), got, want)
	}
}

func oneNamespace() JobSettings {
	return JobSettings{
		Namespace: "shoot--p--a", KubeconfigSecretName: "shoot-access-dependency-watchdog-probe",
		ProbeTimeout: 30 * time.Second, NodeMonitorGrace: 40 * time.Second,
		NodeLeaseFailureFraction: 0.6, LeaseExpiryBufferFraction: 0.75,
		DependentResources: EncodeDependentResources(gardenerResources()),
	}
}

func TestJobSettingsRoundTripThroughTheRunsParser(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 30, 5, time.UTC)
	for name, mutate := range map[string]func(*JobSettings){
		"probe with one namespace": func(*JobSettings) {},
		"dry run":                  func(s *JobSettings) { s.DryRun = true },
		"a client rate limit":      func(s *JobSettings) { s.Client = apilimit.Limit{QPS: 20.5, Burst: 40} },
		"every interval for a while": func(s *JobSettings) {
			s.RunDuration, s.Interval, s.Jitter = 2*time.Minute, 10*time.Second, 0.2
		},
		"the shoot's node conditions": func(s *JobSettings) { s.NodeConditions = map[string][]string{"pool-a": {"Custom", "DiskPressure"}} },
		"probe shard with NAMESPACES and NAMESPACE_SETTINGS": func(s *JobSettings) {
			s.Namespace, s.Namespaces, s.Concurrency = "", []string{"shoot--a", "shoot--b", "shoot--c"}, 3
			s.NamespaceSettings = map[string]NamespaceSettings{
				"shoot--a": {NodeMonitorGrace: 2 * time.Minute, NodeConditions: map[string][]string{"pool-a": {"Custom"}}},
				"shoot--b": {NotBefore: at},
			}
			s.RunDuration, s.Interval = 2*time.Minute, 10*time.Second
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := oneNamespace()
			mutate(&s)
			roundTrip(t, s)
		})
	}
}

func TestJobSettingsRoundTripForGeneratedValues(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		s := genSettings(r)
		t.Run(fmt.Sprint(i), func(t *testing.T) { roundTrip(t, s) })
	}
}

func genSettings(r *rand.Rand) JobSettings {
	dur := func(unit time.Duration) time.Duration { return time.Duration(1+r.IntN(100000)) * unit }
	fraction := func() float64 { return 1 - r.Float64() } // (0,1]
	conditions := func() map[string][]string {
		m := map[string][]string{}
		for i := range 1 + r.IntN(3) {
			m[fmt.Sprintf("pool-%d", i)] = []string{"Custom", fmt.Sprintf("C%d", r.IntN(9))}[:1+r.IntN(2)]
		}
		return m
	}
	s := JobSettings{
		KubeconfigSecretName: fmt.Sprintf("secret-%d", r.IntN(100)), ProbeTimeout: dur(time.Millisecond),
		NodeMonitorGrace: MinNodeMonitorGrace + dur(time.Millisecond), NodeLeaseFailureFraction: fraction(),
		LeaseExpiryBufferFraction: fraction(), DryRun: r.IntN(2) == 0,
		DependentResources: EncodeDependentResources(gardenerResources()[:1+r.IntN(len(gardenerResources()))]),
	}
	if r.IntN(2) == 0 {
		s.Jitter = r.Float64() * 0.99 // [0,1)
	}
	if r.IntN(2) == 0 {
		s.Concurrency = 1 + r.IntN(50)
	}
	if r.IntN(2) == 0 {
		s.NodeConditions = conditions()
	}
	if r.IntN(2) == 0 {
		s.RunDuration, s.Interval = dur(time.Millisecond), dur(time.Millisecond)
	}
	names := []string{fmt.Sprintf("shoot--p--%d", r.IntN(1000))}
	if r.IntN(2) == 0 {
		s.Namespace = names[0]
	} else {
		for i := range r.IntN(5) {
			names = append(names, fmt.Sprintf("shoot--q--%d", i))
		}
		s.Namespaces = names
	}
	for _, ns := range names {
		var ns1 NamespaceSettings
		switch r.IntN(4) {
		case 0:
			ns1.NodeMonitorGrace = MinNodeMonitorGrace + dur(time.Millisecond)
		case 1:
			ns1.NodeConditions = conditions()
		case 2:
			ns1.NotBefore = time.Unix(r.Int64N(1<<35), r.Int64N(1e9)).UTC()
		default:
			continue // nothing of its own: not in NAMESPACE_SETTINGS
		}
		if s.NamespaceSettings == nil {
			s.NamespaceSettings = map[string]NamespaceSettings{}
		}
		s.NamespaceSettings[ns] = ns1
	}
	return s
}

func TestProbeEnvKeepsItsNamesAndOrder(t *testing.T) {
	s := oneNamespace()
	s.Namespace, s.Namespaces, s.Concurrency, s.Jitter = "", []string{"a", "b"}, 2, 0.2
	s.NamespaceSettings = map[string]NamespaceSettings{"b": {NodeMonitorGrace: time.Minute}}
	s.NodeConditions = map[string][]string{"p": {"C"}}
	s.RunDuration, s.Interval = 2*time.Minute, 10*time.Second
	var names []string
	for _, e := range s.Env() {
		names = append(names, e.Name)
	}
	want := "NAMESPACES NAMESPACE_SETTINGS PROBE_CONCURRENCY BACKOFF_JITTER_FACTOR KUBECONFIG_SECRET_NAME PROBE_TIMEOUT KCM_NODE_MONITOR_GRACE_DURATION NODE_LEASE_FAILURE_FRACTION LEASE_EXPIRY_BUFFER_FRACTION DEPENDENT_RESOURCES DRY_RUN NODE_CONDITIONS SCHEDULE RUN_DURATION"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("env\n got %s\nwant %s", got, want)
	}
}

func TestTheRunRefusesSettingsItCannotRun(t *testing.T) {
	for name, mutate := range map[string]func(*JobSettings){
		"no namespace":    func(s *JobSettings) { s.Namespace = "" },
		"both kinds":      func(s *JobSettings) { s.Namespaces = []string{"b"} },
		"no secret":       func(s *JobSettings) { s.KubeconfigSecretName = "" },
		"a zero fraction": func(s *JobSettings) { s.NodeLeaseFailureFraction = 0 },
		"no resources":    func(s *JobSettings) { s.DependentResources = "" },
		"a jitter of 1":   func(s *JobSettings) { s.Jitter = 1 },
		"settings elsewhere": func(s *JobSettings) {
			s.NamespaceSettings = map[string]NamespaceSettings{"other": {NodeMonitorGrace: time.Second}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := oneNamespace()
			mutate(&s)
			if _, err := LoadOptions(envconf.LookupIn(s.Env())); err == nil {
				t.Errorf("the run accepted %v", s.Env())
			}
		})
	}
}

// TestJobEnvNamesAreWhatEnvWrites: over generated settings, every name Env writes is one of
// JobEnvNames, and every one of JobEnvNames is written by some: the admission policy's list
// of a probe's variables is this one.
func TestJobEnvNamesAreWhatEnvWrites(t *testing.T) {
	want := map[string]bool{}
	for _, n := range JobEnvNames() {
		want[n] = true
	}
	seen := map[string]bool{}
	r := rand.New(rand.NewPCG(3, 4))
	shard := oneNamespace()
	shard.Namespace, shard.Namespaces, shard.Membership = "", []string{"a", "b"}, "depwatch/depwatch-probe-0"
	shard.Client = apilimit.Limit{QPS: 5, Burst: 10}
	settings := []JobSettings{shard}
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
