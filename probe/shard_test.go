package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the coordinator writes into NAMESPACES and NAMESPACE_SETTINGS, LoadOptions reads back.
func TestNamespacesAndTheirSettingsRoundTrip(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 30, 0, time.UTC)
	settings := map[string]NamespaceSettings{
		"shoot--a": {NodeMonitorGrace: 2 * time.Minute, NodeConditions: map[string][]string{"pool-a": {"Custom"}}},
		"shoot--b": {NotBefore: at},
		"shoot--c": {}, // nothing of its own: left out
	}
	env := validEnv()
	delete(env, "NAMESPACE")
	env["NAMESPACES"] = NamespacesEnv([]string{"shoot--a", "shoot--b", "shoot--c"})
	env["NAMESPACE_SETTINGS"] = NamespaceSettingsEnv(settings)
	env["PROBE_CONCURRENCY"] = "3"
	env["BACKOFF_JITTER_FACTOR"] = "0.2"
	o, err := LoadOptions(lookupFrom(env))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.Namespaces, ",") != "shoot--a,shoot--b,shoot--c" || o.Namespace != "" || o.Concurrency != 3 || o.Jitter != 0.2 {
		t.Errorf("namespaces %v (single %q), concurrency %d, jitter %g", o.Namespaces, o.Namespace, o.Concurrency, o.Jitter)
	}
	if _, ok := o.Settings["shoot--c"]; ok || len(o.Settings) != 2 {
		t.Errorf("settings %v, want only a and b", o.Settings)
	}
	a, b := o.target("shoot--a", o.Settings["shoot--a"]), o.target("shoot--b", o.Settings["shoot--b"])
	if g := a.NodeMonitorGrace; g != 2*time.Minute || a.NodeConditions["pool-a"][0] != "Custom" {
		t.Errorf("shoot--a: grace %s, conditions %v", g, a.NodeConditions)
	}
	if notBefore := o.Settings["shoot--b"].NotBefore; !notBefore.Equal(at) || b.NodeMonitorGrace != 40*time.Second {
		t.Errorf("shoot--b: notBefore %s, grace %s", notBefore, b.NodeMonitorGrace)
	}
	if NamespaceSettingsEnv(map[string]NamespaceSettings{"x": {}}) != "" {
		t.Error("settings with nothing to say must be empty")
	}
}

func TestNamespacesRefusesBadInputNamingTheVariable(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string
	}{
		{"both NAMESPACE and NAMESPACES", map[string]string{"NAMESPACES": "a,b"}, "NAMESPACES=\"a,b\": set either NAMESPACE"},
		{"an invalid name", map[string]string{"NAMESPACE": "", "NAMESPACES": "a,Not_A_Name"}, `"Not_A_Name" is not a valid namespace name`},
		{"a name twice", map[string]string{"NAMESPACES": "a,a"}, `"a" is listed twice`},
		{"settings of a namespace not probed", map[string]string{"NAMESPACE_SETTINGS": `{"other":{"nodeMonitorGrace":"1m"}}`}, `namespace "other" is not one of`},
		{"a bad grace", map[string]string{"NAMESPACE_SETTINGS": `{"` + testNS + `":{"nodeMonitorGrace":"soon"}}`}, `nodeMonitorGrace "soon"`},
		{"a grace shorter than a lease renewal", map[string]string{"NAMESPACE_SETTINGS": `{"` + testNS + `":{"nodeMonitorGrace":"1ns"}}`}, `nodeMonitorGrace "1ns": must be at least 10s`},
		{"an unknown settings field", map[string]string{"NAMESPACE_SETTINGS": `{"` + testNS + `":{"grace":"1m"}}`}, `NAMESPACE_SETTINGS=`},
		{"concurrency 0", map[string]string{"PROBE_CONCURRENCY": "0"}, `PROBE_CONCURRENCY="0": must be an integer greater than 0`},
		{"jitter 1", map[string]string{"BACKOFF_JITTER_FACTOR": "1"}, `BACKOFF_JITTER_FACTOR="1"`},
		{"a membership ConfigMap without its namespace", map[string]string{"NAMESPACE": "", "NAMESPACES": "a", "SCHEDULE": "@every 10s", "RUN_DURATION": "1m", "NAMESPACES_CONFIGMAP": "shard"}, `NAMESPACES_CONFIGMAP="shard": must be <namespace>/<name>`},
		{"a membership ConfigMap with a bad name", map[string]string{"NAMESPACE": "", "NAMESPACES": "a", "SCHEDULE": "@every 10s", "RUN_DURATION": "1m", "NAMESPACES_CONFIGMAP": "depwatch/Not_A_Name"}, `NAMESPACES_CONFIGMAP="depwatch/Not_A_Name"`},
		{"a membership ConfigMap for one namespace", map[string]string{"SCHEDULE": "@every 10s", "RUN_DURATION": "1m", "NAMESPACES_CONFIGMAP": "depwatch/shard"}, "only valid with NAMESPACES and SCHEDULE"},
		{"a membership ConfigMap for one probe", map[string]string{"NAMESPACE": "", "NAMESPACES": "a", "NAMESPACES_CONFIGMAP": "depwatch/shard"}, "only valid with NAMESPACES and SCHEDULE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := validEnv()
			for k, v := range tc.set {
				if v == "" {
					delete(env, k)
				} else {
					env[k] = v
				}
			}
			_, err := LoadOptions(lookupFrom(env))
			if err == nil {
				t.Fatal("accepted")
			}
			found := false
			for _, p := range problemsOf(t, err) {
				found = found || strings.Contains(p, tc.want)
			}
			if !found {
				t.Errorf("problems %q, want one containing %q", problemsOf(t, err), tc.want)
			}
		})
	}
}

// One run over several namespaces: a namespace whose kubeconfig Secret is missing fails on
// its own (an error line naming it, an "error" entry); the others are probed and scaled as if
// it were not there, and the run itself does not fail (the Job is not retried for one broken
// control plane). Every log line of a namespace names it.
func TestARunOverSeveralNamespacesIsolatesABrokenOne(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.unhealthy()
	const broken = "shoot--proj--broken"
	opts := testOptions(dep("Deployment", "kube-controller-manager", 0, 0))
	opts.Namespace, opts.Namespaces = "", []string{testNS, broken}
	opts.Concurrency = 2
	rep, sums, err := RunAll(context.Background(), c.deps(), opts, c.logger())
	if err != nil {
		t.Fatalf("a run over several namespaces failed for one broken namespace: %v", err)
	}
	if len(sums) != 2 || sums[0].Last != ResultScaleDown || sums[1].Last != ResultError {
		t.Fatalf("summaries %+v", sums)
	}
	if c.replicas(gvrDeployments, "kube-controller-manager") != 0 {
		t.Error("the healthy namespace's decision (scale down) was not carried out")
	}
	want := map[string]Result{testNS: ResultScaleDown, broken: ResultError}
	for ns, r := range want {
		if got := rep.Namespaces[ns].Last; got != r {
			t.Errorf("report entry of %s: %s, want %s", ns, got, r)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(c.logs.String()), "\n") {
		if !strings.Contains(line, `"namespace":`) {
			t.Errorf("a log line names no namespace: %s", line)
		}
	}
}

// With SCHEDULE, a namespace whose first probe is due only after the run ends is not probed
// by this run (the next Job of its shard probes it) and is reported as not probed.
func TestANamespaceNotDueInThisRunIsLeftToTheNext(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.healthy()
	if _, err := c.seed.CoreV1().Secrets("shoot--proj--later").Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: testSecret, Namespace: "shoot--proj--later"}, Data: map[string][]byte{KubeconfigKey: []byte(testKubeconfig)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env := validEnv()
	delete(env, "NAMESPACE")
	env["NAMESPACES"] = testNS + ",shoot--proj--later"
	env["DEPENDENT_RESOURCES"] = `[{"ref":{"kind":"Deployment","name":"kube-controller-manager","apiVersion":"apps/v1"}}]`
	env["SCHEDULE"] = "@every 1s"
	env["RUN_DURATION"] = "1500ms"
	env["NAMESPACE_SETTINGS"] = NamespaceSettingsEnv(map[string]NamespaceSettings{"shoot--proj--later": {NotBefore: time.Now().Add(time.Hour)}})
	opts, err := LoadOptions(lookupFrom(env))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, _, err := RunAll(context.Background(), c.deps(), opts, c.logger())
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the run waited for the later namespace: %s", took)
	}
	if e := rep.Namespaces["shoot--proj--later"]; e.Last != ResultNotProbed {
		t.Errorf("the namespace not yet due: %+v, want not-probed", e)
	}
	if e := rep.Namespaces[testNS]; e.Last != ResultHealthy || rep.Results["healthy"] < 2 {
		t.Errorf("the due namespace: %+v, results %v; want healthy, probed on the schedule", e, rep.Results)
	}
}
