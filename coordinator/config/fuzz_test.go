package config

import (
	"math"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/reaper"
)

// configFields are the prefixes a problem of Parse may start with: every line must name
// the field it is about (or say the file is not YAML at all).
var configFields = []string{
	"not valid YAML", "watchDuration", "servicesAndDependantSelectors", "namespaces", "useEndpoints",
	"gracePeriod", "armWeeder", "armedMaxWait", "jobTemplate", "prober",
}

func namesAField(line string, fields []string) bool {
	if k, _, ok := strings.Cut(line, ": unknown field; did you mean "); ok && k != "" {
		return true // names the misspelt key itself
	}
	for _, f := range fields {
		if strings.HasPrefix(line, f) {
			return true
		}
	}
	return false
}

func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// FuzzParseConfig: any config file, however broken, gives a config or an error whose every
// line names a field - never a panic. A config that is accepted must be launchable: every
// service's weeder Job (armed and not) builds, with an activeDeadlineSeconds that covers its
// run, and `depwatch reap` accepts the Job's environment with the same selectors. The
// coordinator validates at load precisely so that a launch can never fail on the config.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		dwdWeederConfig,
		"servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}",
		"servicesAndDependantSelectors: {svc: {podSelectors: [{}]}}",
		"servicesAndDependantSelectors: {svc: {podSelectors: []}}",
		"servicesAndDependantSelectors: {svc: {podSelectors: [null]}}",
		"servicesAndDependantSelectors: {svc: {podSelectors: [{matchExpressions: [{key: a, operator: Exists}]}]}}",
		"servicesAndDependantSelectors: {svc: {podSelectors: [{matchExpressions: [{key: a, operator: In, values: []}]}]}}",
		"servicesAndDependantSelectors: {Svc_1: {podSelectors: [{matchLabels: {\"\": x}}]}}",
		"watchDuration: -5m\narmedMaxWait: -1s\ngracePeriod: -1s\nservicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}",
		"watchDuration: 2562047h\narmedMaxWait: 2562047h\nservicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}",
		"watchDuration: 1ns\ngracePeriod: 0s\narmWeeder: false\nservicesAndDependantSelectors: {svc: {arm: true, podSelectors: [{matchLabels: {app: x}}]}}",
		"namespaces: {selector: {}, names: [kube-system]}\nservicesAndDependantSelectors: {kube-dns: {podSelectors: [{matchLabels: {k8s-app: coredns}}]}}",
		"namespaces: {selector: {matchLabels: {a: b}}, names: [\"\"]}\nservicesAndDependantSelectors: {}",
		"jobTemplate: {deadlineMargin: 2562047h, namespace: NS}\nservicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}",
		"servicesAndDependantSelectors: [a, b]",
		"servicesAndDependantSelectors: {svc: {podSelector: [{matchLabels: {app: x}}]}}",
		"watchDuration: soon\nwatchduration: 1m",
		"prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, dependentResourceInfos: [{ref: {kind: Deployment, name: kcm, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]}",
		"{",
		"- a\n- b",
		"null",
		"",
		"servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: \"a b\"}}]}}",
		"servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}, matchExpressions: [{key: b, operator: DoesNotExist}]}]}}",
		"r: {e: .nan}",
		".nan",
		"- .inf",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		cfg, err := Parse([]byte(doc))
		if err != nil {
			if cfg != nil {
				t.Fatalf("a config and an error at once: %v", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				// A non-finite number refuses the file wherever it is, an unknown field included,
				// as dependency-watchdog's YAML-to-JSON reading refuses it: its line names the
				// value's path in the file.
				if path, _, ok := strings.Cut(line, ": "); ok && path != "" && strings.HasSuffix(line, ": must be a finite number") {
					continue
				}
				if !namesAField(line, configFields) {
					t.Fatalf("problem %q does not name its field", line)
				}
				// Valid YAML that JSON cannot hold (.nan, .inf) is a bad value, to be named by its
				// field, not "not valid YAML".
				if strings.HasPrefix(line, "not valid YAML") && strings.Contains(line, "unsupported value") {
					t.Fatalf("a non-finite number is not named by its field: %q", line)
				}
			}
			return
		}
		checkAcceptedConfig(t, cfg)
	})
}

// checkAcceptedConfig asserts what the coordinator relies on in a config Parse accepted.
func checkAcceptedConfig(t *testing.T, cfg *Config) {
	t.Helper()
	if cfg.Watch() <= 0 || cfg.MaxWait() <= 0 {
		t.Fatalf("accepted a non-positive watch %s or max wait %s", cfg.Watch(), cfg.MaxWait())
	}
	if cfg.GracePeriod != nil && cfg.GracePeriod.Duration < 0 {
		t.Fatalf("accepted a negative gracePeriod %s", cfg.GracePeriod.Duration)
	}
	if !cfg.Weeds(false) && cfg.Prober == nil {
		t.Fatal("accepted a config that watches nothing")
	}
	tpl := cfg.JobTemplate
	tpl.Image = "localhost/depwatch:dev"
	if tpl.Namespace == "" {
		tpl.Namespace = "depwatch"
	}
	for _, svc := range cfg.Services() {
		sels := cfg.Selectors(svc)
		if len(sels) == 0 {
			t.Fatalf("service %q accepted without a pod selector", svc)
		}
		var grace *time.Duration
		if cfg.GracePeriod != nil {
			grace = &cfg.GracePeriod.Duration
		}
		for _, armed := range []bool{false, true} {
			spec, err := jobs.Weeder(jobs.WeederSpec{
				Namespace: "shoot--a", Service: svc, Selectors: sels, WatchDuration: cfg.Watch(),
				GracePeriod: grace, Armed: armed, MaxWait: cfg.MaxWait(), TriggerTime: time.Unix(0, 0),
			})
			if err != nil {
				t.Fatalf("service %q (armed %v): accepted, but its weeder spec fails: %v", svc, armed, err)
			}
			if spec.RunDuration < cfg.Watch() {
				t.Fatalf("service %q (armed %v): the Job's run %s overflows", svc, armed, spec.RunDuration)
			}
			job, err := jobs.Build(tpl, spec)
			if err != nil {
				t.Fatalf("service %q (armed %v): accepted, but its Job does not build: %v", svc, armed, err)
			}
			// activeDeadlineSeconds must cover the run: an overflow would kill the Job at once.
			if d := *job.Spec.ActiveDeadlineSeconds; d < int64(spec.RunDuration/time.Second) {
				t.Fatalf("service %q (armed %v): activeDeadlineSeconds %d does not cover the run %s", svc, armed, d, spec.RunDuration)
			}
			env := map[string]string{}
			for _, e := range spec.Env {
				env[e.Name] = e.Value
			}
			o, err := reaper.LoadOptions(lookupOf(env))
			if err != nil {
				t.Fatalf("service %q (armed %v): the weeder Job's environment %v is refused by depwatch reap: %v", svc, armed, env, err)
			}
			if len(o.Selectors) != len(sels) {
				t.Fatalf("service %q: %d pod selectors became %d in the Job", svc, len(sels), len(o.Selectors))
			}
			for _, s := range o.Selectors {
				if s.Empty() {
					t.Fatalf("service %q: the weeder Job would reap every pod", svc)
				}
			}
		}
	}
	if cfg.Prober != nil {
		checkAcceptedProber(t, cfg.Prober)
	}
}

// checkAcceptedProber asserts the prober section's invariants, and that the probe Job the
// coordinator would launch from it builds and is accepted by `depwatch probe`.
func checkAcceptedProber(t *testing.T, p *prober.Config) {
	t.Helper()
	fraction := func(f float64) bool { return f > 0 && f <= 1 }
	switch {
	case p.Interval() <= 0 || p.Timeout() <= 0 || p.Delay() < 0 || p.DiscoveryInterval() <= 0:
		t.Fatalf("accepted bad durations: interval %s timeout %s delay %s discovery %s", p.Interval(), p.Timeout(), p.Delay(), p.DiscoveryInterval())
	case p.KCMGrace() <= 0:
		t.Fatalf("accepted a kcmNodeMonitorGraceDuration of %s (absent means dependency-watchdog's 40s)", p.KCMGrace())
	case !(p.Jitter() >= 0 && p.Jitter() < 1):
		t.Fatalf("accepted backoffJitterFactor %g outside [0,1)", p.Jitter())
	case !fraction(p.LeaseFailure()) || !fraction(p.ExpiryBuffer()):
		t.Fatalf("accepted fractions %g, %g outside (0,1]", p.LeaseFailure(), p.ExpiryBuffer())
	case p.SuccessfulHistory() < 0 || p.FailedHistory() < 0:
		t.Fatal("accepted a negative history limit")
	case p.RunDuration() < 0 || (p.RunDuration() > 0 && p.RunDuration() < p.Interval()):
		t.Fatalf("accepted probeJobRunDuration %s with probeInterval %s", p.RunDuration(), p.Interval())
	case p.Selector().Empty():
		t.Fatal("accepted a namespace selector that probes every namespace")
	case len(p.Resources()) == 0 || p.ResourcesJSON() == "":
		t.Fatal("accepted without dependent resources")
	case p.ScaleChain() < 0:
		t.Fatalf("the scale chain overflows: %s", p.ScaleChain())
	}
	// The jittered interval must stay positive and representable (the prober waits on it; an
	// overflow turns into Jittered's 1 ms floor).
	if lo, hi := float64(p.Interval())*(1-p.Jitter()), float64(p.Interval())*(1+p.Jitter()); lo <= 0 || math.IsNaN(lo) || hi >= math.MaxInt64 {
		t.Fatalf("the jittered interval spans %g..%g ns", lo, hi)
	}
	// The scale chain covers every resource's own initialDelay + timeout, in both directions
	// (computed in float seconds, which cannot overflow): it sizes the Job's deadline.
	chain := p.ScaleChain().Seconds()
	for _, r := range p.Resources() {
		for _, si := range []probe.ScaleInfo{r.ScaleUp, r.ScaleDown} {
			if need := si.InitialDelay.Seconds() + si.Timeout.Seconds(); chain < need {
				t.Fatalf("the scale chain %gs is shorter than %s's own %gs", chain, r.Ref, need)
			}
		}
	}
	spec, err := jobs.Probe(p.ProbeSpec("shoot--a", time.Unix(0, 0)))
	if err != nil {
		t.Fatalf("accepted, but the probe Job spec fails: %v", err)
	}
	if spec.RunDuration < p.RunDuration() {
		t.Fatalf("the probe Job's run %s overflows", spec.RunDuration)
	}
	job, err := jobs.Build(jobs.Template{Image: "localhost/depwatch:dev", Namespace: "depwatch"}, spec)
	if err != nil {
		t.Fatalf("accepted, but the probe Job does not build: %v", err)
	}
	if d := *job.Spec.ActiveDeadlineSeconds; d < int64(spec.RunDuration/time.Second) {
		t.Fatalf("activeDeadlineSeconds %d does not cover the run %s", d, spec.RunDuration)
	}
	env := map[string]string{}
	for _, e := range spec.Env {
		env[e.Name] = e.Value
	}
	o, err := probe.LoadOptions(lookupOf(env))
	if err != nil {
		t.Fatalf("the probe Job's environment is refused by depwatch probe: %v\n%v", err, env)
	}
	if o.NodeLeaseFailureFraction != p.LeaseFailure() || o.LeaseExpiryBufferFraction != p.ExpiryBuffer() || len(o.Resources) != len(p.Resources()) {
		t.Fatalf("the probe Job reads different settings: %+v", o)
	}
}

// FuzzProberConfig: any prober section, however broken, gives a section or problems each
// naming a field under "prober." - never a panic; what is accepted satisfies checkAcceptedProber.
func FuzzProberConfig(f *testing.F) {
	const res = "dependentResourceInfos: [{ref: {kind: Deployment, name: kcm, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]"
	for _, seed := range []string{
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 40s\n" + res,
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 40s\nprobeInterval: 10s\ninitialDelay: 30s\nprobeTimeout: 30s\nbackoffJitterFactor: 0.2\nnodeLeaseFailureFraction: 0.6\nleaseExpiryBufferFraction: 0.75\nsuccessfulJobsHistoryLimit: 1\nfailedJobsHistoryLimit: 3\nprobeJobRunDuration: 1h\nclusterDiscoveryInterval: 1m\ndryRun: true\nnamespaceSelector: {matchLabels: {gardener.cloud/role: shoot}}\n" + res,
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 40s\nnodeLeaseFailureFraction: .nan\nleaseExpiryBufferFraction: .inf\nbackoffJitterFactor: .nan\n" + res,
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 40s\nnodeLeaseFailureFraction: 0\nleaseExpiryBufferFraction: -0.5\nbackoffJitterFactor: 1\n" + res,
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: -40s\nprobeInterval: 0s\nprobeTimeout: -1s\ninitialDelay: -1s\nprobeJobRunDuration: 1s\n" + res,
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 2562047h\nprobeTimeout: 2562047h\nprobeJobRunDuration: 2562047h\n" + res,
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 40s\ndependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: 0, timeout: 2562047h}, scaleDown: {level: 0}}, {ref: {kind: Deployment, name: b, apiVersion: apps/v1}, scaleUp: {level: 1, timeout: 2562047h}, scaleDown: {level: 0}}]",
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 40s\nnamespaceSelector: {}\n" + res,
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 40s\nnamespaceSelector: {matchExpressions: [{key: a, operator: Gt, values: [x]}]}\n" + res,
		"kubeConfigSecretName: S_1\nkcmNodeMonitorGraceDuration: 40s\ndependentResourceInfos: [{ref: {kind: Not-A-Kind, name: x, apiVersion: \"///\"}, scaleUp: {level: 0}, scaleDown: {level: 0}}]",
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 40s\ndependentResourceInfos: []",
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 40s\ndependentResourceInfos: {a: b}",
		"kubeConfigSecretName: s\nkcmNodeMonitorGraceDuration: 40s\nsuccessfulJobsHistoryLimit: -1\nfailedJobsHistoryLimit: 99999999999\n" + res,
		"kubeconfigSecretName: s",
		"[1, 2]",
		"{}",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, section string) {
		raw, err := yaml.YAMLToJSON([]byte(section))
		if err != nil {
			return // not YAML: Parse reports that before the section is looked at
		}
		p, errs := prober.Parse(raw)
		if len(errs) > 0 {
			if p != nil {
				t.Fatalf("a section and problems at once: %v", errs)
			}
			for _, e := range errs {
				for _, line := range strings.Split(e.Error(), "\n") {
					if !strings.HasPrefix(line, "prober") {
						t.Fatalf("problem %q does not name its field under prober.", line)
					}
				}
			}
			return
		}
		if p == nil {
			return // an empty or null section: no prober
		}
		checkAcceptedProber(t, p)
	})
}
