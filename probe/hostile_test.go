package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A kubeconfig Secret that is missing or holds garbage is a failed probe that names the Secret
// and scales nothing, records no Event and never quotes the Secret's content. Unlike
// TestNoDecisionScalesNothing, the production NewShootClient reads the content here.
func TestBrokenKubeconfigSecretScalesNothingAndNamesTheSecret(t *testing.T) {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	withContent := func(kc string) func(c *cluster) {
		return func(c *cluster) {
			s, _ := c.seed.CoreV1().Secrets(testNS).Get(context.Background(), testSecret, metaGet)
			s.Data = map[string][]byte{KubeconfigKey: []byte(kc)}
			if err := c.seed.Tracker().Update(secrets, s, testNS); err != nil {
				t.Fatal(err)
			}
		}
	}
	secretRef := testNS + "/" + testSecret
	tests := []struct {
		name  string
		setup func(c *cluster)
		want  string
	}{
		{"Secret missing", func(c *cluster) { _ = c.seed.Tracker().Delete(secrets, testNS, testSecret) }, "kubeconfig Secret " + secretRef + " not found"},
		{"key missing", func(c *cluster) {
			s, _ := c.seed.CoreV1().Secrets(testNS).Get(context.Background(), testSecret, metaGet)
			s.Data = map[string][]byte{"kubeconfig.yaml": []byte("s3cr3t")}
			_ = c.seed.Tracker().Update(secrets, s, testNS)
		}, "kubeconfig Secret " + secretRef + ` has no (or an empty) key "kubeconfig"`},
		{"key empty", withContent(""), "kubeconfig Secret " + secretRef + ` has no (or an empty) key "kubeconfig"`},
		{"binary garbage", withContent("\x00\xff\xfes3cr3t\x01"), "kubeconfig in Secret " + secretRef},
		{"YAML that is not a kubeconfig", withContent("s3cr3t: [1, 2"), "kubeconfig in Secret " + secretRef},
		{"a bare token", withContent("s3cr3t-token"), "kubeconfig in Secret " + secretRef},
		{"a kubeconfig without a server", withContent("apiVersion: v1\nkind: Config\nusers: [{name: u, user: {token: s3cr3t}}]\n"), "kubeconfig in Secret " + secretRef + ` (key "kubeconfig"): not a usable kubeconfig: it has no current-context`},
		{"a kubeconfig whose context is missing", withContent(strings.Replace(string(kubeconfigFor("https://127.0.0.1:1")), "current-context: shoot", "current-context: s3cr3t-ctx", 1)), "not a usable kubeconfig: its current-context names no context of the kubeconfig"},
		{"a kubeconfig whose cluster has no server", withContent(strings.Replace(string(kubeconfigFor("https://127.0.0.1:1")), "    server: https://127.0.0.1:1\n", "", 1)), "not a usable kubeconfig: the current context's cluster has no server"},
		{"a kubeconfig that would run a program", withContent(strings.Replace(string(kubeconfigFor("https://127.0.0.1:1")), "    token: s3cr3t-token-value\n",
			"    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, s3cr3t]}\n", 1)), "credential plugin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, deployment("kube-controller-manager", 2, nil))
			c.unhealthy() // a decision would scale down
			tt.setup(c)
			deps := c.deps()
			deps.NewShootClient = NewShootClient
			opts := testOptions(dep("Deployment", "kube-controller-manager", 0, 0))
			opts.ProbeTimeout = 200 * time.Millisecond
			sum, err := Run(context.Background(), deps, opts, c.logger())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if sum.Last != ResultError {
				t.Errorf("result = %s, want %s", sum.Last, ResultError)
			}
			if c.writes() != 0 || len(c.scaleOps()) != 0 || c.replicas(gvrDeployments, "kube-controller-manager") != 2 {
				t.Error("something was scaled")
			}
			if evs := c.events(); len(evs) != 0 {
				t.Errorf("events recorded: %v", evs)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(c.logs.String(), "s3cr3t") {
				t.Errorf("the Secret's content reached the error or the log: %v", err)
			}
		})
	}
}
