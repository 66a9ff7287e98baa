package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCoordinatorExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	mustCoord(t, os.WriteFile(good, []byte("servicesAndDependantSelectors: {etcd-main-client: {podSelectors: [{matchLabels: {role: apiserver}}]}}\n"), 0o600))
	mustCoord(t, os.WriteFile(bad, []byte("watchDuration: soon\nservicesAndDependantSelectors: {etcd-main-client: {podSelectors: [{}]}}\n"), 0o600))

	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		code     int
		stdout   string
		stderrIn []string
	}{
		{"help lists flags and env", []string{"--help"}, nil, exitOK, "DEPWATCH_KUBE_API_QPS", nil},
		{"no config file", nil, nil, exitBadConfig, "", []string{"invalid configuration", "--config-file: required"}},
		{"negative qps", []string{"--config-file=" + good, "--kube-api-qps=-1"}, nil, exitBadConfig, "", []string{"--kube-api-qps=-1"}},
		{"bad config names the fields", []string{"--config-file=" + bad}, nil, exitBadConfig, "", []string{"watchDuration=", "soon"}},
		{"bad log format with the rest", []string{"--config-file=" + good}, map[string]string{"LOG_FORMAT": "xml", "DEPWATCH_KUBE_API_BURST": "-2"}, exitBadConfig, "", []string{"LOG_FORMAT", "--kube-api-burst=-2"}},
		{"no image outside a pod", []string{"--config-file=" + good, "--kubeconfig=" + writeKubeconfig(t, dir)}, map[string]string{}, exitBadConfig, "", []string{"jobTemplate.image: required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			code := coordinatorMain(context.Background(), tc.args, lookup, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, stdout.String())
			}
			for _, want := range tc.stderrIn {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), "goroutine ") {
				t.Errorf("stack trace on stderr:\n%s", stderr.String())
			}
		})
	}
}

// writeKubeconfig points at a closed local port: the config is refused before any call.
func writeKubeconfig(t *testing.T, dir string) string {
	p := filepath.Join(dir, "kubeconfig")
	mustCoord(t, os.WriteFile(p, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	return p
}

func mustCoord(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
