package probe

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func kubeconfigFor(server string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: shoot
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: probe
  user:
    token: s3cr3t-token-value
contexts:
- name: shoot
  context: {cluster: shoot, user: probe}
current-context: shoot
`, server)
}

func TestNewShootClientRefusesUnusableKubeconfigsWithoutQuotingThem(t *testing.T) {
	tests := []struct {
		name, kubeconfig, want string
	}{
		{"not YAML", "s3cr3t-token-value: [", "not a valid kubeconfig"},
		{"a bare token", "s3cr3t-token-value", "not a valid kubeconfig"},
		{"no server", "apiVersion: v1\nkind: Config\n", "not a usable kubeconfig"},
		{"exec plugin", strings.Replace(string(kubeconfigFor("https://127.0.0.1:1")), "    token: s3cr3t-token-value\n",
			"    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, s3cr3t-token-value]}\n", 1), "credential plugin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewShootClient([]byte(tt.kubeconfig), time.Second)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("the error quotes the Secret: %v", err)
			}
		})
	}
}

// The real client against real HTTP answers: the classification must hold for the errors
// client-go actually returns, not only for the fakes'.
func TestAPIServerProbeThroughARealClient(t *testing.T) {
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer s3cr3t-token-value" {
				t.Errorf("the token from the kubeconfig was not used")
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			if code == http.StatusOK {
				fmt.Fprint(w, `{"major":"1","minor":"36","gitVersion":"v1.36.3"}`)
				return
			}
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":%d}`, code)
		}
	}
	closedPort := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "https://" + addr
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc // nil: a closed port
		wantErr bool
		kind    Result
	}{
		{"reachable", status(http.StatusOK), false, ""},
		{"closed port", nil, true, ResultAPIUnreachable},
		{"throttled 429", status(http.StatusTooManyRequests), true, ResultThrottled},
		{"server error 503", status(http.StatusServiceUnavailable), true, ResultAPIUnreachable},
		{"hangs past the timeout", func(w http.ResponseWriter, r *http.Request) { time.Sleep(600 * time.Millisecond) }, true, ResultAPIUnreachable},
		{"credentials rejected 401", status(http.StatusUnauthorized), true, ResultError},
		{"forbidden 403", status(http.StatusForbidden), true, ResultError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			server := closedPort()
			if tt.handler != nil {
				srv := httptest.NewTLSServer(tt.handler)
				defer srv.Close()
				server = srv.URL
			}
			shoot, err := NewShootClient(kubeconfigFor(server), 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			pe := probeAPIServer(context.Background(), shoot, 200*time.Millisecond)
			switch {
			case !tt.wantErr && pe != nil:
				t.Fatalf("probe failed: %v", pe)
			case tt.wantErr && pe == nil:
				t.Fatal("probe succeeded")
			case tt.wantErr && pe.result != tt.kind:
				t.Errorf("result = %s, want %s: %v", pe.result, tt.kind, pe)
			}
			if pe != nil && strings.Contains(pe.Error(), "s3cr3t") {
				t.Errorf("the error quotes the token: %v", pe)
			}
		})
	}
}
