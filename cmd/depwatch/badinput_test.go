package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkRefusal asserts the bad-input contract of every subcommand: exit code 2, a heading
// saying nothing was done, then one "  - " line per problem with each named problem on a line
// of its own, no stack trace, and nothing on stdout (where a run logs once it has started).
func checkRefusal(t *testing.T, cmd string, code int, stdout, stderr string, named []string) {
	t.Helper()
	if code != exitBadConfig {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitBadConfig, stdout, stderr)
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if want := "depwatch " + cmd + ": invalid configuration, nothing was done:"; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "  - ") {
			t.Errorf("line %q is not one problem", l)
		}
	}
	for _, n := range named {
		found := 0
		for _, l := range lines[1:] {
			if strings.Contains(l, n) {
				found++
			}
		}
		if found == 0 {
			t.Errorf("no problem line names %q:\n%s", n, stderr)
		}
	}
	for _, trace := range []string{"goroutine ", "panic", ".go:"} {
		if strings.Contains(stderr, trace) {
			t.Errorf("stack trace (%q) on stderr:\n%s", trace, stderr)
		}
	}
	if stdout != "" {
		t.Errorf("something ran on a refused configuration; stdout:\n%s", stdout)
	}
}

func TestReapRefusesHostileEnvironmentWithExitTwo(t *testing.T) {
	cases := []struct {
		name  string
		env   map[string]string
		named []string
	}{
		{"empty selectors and bad numbers", map[string]string{
			"CONTAINER_STATUSES": "CrashLoopBackOff", "LABEL_SELECTOR": "", "LABEL_SELECTORS": `["app=a",""]`,
			"CHAOS_CHANCE": "NaN", "GRACE_PERIOD": "-1s", "MAX_UNREADY": "-5m", "POD_STATUSES": "Evicted,",
		}, []string{`LABEL_SELECTOR=""`, `LABEL_SELECTORS="[\"app=a\",\"\"]": entry 1`, `CHAOS_CHANCE="NaN"`, `GRACE_PERIOD="-1s"`, `MAX_UNREADY="-5m"`, `POD_STATUSES="Evicted,"`}},
		{"a schedule robfig/cron panics on", map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "SCHEDULE": "TZ=UTC"}, []string{`SCHEDULE="TZ=UTC"`}},
		{"no rule at all", map[string]string{"NAMESPACE": "kube-system"}, []string{"no rule is enabled"}},
		{"a value with a line break", map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "LABEL_SELECTOR": "app=a\nrm -rf"}, []string{`LABEL_SELECTOR="app=a\nrm -rf"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			code := reapMain(context.Background(), []string{"--kubeconfig", filepath.Join(t.TempDir(), "never-read")}, lookup, &stdout, &stderr)
			checkRefusal(t, "reap", code, stdout.String(), stderr.String(), tc.named)
		})
	}
}

func TestProbeRefusesHostileEnvironmentWithExitTwo(t *testing.T) {
	garbageRef := `[{"ref":{"kind":"Deploy ment","name":"kcm","apiVersion":"garbage//v1"},"scaleUp":{"level":0},"scaleDown":{"level":0}}]`
	cases := []struct {
		name  string
		env   map[string]string
		named []string
	}{
		{"fractions and durations", map[string]string{
			"NODE_LEASE_FAILURE_FRACTION": "+Inf", "LEASE_EXPIRY_BUFFER_FRACTION": "0", "PROBE_TIMEOUT": "-1s", "KCM_NODE_MONITOR_GRACE_DURATION": "0s",
		}, []string{`NODE_LEASE_FAILURE_FRACTION="+Inf"`, `LEASE_EXPIRY_BUFFER_FRACTION="0"`, `PROBE_TIMEOUT="-1s"`, `KCM_NODE_MONITOR_GRACE_DURATION="0s"`}},
		{"fraction above one and negative", map[string]string{"NODE_LEASE_FAILURE_FRACTION": "1.5", "LEASE_EXPIRY_BUFFER_FRACTION": "-0.25"},
			[]string{`NODE_LEASE_FAILURE_FRACTION="1.5"`, `LEASE_EXPIRY_BUFFER_FRACTION="-0.25"`}},
		{"garbage kind and apiVersion", map[string]string{"DEPENDENT_RESOURCES": garbageRef},
			[]string{`DEPENDENT_RESOURCES[0].ref.kind="Deploy ment"`, `DEPENDENT_RESOURCES[0].ref.apiVersion="garbage//v1"`}},
		{"empty Secret name", map[string]string{"KUBECONFIG_SECRET_NAME": ""}, []string{`KUBECONFIG_SECRET_NAME=""`}},
		{"schedule without run duration", map[string]string{"SCHEDULE": "@every 10s"}, []string{"RUN_DURATION: required with SCHEDULE"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := probeValidEnv()
			for k, v := range tc.env {
				env[k] = v
			}
			var stdout, stderr bytes.Buffer
			code := probeMain(context.Background(), []string{"--kubeconfig", filepath.Join(t.TempDir(), "never-read")}, probeTestLookup(env), &stdout, &stderr)
			checkRefusal(t, "probe", code, stdout.String(), stderr.String(), tc.named)
			if strings.Contains(stderr.String(), "invalid probe configuration") {
				t.Errorf("a second heading among the problems:\n%s", stderr.String())
			}
		})
	}
}

func TestCoordinatorRefusesHostileConfigWithExitTwo(t *testing.T) {
	svc := "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}\n"
	res := "dependentResourceInfos: [{ref: {kind: Deployment, name: kcm, apiVersion: apps/v1}, scaleUp: {level: 0}, scaleDown: {level: 0}}]"
	cases := []struct {
		name, config string
		named        []string
	}{
		{"empty selectors and a negative duration", "watchDuration: -1m\nnamespaces: {selector: {}}\nservicesAndDependantSelectors: {svc: {podSelectors: [{}]}}\n",
			[]string{"watchDuration: -1m0s: must not be negative", "namespaces.selector: empty", "servicesAndDependantSelectors.svc.podSelectors[0]: empty selector"}},
		{"NaN and infinite fractions", svc + "prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, nodeLeaseFailureFraction: .nan, leaseExpiryBufferFraction: .inf, " + res + "}",
			[]string{"prober.nodeLeaseFailureFraction: NaN", "prober.leaseExpiryBufferFraction: +Inf"}},
		{"fractions out of range", svc + "prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, nodeLeaseFailureFraction: 0, leaseExpiryBufferFraction: 1.5, backoffJitterFactor: -1, " + res + "}",
			[]string{"prober.nodeLeaseFailureFraction: 0", "prober.leaseExpiryBufferFraction: 1.5", "prober.backoffJitterFactor: -1"}},
		{"durations that would overflow", svc + "armedMaxWait: 2562047h\nprober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, probeTimeout: 2562047h, " + res + "}",
			[]string{"armedMaxWait: 2562047h0m0s: must be at most", "prober.probeTimeout: 2562047h0m0s: must be at most"}},
		{"garbage scale ref", svc + "prober: {kubeConfigSecretName: s, kcmNodeMonitorGraceDuration: 40s, dependentResourceInfos: [{ref: {kind: Deployment, name: kcm, apiVersion: '///'}, scaleUp: {level: 0}, scaleDown: {level: 0}}]}",
			[]string{`prober.dependentResourceInfos[0].ref.apiVersion="///"`}},
		{"not YAML", "servicesAndDependantSelectors: [", []string{"not valid YAML"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(path, []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := coordinatorMain(context.Background(), []string{"--config-file=" + path, "--kubeconfig=" + writeKubeconfig(t, dir)},
				func(string) (string, bool) { return "", false }, &stdout, &stderr)
			checkRefusal(t, "coordinator", code, stdout.String(), stderr.String(), append([]string{"--config-file=" + path + ": "}, tc.named...))
		})
	}
}
