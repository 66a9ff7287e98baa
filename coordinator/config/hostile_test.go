package config

import (
	"strings"
	"testing"
)

// Hostile values in the config file: each is refused with its field and value named, and no
// config comes back, so the coordinator never starts on it (nothing is watched or launched).

const (
	hostileSvc = "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}\n"
	hostileRes = "dependentResourceInfos: [{ref: {kind: Deployment, name: kcm, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]"
)

// proberWith builds a prober section with the required fields and extra (a flow-map fragment).
func proberWith(extra string) string {
	if extra != "" {
		extra += ", "
	}
	return "prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, " + extra + hostileRes + "}"
}

func TestConfigRefusesHostileDurationsNamingFieldAndValue(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"negative watchDuration", hostileSvc + "watchDuration: -5m", "watchDuration: -5m0s: must not be negative"},
		{"watchDuration beyond a year", hostileSvc + "watchDuration: 9000h", "watchDuration: 9000h0m0s: must be at most 8760h0m0s"},
		{"watchDuration that would overflow the Job deadline", hostileSvc + "watchDuration: 2562047h\narmedMaxWait: 2562047h", "armedMaxWait: 2562047h0m0s: must be at most"},
		{"negative armedMaxWait", hostileSvc + "armedMaxWait: -1s", "armedMaxWait: -1s: must not be negative"},
		{"negative gracePeriod", hostileSvc + "gracePeriod: -30s", "gracePeriod: -30s: must not be negative"},
		{"deadlineMargin beyond a year", hostileSvc + "jobTemplate: {deadlineMargin: 2562047h}", "jobTemplate.deadlineMargin: 2562047h0m0s: must be at most"},
		{"negative probeInterval", proberWith("probeInterval: -10s"), "prober.probeInterval: -10s: must be greater than 0"},
		{"zero probeTimeout", proberWith("probeTimeout: 0s"), "prober.probeTimeout: 0s: must be greater than 0"},
		{"huge probeTimeout", proberWith("probeTimeout: 2562047h"), "prober.probeTimeout: 2562047h0m0s: must be at most"},
		{"huge probeInterval (jitter would overflow it)", proberWith("probeInterval: 2562047h"), "prober.probeInterval: 2562047h0m0s: must be at most"},
		{"negative initialDelay", proberWith("initialDelay: -1s"), "prober.initialDelay: -1s: must not be negative"},
		{"negative kcmNodeMonitorGraceDuration", "prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: -40s, " + hostileRes + "}", "prober.kcmNodeMonitorGraceDuration: -40s: must be greater than 0"},
		{"negative clusterDiscoveryInterval", proberWith("clusterDiscoveryInterval: -1m"), "prober.clusterDiscoveryInterval: -1m0s: must be greater than 0"},
		{"negative probeJobRunDuration", proberWith("probeJobRunDuration: -1h"), "prober.probeJobRunDuration: -1h0m0s: must not be negative"},
		{"scale chain that would overflow the Job deadline", "prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, dependentResourceInfos: [" +
			"{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: 0, timeout: 2562047h}, scaleDown: {level: 0}}," +
			"{ref: {kind: Deployment, name: b, apiVersion: apps/v1}, scaleUp: {level: 1, timeout: 2562047h}, scaleDown: {level: 0}}]}",
			"prober.dependentResourceInfos: the probe Job would run too long"},
		{"negative scale initialDelay", "prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, dependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: 0, initialDelay: -1s}, scaleDown: {level: 0}}]}",
			`prober.dependentResourceInfos[0].scaleUp.initialDelay="-1s": must not be negative`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml))
			if err == nil || cfg != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("cfg %v, err = %v\nwant a refusal containing %q", cfg != nil, err, tc.want)
			}
		})
	}
}

func TestConfigRefusesHostileFractionsNamingFieldAndValue(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"nodeLeaseFailureFraction NaN", proberWith("nodeLeaseFailureFraction: .nan"), "prober.nodeLeaseFailureFraction: NaN: must be a finite number"},
		{"leaseExpiryBufferFraction +Inf", proberWith("leaseExpiryBufferFraction: .inf"), "prober.leaseExpiryBufferFraction: +Inf: must be a finite number"},
		{"backoffJitterFactor -Inf", proberWith("backoffJitterFactor: -.inf"), "prober.backoffJitterFactor: -Inf: must be a finite number"},
		{"backoffJitterFactor NaN", proberWith("backoffJitterFactor: .NaN"), "prober.backoffJitterFactor: NaN: must be a finite number"},
		{"NaN deep in dependentResourceInfos", "prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, dependentResourceInfos: [{ref: {kind: Deployment, name: a, apiVersion: apps/v1}, scaleUp: {level: .nan}, scaleDown: {level: 0}}]}",
			"prober.dependentResourceInfos[0].scaleUp.level: NaN: must be a finite number"},
		{"nodeLeaseFailureFraction 0", proberWith("nodeLeaseFailureFraction: 0"), "prober.nodeLeaseFailureFraction: 0: must be in (0,1]"},
		{"nodeLeaseFailureFraction negative", proberWith("nodeLeaseFailureFraction: -0.5"), "prober.nodeLeaseFailureFraction: -0.5: must be in (0,1]"},
		{"nodeLeaseFailureFraction above 1", proberWith("nodeLeaseFailureFraction: 1.01"), "prober.nodeLeaseFailureFraction: 1.01: must be in (0,1]"},
		{"leaseExpiryBufferFraction 0", proberWith("leaseExpiryBufferFraction: 0"), "prober.leaseExpiryBufferFraction: 0: must be in (0,1]"},
		{"leaseExpiryBufferFraction 2", proberWith("leaseExpiryBufferFraction: 2"), "prober.leaseExpiryBufferFraction: 2: must be in (0,1]"},
		{"backoffJitterFactor 1", proberWith("backoffJitterFactor: 1"), "prober.backoffJitterFactor: 1: must be in [0,1)"},
		{"backoffJitterFactor negative", proberWith("backoffJitterFactor: -0.1"), "prober.backoffJitterFactor: -0.1: must be in [0,1)"},
		{"fraction written as text", proberWith("nodeLeaseFailureFraction: NaN"), `prober.nodeLeaseFailureFraction="NaN": must be a number`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml))
			if err == nil || cfg != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("cfg %v, err = %v\nwant a refusal containing %q", cfg != nil, err, tc.want)
			}
		})
	}
}

// An empty selector never means "all": the weeder's pod selectors, the watched namespaces'
// selector and the prober's namespace selector must each select something. The explicit way
// to watch every namespace is to leave namespaces (or namespaces.selector) out; there is no
// way to make a weeder restart every pod of a namespace, kube-system included.
func TestConfigRefusesEmptySelectorsNamingTheField(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"empty pod selector", "servicesAndDependantSelectors: {svc: {podSelectors: [{}]}}", "servicesAndDependantSelectors.svc.podSelectors[0]: empty selector"},
		{"empty matchLabels and matchExpressions", "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {}, matchExpressions: []}]}}", "servicesAndDependantSelectors.svc.podSelectors[0]: empty selector"},
		{"empty pod selector among good ones", "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}, {}]}}", "servicesAndDependantSelectors.svc.podSelectors[1]: empty selector"},
		{"empty pod selector in kube-system", "namespaces: {names: [kube-system]}\nservicesAndDependantSelectors: {kube-dns: {podSelectors: [{}]}}", "servicesAndDependantSelectors.kube-dns.podSelectors[0]: empty selector"},
		{"no pod selectors", "servicesAndDependantSelectors: {svc: {podSelectors: []}}", "servicesAndDependantSelectors.svc.podSelectors: required"},
		{"podSelectors null", "servicesAndDependantSelectors: {svc: {podSelectors: null}}", "servicesAndDependantSelectors.svc.podSelectors: required"},
		{"podSelectors left out", "servicesAndDependantSelectors: {svc: {}}", "servicesAndDependantSelectors.svc.podSelectors: required"},
		{"a service without an entry", "servicesAndDependantSelectors: {svc: null}", "servicesAndDependantSelectors.svc.podSelectors: required"},
		{"empty namespaces selector", hostileSvc + "namespaces: {selector: {}}", "namespaces.selector: empty: it would select every namespace"},
		{"empty prober namespaceSelector", proberWith("namespaceSelector: {}"), "prober.namespaceSelector: empty: it would probe every namespace"},
		{"empty-string service name", "servicesAndDependantSelectors: {\"\": {podSelectors: [{matchLabels: {app: x}}]}}", `servicesAndDependantSelectors."": "" is not a service name`},
		{"service name with a line break stays on one line", "servicesAndDependantSelectors: {\"a\\nb\": {podSelectors: [{matchLabels: {app: x}}]}}", `servicesAndDependantSelectors."a\nb": "a\nb" is not a service name`},
		{"near miss with a line break stays on one line", hostileSvc + "\"arm\\nWeeder\": false", `"arm\nWeeder": unknown field; did you mean armWeeder?`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml))
			if err == nil || cfg != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("cfg %v, err = %v\nwant a refusal containing %q", cfg != nil, err, tc.want)
			}
		})
	}
}

func TestConfigRefusesGarbageInScaleRefsNamingThePath(t *testing.T) {
	ref := func(r string) string {
		return "prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, dependentResourceInfos: [{ref: " + r + ", scaleUp: {level: 0}, scaleDown: {level: 0}}]}"
	}
	cases := []struct{ name, yaml, want string }{
		{"garbage apiVersion", ref("{kind: Deployment, name: kcm, apiVersion: '///'}"), `prober.dependentResourceInfos[0].ref.apiVersion="///": not a valid apiVersion`},
		{"apiVersion without a version", ref("{kind: Deployment, name: kcm, apiVersion: apps/}"), `prober.dependentResourceInfos[0].ref.apiVersion="apps/": not a valid apiVersion`},
		{"group not a DNS name", ref("{kind: Deployment, name: kcm, apiVersion: APPS_/v1}"), `prober.dependentResourceInfos[0].ref.apiVersion="APPS_/v1": the group is not a valid DNS subdomain`},
		{"kind with a path", ref("{kind: apps/Deployment, name: kcm, apiVersion: apps/v1}"), `prober.dependentResourceInfos[0].ref.kind="apps/Deployment": not a valid kind`},
		{"kind empty", ref("{kind: '', name: kcm, apiVersion: apps/v1}"), "prober.dependentResourceInfos[0].ref.kind: required, must be a non-empty string"},
		{"ref a string", ref("Deployment/kcm"), `prober.dependentResourceInfos[0].ref="Deployment/kcm": must be an object`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml))
			if err == nil || cfg != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("cfg %v, err = %v\nwant a refusal containing %q", cfg != nil, err, tc.want)
			}
		})
	}
}

// The bounds are inclusive: a year is still accepted, so real configs are far from them.
func TestConfigAcceptsDurationsUpToTheBound(t *testing.T) {
	cfg, err := Parse([]byte(hostileSvc + "watchDuration: 8760h\narmedMaxWait: 8760h\ngracePeriod: 8760h\njobTemplate: {deadlineMargin: 8760h}\n" +
		"prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 8760h, probeInterval: 8760h, initialDelay: 8760h, probeTimeout: 1h, clusterDiscoveryInterval: 8760h, " + hostileRes + "}"))
	if err != nil {
		t.Fatal(err)
	}
	checkAcceptedConfig(t, cfg)
}

// A refused prober section does not hide the problems of the rest of the file.
func TestConfigReportsProberAndWeederProblemsAtOnce(t *testing.T) {
	_, err := Parse([]byte("watchDuration: -1m\nservicesAndDependantSelectors: {svc: {podSelectors: [{}]}}\n" + proberWith("probeTimeout: 0s")))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"watchDuration: -1m0s", "servicesAndDependantSelectors.svc.podSelectors[0]: empty selector", "prober.probeTimeout: 0s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	// A prober-only config whose prober is refused is told about the prober, not about services.
	_, err = Parse([]byte(proberWith("probeTimeout: 0s")))
	if err == nil || strings.Contains(err.Error(), "servicesAndDependantSelectors") {
		t.Errorf("err = %v", err)
	}
}
