//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// TestSecurityProbeNeverLogsItsKubeconfigSecret runs real probe Jobs (launched by the
// coordinator) against three kubeconfig Secrets and reads everything they leave behind: the
// Job pods' logs, their termination messages, the coordinator's log since the test began,
// and the Events of the namespace.
//
//   - working: the admin kubeconfig (client certificate and key) plus a recognisable bearer
//     token. The probe works (healthy), and neither the token nor the certificate or key data
//     (base64 or PEM) appears anywhere.
//   - garbage: a kubeconfig with a token and a marker in an unusable server URL, which
//     client-go quotes in its error. The probe fails naming the Secret, scales nothing,
//     and neither string appears.
//   - missing: no Secret. The probe fails naming the Secret, scales nothing.
//
// In the last two, most node leases have expired: a probe that got past the Secret would
// scale the dependents down, so "scaled nothing" is a real check.
func TestSecurityProbeNeverLogsItsKubeconfigSecret(t *testing.T) {
	parallel(t)
	admin := mustKubectl(t, "config", "view", "--raw", "--flatten", "--minify")
	token := "depwatch-e2e-bearer-" + rand.String(24)
	working, secrets := withToken(t, admin, token)
	if len(secrets) < 3 {
		t.Fatalf("the admin kubeconfig has no client certificate and key data to look for (found %d secret strings)", len(secrets))
	}
	garbageToken := "depwatch-e2e-garbage-" + rand.String(24)
	garbageHost := "depwatch-e2e-host-" + rand.String(12)
	garbage := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s:notaport/x"}}]
users: [{name: u, user: {token: %s}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, garbageHost, garbageToken)

	since := time.Now()
	type secretCase struct {
		name       string
		kubeconfig string
		noSecret   bool
		secrets    []string
		wantResult string
		wantReason string // in the failure message, with the Secret's namespace/name
	}
	run := func(t *testing.T, c secretCase) {
		setup := probeSetup{kubeconfig: c.kubeconfig}
		if c.wantResult == "error" {
			setup.expired = []string{"w1", "w2", "w3", "w4"}
		}
		s := newProbeScenario(t, "sec-"+c.name, setup)
		if c.noSecret {
			if err := kube.CoreV1().Secrets(s.ns).Delete(context.Background(), probeSecret, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("deleting the Secret: %v", err)
			}
		}
		s.start()
		want := map[string]string{"result": c.wantResult}
		lines := s.waitLog(2*time.Minute, want)
		if c.wantReason != "" {
			reason := fmt.Sprintf(c.wantReason, s.ns)
			l, _ := findLine(lines, want)
			t.Logf("probe: %s", l.str("reason"))
			if !strings.Contains(l.str("reason"), reason) {
				t.Errorf("the failure does not name the Secret (want %q in the reason): %v", reason, l)
			}
			// That log is a finished (failed) Job's: every retry of its pod failed the same way,
			// and nothing was scaled.
			for _, name := range dependents {
				d := s.deployment(name)
				_, meltdown := d.Annotations[annMeltdown]
				if *d.Spec.Replicas != dependentReplicas || d.Annotations[annReplicas] != "" || meltdown {
					t.Errorf("%s was touched by a probe that could not use its kubeconfig: replicas %d, annotations %v", name, *d.Spec.Replicas, d.Annotations)
				}
			}
		}

		// Everything the runs left behind.
		var text strings.Builder
		for _, l := range s.collected() {
			text.WriteString(l)
		}
		if text.Len() == 0 {
			t.Fatal("no probe Job log collected")
		}
		for _, j := range s.probeJobs() {
			pods, err := kube.CoreV1().Pods(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + j.Name})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				for _, cs := range p.Status.ContainerStatuses {
					if cs.State.Terminated != nil {
						text.WriteString(cs.State.Terminated.Message + "\n")
					}
				}
			}
		}
		text.WriteString(mustKubectl(t, "-n", depwatchNS, "logs", "deployment/depwatch-coordinator",
			"--since-time="+since.UTC().Format(time.RFC3339)))
		ours := text.String()
		// Events go into the search for secrets whoever reported them, whole (as kubectl get
		// -o yaml shows them); only depwatch's count for RBAC: under load the kubelet reports
		// its own passing refusals (a pod's token asked for before the node authorizer has
		// seen the pod's binding).
		list, err := kube.CoreV1().Events(s.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing the events of %s: %v", s.ns, err)
		}
		events, err := yaml.Marshal(list)
		if err != nil {
			t.Fatalf("writing the events of %s as YAML: %v", s.ns, err)
		}
		all := ours + string(events)
		for _, secret := range c.secrets {
			if i := strings.Index(all, secret); i >= 0 {
				t.Errorf("secret content %q… found in what the probe left behind, after: …%s", secret[:min(12, len(secret))], all[max(0, i-200):i])
			}
		}
		for _, e := range list.Items {
			if e.Source.Component != "kubelet" && e.ReportingController != "kubelet" {
				ours += e.Message + "\n"
			}
		}
		if strings.Contains(ours, "is forbidden") {
			t.Errorf("something was refused by RBAC:\n%s", ours)
		}
	}

	// One at a time for the working Secret; the two broken ones together, with all their
	// fake nodes' leases expired (8 of 9 nodes: a probe past the Secret would scale down).
	t.Run("working", func(t *testing.T) {
		run(t, secretCase{name: "working", kubeconfig: working, secrets: secrets, wantResult: "healthy"})
	})
	t.Run("broken", func(t *testing.T) {
		for _, c := range []secretCase{
			{name: "garbage", kubeconfig: garbage, secrets: []string{garbageToken, garbageHost}, wantResult: "error",
				wantReason: "kubeconfig in Secret %s/" + probeSecret},
			{name: "missing", kubeconfig: working, noSecret: true, secrets: secrets, wantResult: "error",
				wantReason: "kubeconfig Secret %s/" + probeSecret + " not found"},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				run(t, c)
			})
		}
	})
}

// withToken adds a bearer token to the kubeconfig's user and returns it with the strings
// that must never be logged: the token, the client certificate and key data as the
// kubeconfig has them (base64) and each line of their PEM bodies.
func withToken(t *testing.T, kubeconfig, token string) (string, []string) {
	t.Helper()
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		t.Fatalf("reading the admin kubeconfig: %v", err)
	}
	secrets := []string{token}
	verbatim := []string{token} // as the kubeconfig text has them
	for _, a := range cfg.AuthInfos {
		a.Token = token
		for _, data := range [][]byte{a.ClientCertificateData, a.ClientKeyData} {
			if len(data) == 0 {
				continue
			}
			b64 := base64.StdEncoding.EncodeToString(data)
			secrets = append(secrets, b64[len(b64)/2:len(b64)/2+64])
			verbatim = append(verbatim, b64[len(b64)/2:len(b64)/2+64])
			rest := data
			for {
				var block *pem.Block
				block, rest = pem.Decode(rest)
				if block == nil {
					break
				}
				body := base64.StdEncoding.EncodeToString(block.Bytes)
				for i := 0; i+64 <= len(body); i += 64 {
					secrets = append(secrets, body[i:i+64])
				}
			}
		}
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range verbatim {
		if !strings.Contains(string(out), s) {
			t.Fatalf("%q… is not in the kubeconfig written to the Secret; the test looks for the wrong strings", s[:12])
		}
	}
	return string(out), secrets
}
