package jobs

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/probe"
)

func probeSpec() ProbeSpec {
	return ProbeSpec{
		JobSettings: probe.JobSettings{
			Namespace: "shoot--p--a", KubeconfigSecretName: "shoot-access",
			ProbeTimeout: 10 * time.Second, NodeMonitorGrace: 40 * time.Second,
			NodeLeaseFailureFraction: 0.6, LeaseExpiryBufferFraction: 0.75,
			DependentResources: `[{"ref":{"kind":"Deployment","name":"kcm","apiVersion":"apps/v1"}}]`,
			Interval:           10 * time.Second,
		},
		ScaleChain:  90 * time.Second,
		TriggerTime: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC),
	}
}

func TestProbeSpecCarriesTheProbeContract(t *testing.T) {
	s, err := Probe(probeSpec())
	if err != nil {
		t.Fatal(err)
	}
	job, err := Build(Template{Namespace: "depwatch", Image: "img"}, s)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	want := map[string]string{"NAMESPACE": "shoot--p--a", "KUBECONFIG_SECRET_NAME": "shoot-access", "PROBE_TIMEOUT": "10s",
		"KCM_NODE_MONITOR_GRACE_DURATION": "40s", "NODE_LEASE_FAILURE_FRACTION": "0.6", "LEASE_EXPIRY_BUFFER_FRACTION": "0.75",
		"DEPENDENT_RESOURCES": probeSpec().DependentResources, "DRY_RUN": "false"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["SCHEDULE"]; ok {
		t.Error("SCHEDULE set for a one-probe Job")
	}
	if job.Labels[LabelKind] != "probe" || job.Labels[LabelNamespace] != "shoot--p--a" || job.Spec.Template.Spec.ServiceAccountName != "depwatch-probe" {
		t.Errorf("labels %v, SA %s", job.Labels, job.Spec.Template.Spec.ServiceAccountName)
	}
	if s.OnActive != KeepActive || job.Spec.Template.Spec.Containers[0].Args[0] != "probe" {
		t.Errorf("policy %s, args %v", s.OnActive, job.Spec.Template.Spec.Containers[0].Args)
	}
	// 3 x 10 s + 90 s chain + 2 m margin.
	if got := *job.Spec.ActiveDeadlineSeconds; got != 240 {
		t.Errorf("activeDeadlineSeconds = %d, want 240", got)
	}
}

func TestLongLivedProbeJobSchedulesItsProbes(t *testing.T) {
	p := probeSpec()
	p.RunDuration = 10 * time.Minute
	s, err := Probe(p)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range s.Env {
		env[e.Name] = e.Value
	}
	if env["SCHEDULE"] != "@every 10s" || env["RUN_DURATION"] != "10m0s" {
		t.Errorf("SCHEDULE=%q RUN_DURATION=%q", env["SCHEDULE"], env["RUN_DURATION"])
	}
	if s.RunDuration != 10*time.Minute+30*time.Second+90*time.Second {
		t.Errorf("run duration for the deadline = %s", s.RunDuration)
	}
}

func TestProbeRefusesBadInput(t *testing.T) {
	for name, mutate := range map[string]func(*ProbeSpec){
		"no namespace": func(p *ProbeSpec) { p.Namespace = "" },
		"no secret":    func(p *ProbeSpec) { p.KubeconfigSecretName = "" },
		"fraction":     func(p *ProbeSpec) { p.NodeLeaseFailureFraction = 0 },
		"resources":    func(p *ProbeSpec) { p.DependentResources = "" },
		"interval":     func(p *ProbeSpec) { p.RunDuration = time.Minute; p.Interval = 0 },
	} {
		p := probeSpec()
		mutate(&p)
		if _, err := Probe(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestExcessHistoryKeepsTheNewestFinishedJobs(t *testing.T) {
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	job := func(name string, typ batchv1.JobConditionType, minute int) Run {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if typ != "" {
			at := metav1.Time{Time: base.Add(time.Duration(minute) * time.Minute)}
			j.Status.Conditions = []batchv1.JobCondition{{Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: at}}
		}
		return RunOf(j)
	}
	list := []Run{
		job("ok-3", batchv1.JobComplete, 3), job("ok-1", batchv1.JobComplete, 1), job("ok-2", batchv1.JobComplete, 2),
		job("bad-1", batchv1.JobFailed, 1), job("bad-2", batchv1.JobFailed, 2), job("running", "", 0),
	}
	var got []string
	for _, j := range ExcessHistory(list, 1, 1) {
		got = append(got, j.Name)
	}
	if len(got) != 3 || got[0] != "ok-1" || got[1] != "ok-2" || got[2] != "bad-1" {
		t.Errorf("excess = %v, want [ok-1 ok-2 bad-1]", got)
	}
	if n := len(ExcessHistory(list, 5, 5)); n != 0 {
		t.Errorf("%d excess under generous limits", n)
	}
}

// The shoot's per-pool unhealthy node conditions reach the probe as NODE_CONDITIONS, and only
// when the shoot names some: without them the probe's defaults apply.
func TestProbeSpecCarriesTheShootsNodeConditions(t *testing.T) {
	for _, tt := range []struct {
		in   map[string][]string
		want string
	}{{nil, ""}, {map[string][]string{"pool-a": {"Custom"}}, `{"pool-a":["Custom"]}`}} {
		p := probeSpec()
		p.NodeConditions = tt.in
		s, err := Probe(p)
		if err != nil {
			t.Fatal(err)
		}
		got, set := "", false
		for _, e := range s.Env {
			if e.Name == "NODE_CONDITIONS" {
				got, set = e.Value, true
			}
		}
		if got != tt.want || set != (tt.want != "") {
			t.Errorf("NodeConditions %v: NODE_CONDITIONS=%q (set %v)", tt.in, got, set)
		}
	}
}

// A shard's Job: its target is the shard, every namespace it probes is a label on the Job and
// its pods (kubectl logs -l ...,probe.depwatch.io/<ns>), and its environment names them all.
func TestProbeSpecForAShard(t *testing.T) {
	p := probeSpec()
	p.Namespace, p.Shard, p.Namespaces = "", "shard-3-abcdef", []string{"shoot--p--a", "shoot--p--b"}
	p.NamespaceSettings = map[string]probe.NamespaceSettings{"shoot--p--a": {}, "shoot--p--b": {NodeMonitorGrace: 2 * time.Minute}}
	p.Concurrency, p.Jitter = 2, 0.2
	p.RunDuration = 2 * time.Minute
	s, err := Probe(p)
	if err != nil {
		t.Fatal(err)
	}
	job, err := Build(Template{Namespace: "depwatch", Image: "img"}, s)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	want := map[string]string{"NAMESPACES": "shoot--p--a,shoot--p--b", "NAMESPACE_SETTINGS": `{"shoot--p--b":{"nodeMonitorGrace":"2m0s"}}`,
		"PROBE_CONCURRENCY": "2", "BACKOFF_JITTER_FACTOR": "0.2", "SCHEDULE": "@every 10s", "RUN_DURATION": "2m0s", "NAMESPACE": ""}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	for _, labels := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
		if labels[LabelNamespace] != "shard-3-abcdef" || labels[ProbeLabel("shoot--p--a")] != "true" || labels[ProbeLabel("shoot--p--b")] != "true" || labels[LabelKind] != "probe" {
			t.Errorf("labels %v", labels)
		}
	}
	if job.Annotations[AnnotationNamespaces] != "shoot--p--a,shoot--p--b" || job.Annotations[AnnotationTarget] != "shard-3-abcdef" {
		t.Errorf("annotations %v", job.Annotations)
	}
	// Its seed clients are sized to the namespaces it may probe (probe.ShardClientLimit): at
	// client-go's default a pod probes 50 namespaces every 10 s at most.
	p.Namespaces, p.Concurrency = make([]string, 125), 175
	for i := range p.Namespaces {
		p.Namespaces[i] = fmt.Sprintf("shoot--p--%d", i)
	}
	if s, err := Probe(p); err != nil {
		t.Error(err)
	} else if job, err := Build(Template{Namespace: "depwatch", Image: "img"}, s); err != nil {
		t.Error(err)
	} else {
		env := map[string]string{}
		for _, e := range job.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["KUBE_API_QPS"] != "35" || env["KUBE_API_BURST"] != "175" {
			t.Errorf("a shard that may probe 175 namespaces every 10s: KUBE_API_QPS=%q KUBE_API_BURST=%q, want 35 and 175", env["KUBE_API_QPS"], env["KUBE_API_BURST"])
		}
	}
	p.Namespaces, p.Concurrency = []string{"shoot--p--a", "shoot--p--b"}, 2
	for _, bad := range []func(*ProbeSpec){
		func(p *ProbeSpec) { p.Namespace = "also" },
		func(p *ProbeSpec) { p.Namespaces = nil },
		func(p *ProbeSpec) { p.Jitter = 1 },
		func(p *ProbeSpec) { p.Concurrency = -1 },
	} {
		q := p
		bad(&q)
		if _, err := Probe(q); err == nil {
			t.Errorf("accepted %+v", q)
		}
	}
}
