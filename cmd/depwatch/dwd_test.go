package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnderDependencyWatchdogsNameTheBinaryAnswersAsIt: the image's
// /usr/local/bin/dependency-watchdog is this binary; started under that name without a
// command it prints its usage and exits 0, as dependency-watchdog does, and `help <command>`
// gives the command's help.
func TestUnderDependencyWatchdogsNameTheBinaryAnswersAsIt(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := dispatchAs("/usr/local/bin/dependency-watchdog", nil, noEnv, &out, &errOut); code != exitOK {
		t.Fatalf("no command: exit %d, stderr %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "weeder") || !strings.Contains(out.String(), "prober") {
		t.Errorf("usage lacks the commands:\n%s", out.String())
	}
	out.Reset()
	if code := dwdMain(context.Background(), "prober", []string{"--help"}, func(string) (string, bool) { return "", false }, &out, &errOut); code != exitOK {
		t.Fatalf("prober --help: exit %d", code)
	}
	if !strings.Contains(out.String(), "--zap-log-level") || !strings.Contains(out.String(), "LOG_FORMAT") {
		t.Errorf("prober --help lacks the flags:\n%s", out.String())
	}
	// Under its own name a missing command is still a usage error.
	if code := dispatchAs("/depwatch", nil, noEnv, &out, &errOut); code != exitBadConfig {
		t.Errorf("depwatch without a command: exit %d, want %d", code, exitBadConfig)
	}
}

// noEnv is an environment with nothing set.
func noEnv(string) (string, bool) { return "", false }

func TestDWDCommandsRefuseBadInputWithExitTwo(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "dep-config.yaml")
	if err := os.WriteFile(bad, []byte("watchDuration: soon\nservicesAndDependantSelectors: {etcd-main-client: {podSelectors: [{}]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		args  []string
		named []string
	}{
		{"bad flag value and bad config together", []string{"--config-file=" + bad, "--zap-encoder=xml"},
			[]string{`--zap-encoder="xml"`, "watchDuration"}},
		{"bad config names the field", []string{"--config-file=" + bad}, []string{"watchDuration", "soon"}},
		{"unknown flag", []string{"--config-file=" + bad, "--no-such-flag"}, []string{"unknown flag --no-such-flag"}},
		{"missing config file", []string{"--config-file=" + filepath.Join(dir, "missing.yaml")}, []string{"missing.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dwdMain(context.Background(), "weeder", tc.args, func(string) (string, bool) { return "", false }, &stdout, &stderr)
			checkRefusal(t, "weeder", code, stdout.String(), stderr.String(), tc.named)
		})
	}
}

// TestDWDFlagsWithoutEffectAreNamedInOneWarning: dependency-watchdog's flags depwatch does not
// use are accepted and named together in one warning line, before the run asks anything of
// the API server (here out of reach: the run then stops with exit 1, not 2).
func TestDWDFlagsWithoutEffectAreNamedInOneWarning(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "dep-config.yaml")
	if err := os.WriteFile(cfg, []byte("servicesAndDependantSelectors: {etcd-main-client: {podSelectors: [{matchLabels: {role: apiserver}}]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	args := []string{"--config-file=" + cfg, "--enable-leader-election=true", "--pprof-bind-addr=:8081", "--zap-encoder=console",
		"--kubeconfig=" + writeKubeconfig(t, dir), "--metrics-bind-addr=0", "--health-bind-addr=0"}
	env := map[string]string{"LOG_FORMAT": "Logrus"}
	code := dwdMain(context.Background(), "weeder", args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d (API server out of reach)\nstdout: %s\nstderr: %s", code, exitFailure, stdout.String(), stderr.String())
	}
	var warnings []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.Contains(l, "no effect") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "--pprof-bind-addr=:8081") || !strings.Contains(warnings[0], "--zap-encoder=console") {
		t.Errorf("want one warning naming both flags, got %d:\n%s", len(warnings), strings.Join(warnings, "\n"))
	}
	if !strings.Contains(stdout.String(), "Cannot reach the Kubernetes API server") {
		t.Errorf("the run did not say the API server is out of reach:\n%s", stdout.String())
	}
}
