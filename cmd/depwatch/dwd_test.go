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
	if code := dispatchAs("/usr/local/bin/dependency-watchdog", nil, &out, &errOut); code != exitOK {
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
	if code := dispatchAs("/depwatch", nil, &out, &errOut); code != exitBadConfig {
		t.Errorf("depwatch without a command: exit %d, want %d", code, exitBadConfig)
	}
}

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
