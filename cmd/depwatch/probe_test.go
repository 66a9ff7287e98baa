package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func probeTestLookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func probeValidEnv() map[string]string {
	return map[string]string{
		"NAMESPACE":                       "shoot--proj--dev",
		"KUBECONFIG_SECRET_NAME":          "dwd-probe-kubeconfig",
		"KCM_NODE_MONITOR_GRACE_DURATION": "40s",
		"DEPENDENT_RESOURCES":             `[{"ref":{"kind":"Deployment","name":"kube-controller-manager","apiVersion":"apps/v1"},"scaleUp":{"level":0},"scaleDown":{"level":0}}]`,
	}
}

func TestProbeBadConfigExitsTwoListingEveryProblem(t *testing.T) {
	env := map[string]string{
		"LOG_LEVEL":                   "loud",
		"NODE_LEASE_FAILURE_FRACTION": "NaN",
		"DEPENDENT_RESOURCES":         `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"},"scaleUp":{"level":0},"scaleDown":{"level":"low"}}]`,
	}
	var stdout, stderr bytes.Buffer
	code := probeMain(context.Background(), []string{"--kubeconfig", filepath.Join(t.TempDir(), "never-read")}, probeTestLookup(env), &stdout, &stderr)
	if code != exitBadConfig {
		t.Fatalf("exit = %d, want %d", code, exitBadConfig)
	}
	out := stderr.String()
	for _, want := range []string{
		"depwatch probe: invalid configuration, nothing was done",
		`LOG_LEVEL="loud"`,
		"NAMESPACE: required",
		"KUBECONFIG_SECRET_NAME: required",
		"KCM_NODE_MONITOR_GRACE_DURATION: required",
		`NODE_LEASE_FAILURE_FRACTION="NaN"`,
		"DEPENDENT_RESOURCES[0].scaleDown.level=\"low\"",
	} {
		if !strings.Contains(out, "  - "+want) && !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("nothing may run on bad config, stdout: %s", stdout.String())
	}
}

func TestProbeHelpListsEverySettingWithItsDefault(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := probeMain(context.Background(), []string{"--help"}, probeTestLookup(nil), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit = %d", code)
	}
	out := stdout.String()
	for _, want := range []string{
		"--kubeconfig",
		"NAMESPACE", "KUBECONFIG_SECRET_NAME", "(required)",
		"PROBE_TIMEOUT", "30s",
		"KCM_NODE_MONITOR_GRACE_DURATION",
		"NODE_LEASE_FAILURE_FRACTION", "0.6",
		"LEASE_EXPIRY_BUFFER_FRACTION", "0.75",
		"DEPENDENT_RESOURCES", "DRY_RUN", "SCHEDULE", "RUN_DURATION",
		"LOG_LEVEL", "LOG_FORMAT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestProbeRefusesArguments(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := probeMain(context.Background(), []string{"shoot--proj--dev"}, probeTestLookup(probeValidEnv()), &stdout, &stderr); code != exitBadConfig {
		t.Fatalf("exit = %d, want %d", code, exitBadConfig)
	}
	if !strings.Contains(stderr.String(), "configured by environment variables") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

func TestProbeWithoutAReachableSeedExitsOneScalingNothing(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := probeMain(context.Background(), []string{"--kubeconfig", filepath.Join(t.TempDir(), "missing")}, probeTestLookup(probeValidEnv()), &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit = %d, want %d", code, exitFailure)
	}
	if !strings.Contains(stdout.String(), "nothing was scaled") {
		t.Errorf("stdout: %s", stdout.String())
	}
}
