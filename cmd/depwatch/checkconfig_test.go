package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/depwatch/depwatch/test/upstream"
)

// noCluster makes any attempt to reach a cluster visible: KUBECONFIG names a kubeconfig whose
// server is a local listener that counts the connections it is offered. It returns the
// kubeconfig's path and the count; a check must leave it at 0.
func noCluster(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var dialed atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			c.Close()
		}
	}()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	mustCoord(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://`+ln.Addr().String()+`"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	return kubeconfig, &dialed
}

// check runs `depwatch coordinator --check-config` with args and env.
func check(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code = coordinatorMain(context.Background(), append([]string{"--check-config"}, args...), lookup, &out, &errOut)
	if strings.Contains(errOut.String(), "goroutine ") || strings.Contains(out.String(), "goroutine ") {
		t.Errorf("a stack trace:\n%s%s", out.String(), errOut.String())
	}
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	mustCoord(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// The configs depwatch ships and dependency-watchdog's two ConfigMaps as gardenlet writes
// them pass the check with no cluster at all: KUBECONFIG names a file that does not exist,
// and a kubeconfig given with --kubeconfig names a server that is never dialled.
func TestCheckConfigPassesTheShippedAndDependencyWatchdogsConfigs(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "no-such-kubeconfig"))
	kubeconfig, dialed := noCluster(t)
	weeder := writeFile(t, "dep-config.yaml", string(upstream.WeederConfig()))
	prober := writeFile(t, "prober-dep-config.yaml", string(upstream.ProberConfig()))
	annotationsOnly := writeFile(t, "annotations-only.yaml", "watchDuration: 5m\n")
	cases := []struct {
		name string
		args []string
		says []string // in the summary
	}{
		{"the kustomize base's config, as the base starts it", []string{"--config-file=../../manifests/base/config.yaml", "--enable-leader-election"},
			[]string{"follows the depwatch.io/depends-on annotation of Deployments, StatefulSets and DaemonSets in every namespace", "No prober", "Lease depwatch-coordinator"}},
		{"the Gardener component's config", []string{"--config-file=../../manifests/components/gardener/config.yaml", "--enable-leader-election"},
			[]string{"etcd-main-client, kube-apiserver", "gardener.cloud/role=shoot", "follows the depwatch.io/depends-on annotation", "Lease depwatch-coordinator", "Deployment/kube-controller-manager",
				"A Service with dependents in another namespace is not weeded"}},
		{"the local overlay's config", []string{"--config-file=../../manifests/overlays/local/config.yaml"},
			[]string{"localhost/depwatch:dev", "No leader election"}},
		{"dependency-watchdog's weeder ConfigMap alone", []string{"--config-file=" + weeder},
			[]string{"etcd-main-client, kube-apiserver", "for 3m0s", "every namespace", "No prober"}},
		{"dependency-watchdog's weeder and prober ConfigMaps", []string{"--config-file=" + weeder, "--prober-config-file=" + prober},
			[]string{"Secret shoot-access-dependency-watchdog-probe", "every 20s", "at least 50%", "Deployment/cluster-autoscaler"}},
		{"a config that names no service: the workloads' annotations alone", []string{"--config-file=" + annotationsOnly},
			[]string{"follows the depwatch.io/depends-on annotation", "armed", "for 5m0s", "No prober"}},
		{"with a kubeconfig that points at a server", []string{"--config-file=" + weeder, "--kubeconfig=" + kubeconfig}, []string{"Weeder:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := check(t, map[string]string{}, tc.args...)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, want 0\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			if !strings.HasPrefix(stdout, "config is valid\n") {
				t.Errorf("stdout does not begin with \"config is valid\":\n%s", stdout)
			}
			if strings.Contains(stdout, "warning:") {
				t.Errorf("a shipped config has fields the coordinator ignores:\n%s", stdout)
			}
			summary := strings.Join(strings.Fields(stdout), " ")
			for _, want := range tc.says {
				if !strings.Contains(summary, want) {
					t.Errorf("the summary does not say %q:\n%s", want, stdout)
				}
			}
		})
	}
	if n := dialed.Load(); n > 0 {
		t.Errorf("the check dialled the kubeconfig's server %d time(s); it must contact no cluster", n)
	}
}

// A config the coordinator would refuse fails the check with exit 2 and every problem, of
// the flags, the environment and the files, on a line of its own naming where it is, the
// field or flag and its value; then one line with the count. Nothing is dialled.
func TestCheckConfigListsEveryProblemOnALineOfItsOwn(t *testing.T) {
	kubeconfig, dialed := noCluster(t)
	bad := writeFile(t, "bad.yaml", "watchDuration: -5m\nservicesAndDependantSelectors: {etcd-main-client: {podSelectors: [{}]}}\njobTemplate: {imagePullSecrets: [{name: Reg_Cred}]}\n")
	good := writeFile(t, "good.yaml", "servicesAndDependantSelectors: {etcd-main-client: {podSelectors: [{matchLabels: {role: apiserver}}]}}\n")
	withProber := writeFile(t, "with-prober.yaml", "servicesAndDependantSelectors: {a: {podSelectors: [{matchLabels: {x: y}}]}}\nprober: {kubeConfigSecretName: s}\n")
	badProber := writeFile(t, "dep-config.yaml", "kubeConfigSecretName: s\nprobeInterval: -10s\ndependentResourceInfos: []\n")
	undecodable := writeFile(t, "undecodable.yaml", "kubeConfigSecretName: s\nprobeInterval: often\nnodeLeaseFailureFraction: most\n")
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		lines []string // each must be on a line of its own
	}{
		{"a broken config file", []string{"--config-file=" + bad, "--kubeconfig=" + kubeconfig}, nil, []string{
			"--config-file=" + bad + ": watchDuration: -5m0s",
			"--config-file=" + bad + ": servicesAndDependantSelectors.etcd-main-client",
			"--config-file=" + bad + `: jobTemplate.imagePullSecrets[0].name: "Reg_Cred"`,
		}},
		{"flags, environment and file at once", []string{"--config-file=" + bad, "--kube-api-qps=-1"}, map[string]string{"LOG_FORMAT": "xml", "DEPWATCH_KUBE_API_BURST": "-2"}, []string{
			"--kube-api-qps=-1: must not be negative",
			"--kube-api-burst=-2: must not be negative",
			`LOG_FORMAT="xml"`,
			"--config-file=" + bad + ": watchDuration:",
		}},
		{"no config file named", nil, nil, []string{"--config-file: required"}},
		{"a config file that is not there", []string{"--config-file=/no/such/config.yaml"}, nil, []string{`--config-file="/no/such/config.yaml"`}},
		{"a flag that does not parse", []string{"--config-file=" + good, "--kube-api-qps=lots"}, nil, []string{`--kube-api-qps="lots": cannot be parsed`}},
		{"an unknown flag", []string{"--config-file=" + good, "--no-such-flag"}, nil, []string{"unknown flag --no-such-flag"}},
		{"a broken prober ConfigMap is named as the prober file", []string{"--config-file=" + good, "--prober-config-file=" + badProber}, nil, []string{
			"--prober-config-file=" + badProber + ": prober.dependentResourceInfos",
			"--prober-config-file=" + badProber + ": prober.probeInterval",
		}},
		{"a prober ConfigMap whose values do not decode names each field and value", []string{"--config-file=" + good, "--prober-config-file=" + undecodable}, nil, []string{
			"--prober-config-file=" + undecodable + `: prober.nodeLeaseFailureFraction="most": must be a number`,
			"--prober-config-file=" + undecodable + `: prober.probeInterval="often": must be a Go duration string such as "10s" or "1m30s"`,
		}},
		{"a prober section in both files", []string{"--config-file=" + withProber, "--prober-config-file=" + badProber}, nil, []string{
			"prober: given in --config-file and in --prober-config-file",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := check(t, tc.env, tc.args...)
			if code != exitBadConfig {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout of a failed check: %q", stdout)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			verdict := lines[len(lines)-1]
			problems := lines[:len(lines)-1]
			if want := "config is invalid: " + strconv.Itoa(len(problems)) + " problem(s)"; !strings.HasPrefix(verdict, want) {
				t.Errorf("last line %q, want it to begin %q", verdict, want)
			}
			if len(problems) < len(tc.lines) {
				t.Fatalf("%d problem line(s), want at least %d:\n%s", len(problems), len(tc.lines), stderr)
			}
			used := map[int]bool{}
			for _, want := range tc.lines {
				i := slices.IndexFunc(problems, func(line string) bool { return strings.Contains(line, want) })
				if i < 0 || used[i] {
					t.Errorf("no line of its own with %q:\n%s", want, stderr)
					continue
				}
				used[i] = true
			}
		})
	}
	if n := dialed.Load(); n > 0 {
		t.Errorf("the check dialled the kubeconfig's server %d time(s); it must contact no cluster", n)
	}
}

// A field the coordinator would ignore is not a problem: the check passes and names it.
func TestCheckConfigNamesTheFieldsThatWouldBeIgnored(t *testing.T) {
	cfg := writeFile(t, "config.yaml", "servicesAndDependantSelectors: {a: {podSelectors: [{matchLabels: {app: web}}], retries: 3}}\nnewGardenletField: true\n")
	code, stdout, stderr := check(t, nil, "--config-file="+cfg)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"warning: newGardenletField: unknown field, ignored", "warning: servicesAndDependantSelectors.a.retries: unknown field, ignored"} {
		if !strings.Contains(stdout, want+" ") && !strings.Contains(stdout, want+"\n") {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// --check-config is read from the command line alone, whatever else is on it; --help wins.
func TestCheckRequested(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--check-config"}, true},
		{[]string{"-check-config"}, true},
		{[]string{"--config-file=x", "--check-config=true"}, true},
		{[]string{"--kube-api-qps=lots", "--check-config"}, true},
		{[]string{"--check-config=false"}, false},
		{[]string{"--check-config=maybe"}, false},
		{[]string{"--config-file=x"}, false},
		{[]string{"check-config"}, false},
	} {
		if got := checkRequested(tc.args); got != tc.want {
			t.Errorf("checkRequested(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := coordinatorMain(context.Background(), []string{"--check-config", "--help"}, func(string) (string, bool) { return "", false }, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "--check-config") {
		t.Errorf("--check-config --help: exit %d, want 0 and the help naming --check-config:\n%s%s", code, stdout.String(), stderr.String())
	}
}
