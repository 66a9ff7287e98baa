package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// attackerKubeconfig is what a pod spec could hand a Job through KUBECONFIG: a server of the
// attacker's and an exec plugin (in a pod, a tokenFile would name the service account's token).
const attackerKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: x
  cluster: {server: "https://attacker.invalid:443", insecure-skip-tls-verify: true}
users:
- name: x
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: /depwatch, args: [reap], interactiveMode: Never}
contexts:
- name: x
  context: {cluster: x, user: x}
current-context: x
`

func writeAttackerKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(attackerKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// TestAJobRunInAPodTrustsOnlyTheClusterItRunsIn: inside a pod (the kubelet's
// KUBERNETES_SERVICE_HOST is set), a kubeconfig named by KUBECONFIG is never read: the run
// uses the service account's in-cluster config, so neither the kubeconfig's server, nor its
// token file, nor its exec plugin is used, whatever the pod's spec says. Outside a pod (a
// user's shell) the kubeconfig is the run's, as before.
func TestAJobRunInAPodTrustsOnlyTheClusterItRunsIn(t *testing.T) {
	kubeconfig := writeAttackerKubeconfig(t)
	serviceAccountTokenPath = filepath.Join(t.TempDir(), "no-token")

	t.Run("outside a pod, KUBECONFIG is followed", func(t *testing.T) {
		t.Setenv("KUBECONFIG", kubeconfig)
		cfg, ignored, err := jobRestConfig("", lookupOf(map[string]string{"KUBECONFIG": kubeconfig}))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != "https://attacker.invalid:443" || len(ignored) != 0 {
			t.Errorf("host %q, ignored %v; want the kubeconfig's server and nothing ignored", cfg.Host, ignored)
		}
	})
	t.Run("in a pod, the in-cluster config alone", func(t *testing.T) {
		t.Setenv("KUBECONFIG", kubeconfig)
		t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
		t.Setenv("KUBERNETES_SERVICE_PORT", "443")
		env := map[string]string{"KUBECONFIG": kubeconfig, "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
		cfg, ignored, err := jobRestConfig("", lookupOf(env))
		// No token is mounted here, so the in-cluster config cannot be read: the run stops,
		// and does not fall back to the kubeconfig.
		if err == nil || cfg != nil {
			t.Fatalf("config %+v, err %v; want the in-cluster config's error and no config", cfg, err)
		}
		if !strings.Contains(err.Error(), "in-cluster configuration") {
			t.Errorf("err %v does not say the in-cluster configuration was read", err)
		}
		if len(ignored) != 1 || ignored[0] != "KUBECONFIG" {
			t.Errorf("ignored %v, want [KUBECONFIG]", ignored)
		}
	})
	t.Run("in a pod, detected by the token alone", func(t *testing.T) {
		token := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(token, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		serviceAccountTokenPath = token
		defer func() { serviceAccountTokenPath = filepath.Join(t.TempDir(), "no-token") }()
		t.Setenv("KUBECONFIG", kubeconfig)
		if _, _, err := jobRestConfig("", lookupOf(map[string]string{"KUBECONFIG": kubeconfig})); err == nil {
			t.Error("the kubeconfig was followed although a service account token is mounted")
		}
	})
}

// TestAJobRefusesKubeconfigFlagInAPod: --kubeconfig in a pod is bad input (exit 2, nothing
// done), for both Job subcommands.
func TestAJobRefusesKubeconfigFlagInAPod(t *testing.T) {
	kubeconfig := writeAttackerKubeconfig(t)
	for cmd, env := range map[string]map[string]string{
		"reap":  {"CONTAINER_STATUSES": "CrashLoopBackOff", "KUBERNETES_SERVICE_HOST": "10.0.0.1"},
		"probe": {"NAMESPACE": "shoot--a--b", "KUBERNETES_SERVICE_HOST": "10.0.0.1"},
	} {
		t.Run(cmd, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			main := reapMain
			if cmd == "probe" {
				main = probeMain
			}
			code := main(context.Background(), []string{"--kubeconfig", kubeconfig}, lookupOf(env), &stdout, &stderr)
			checkRefusal(t, cmd, code, stdout.String(), stderr.String(), []string{"--kubeconfig: not accepted inside a pod"})
		})
	}
}

// TestARefusalsTerminationMessageQuotesNoValue: the termination message, which whoever may
// get the pod reads, names each variable and its fault without its value (which could have
// come from a Secret); stderr, the container's log, keeps it for the person fixing the Job.
func TestARefusalsTerminationMessageQuotesNoValue(t *testing.T) {
	terminationLogPath = filepath.Join(t.TempDir(), "termination-log")
	defer func() { terminationLogPath = "/dev/termination-log" }()
	if err := os.WriteFile(terminationLogPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-t0ken-value"
	var stdout, stderr bytes.Buffer
	code := reapMain(context.Background(), nil, lookupOf(map[string]string{
		"CONTAINER_STATUSES": "CrashLoopBackOff", "SCHEDULE": secret, "MAX_PODS": secret,
	}), &stdout, &stderr)
	checkRefusal(t, "reap", code, stdout.String(), stderr.String(), []string{`SCHEDULE="` + secret, `MAX_PODS="` + secret})
	msg, err := os.ReadFile(terminationLogPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(msg), secret) {
		t.Errorf("the termination message quotes a value:\n%s", msg)
	}
	for _, want := range []string{"  - SCHEDULE: invalid value", "  - MAX_PODS: invalid value", "the container's log"} {
		if !strings.Contains(string(msg), want) {
			t.Errorf("the termination message does not say %q:\n%s", want, msg)
		}
	}
}

// A config file's problems are named after their file; the termination message keeps the file
// and the field, not the value.
func TestARefusedConfigFilesTerminationMessageQuotesNoValue(t *testing.T) {
	terminationLogPath = filepath.Join(t.TempDir(), "termination-log")
	defer func() { terminationLogPath = "/dev/termination-log" }()
	if err := os.WriteFile(terminationLogPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-t0ken-value"
	config := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(config, []byte("watchDuration: "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := weederMain(context.Background(), []string{"--config-file=" + config}, lookupOf(nil), &stdout, &stderr)
	checkRefusal(t, "weeder", code, stdout.String(), stderr.String(), []string{"--config-file=" + config + `: watchDuration="` + secret})
	msg, err := os.ReadFile(terminationLogPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "  - --config-file=" + config + ": watchDuration: invalid value"; strings.Contains(string(msg), secret) || !strings.Contains(string(msg), want) {
		t.Errorf("the termination message, want %q and no value:\n%s", want, msg)
	}
}
