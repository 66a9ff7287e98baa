package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestReapRefusesABadReapCooldownWithExitTwoNamingIt(t *testing.T) {
	for _, value := range []string{"-30s", "a minute", ""} {
		t.Run(value, func(t *testing.T) {
			env := map[string]string{"CONTAINER_STATUSES": "CrashLoopBackOff", "REAP_COOLDOWN": value}
			var stdout, stderr bytes.Buffer
			code := reapMain(context.Background(), []string{"--kubeconfig", filepath.Join(t.TempDir(), "never-read")}, probeTestLookup(env), &stdout, &stderr)
			if code != exitBadConfig {
				t.Fatalf("exit = %d, want %d", code, exitBadConfig)
			}
			if want := `REAP_COOLDOWN="` + value + `"`; !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr lacks %s:\n%s", want, stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("nothing may run on bad config, stdout: %s", stdout.String())
			}
		})
	}
}

func TestReapHelpDocumentsReapCooldownAndItsBound(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := reapMain(context.Background(), []string{"--help"}, probeTestLookup(nil), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit = %d", code)
	}
	out := stdout.String()
	for _, want := range []string{"REAP_COOLDOWN", "1 + floor(RUN_DURATION / REAP_COOLDOWN)", "0s = off", "deferred"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}
