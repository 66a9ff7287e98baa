package jobs

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)

func apiserverSelectors() []metav1.LabelSelector {
	return []metav1.LabelSelector{
		{MatchLabels: map[string]string{"app": "kubernetes", "role": "apiserver"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "role", Operator: metav1.LabelSelectorOpIn, Values: []string{"controller-manager", "scheduler"}}}},
	}
}

func weederSpec(t *testing.T, ns, svc string, at time.Time) Spec {
	t.Helper()
	s, err := Weeder(WeederSpec{Namespace: ns, Service: svc, Selectors: apiserverSelectors(), WatchDuration: 5 * time.Minute,
		ReapCooldown: DefaultWeederReapCooldown, TriggerTime: at})
	if err != nil {
		t.Fatalf("Weeder: %v", err)
	}
	return s
}

func envMap(env []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

func TestWeederSpecCarriesTheReaperContract(t *testing.T) {
	s := weederSpec(t, "shoot--a", "etcd-main-client", t0)
	env := envMap(s.Env)
	want := map[string]string{
		"WATCH":              "true",
		"CONTAINER_STATUSES": "CrashLoopBackOff",
		"NAMESPACE":          "shoot--a",
		"RUN_DURATION":       "5m0s",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	var sels []string
	if err := json.Unmarshal([]byte(env["LABEL_SELECTORS"]), &sels); err != nil {
		t.Fatalf("LABEL_SELECTORS is not a JSON list: %q: %v", env["LABEL_SELECTORS"], err)
	}
	if len(sels) != 2 || sels[0] != "app=kubernetes,role=apiserver" || sels[1] != "role in (controller-manager,scheduler)" {
		t.Errorf("LABEL_SELECTORS = %q", sels)
	}
	if _, ok := env["GRACE_PERIOD"]; ok {
		t.Errorf("GRACE_PERIOD set without a grace period")
	}
	if s.OnActive != ReplaceActive || s.Kind != KindWeeder || strings.Join(s.Args, " ") != "reap" {
		t.Errorf("spec = %+v", s)
	}
}

func TestWeederRefusesBadInput(t *testing.T) {
	good := WeederSpec{Namespace: "ns", Service: "svc", Selectors: apiserverSelectors(), WatchDuration: time.Minute}
	cases := []struct {
		name   string
		mutate func(*WeederSpec)
		want   string
	}{
		{"no namespace", func(w *WeederSpec) { w.Namespace = "" }, "namespace and service are required"},
		{"no service", func(w *WeederSpec) { w.Service = "" }, "namespace and service are required"},
		{"no selectors", func(w *WeederSpec) { w.Selectors = nil }, "at least one pod selector"},
		{"empty selector selects all pods", func(w *WeederSpec) { w.Selectors = append(w.Selectors, metav1.LabelSelector{}) }, "selector 2 is empty"},
		{"invalid operator", func(w *WeederSpec) {
			w.Selectors = []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Like"}}}}
		}, "pod selector 0"},
		{"zero watch duration", func(w *WeederSpec) { w.WatchDuration = 0 }, "watch duration must be positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := good
			w.Selectors = append([]metav1.LabelSelector(nil), good.Selectors...)
			tc.mutate(&w)
			_, err := Weeder(w)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestWeederPassesGracePeriod(t *testing.T) {
	g := 5 * time.Second
	s, err := Weeder(WeederSpec{Namespace: "ns", Service: "svc", Selectors: apiserverSelectors(), WatchDuration: time.Minute, GracePeriod: &g})
	if err != nil {
		t.Fatal(err)
	}
	if got := envMap(s.Env)["GRACE_PERIOD"]; got != "5s" {
		t.Errorf("GRACE_PERIOD = %q", got)
	}
}

func TestJobNameIsDNSSafeStablePerTargetAndUniquePerTrigger(t *testing.T) {
	cases := []struct{ ns, svc string }{
		{"shoot--garden--a", "etcd-main-client"},
		{"default", "kube-apiserver"},
		{"n", strings.Repeat("very-long-service-name", 3)[:63]},
		{strings.Repeat("x", 63), "s"},
	}
	for _, tc := range cases {
		a := weederSpec(t, tc.ns, tc.svc, t0)
		b := weederSpec(t, tc.ns, tc.svc, t0.Add(time.Millisecond))
		for _, n := range []string{a.Name(), b.Name()} {
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				t.Errorf("%q is not a DNS label: %v", n, errs)
			}
			if len(n) > 52 {
				t.Errorf("%q is %d characters; pods need room for a suffix", n, len(n))
			}
		}
		if a.Name() == b.Name() {
			t.Errorf("two triggers share the name %q", a.Name())
		}
		pa, pb := a.Name()[:strings.LastIndex(a.Name(), "-")], b.Name()[:strings.LastIndex(b.Name(), "-")]
		if pa != pb {
			t.Errorf("prefix not stable: %q vs %q", pa, pb)
		}
	}
	if x, y := weederSpec(t, "a", "svc", t0).Name(), weederSpec(t, "b", "svc", t0).Name(); x == y {
		t.Errorf("same name for different namespaces: %q", x)
	}
}

func TestLabelValueKeepsValidAndRepairsInvalid(t *testing.T) {
	cases := []struct{ in, want string }{
		{"etcd-main-client", "etcd-main-client"},
		{"shoot--a", "shoot--a"},
	}
	for _, tc := range cases {
		if got := LabelValue(tc.in); got != tc.want {
			t.Errorf("LabelValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{strings.Repeat("a", 80), "ns/svc", "-x-", "/"} {
		got := LabelValue(in)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("LabelValue(%q) = %q, invalid: %v", in, got, errs)
		}
	}
	if LabelValue(strings.Repeat("a", 80)) == LabelValue(strings.Repeat("a", 81)) {
		t.Errorf("distinct long values collide")
	}
}

func resolved() Template {
	return Template{Namespace: "depwatch", Image: "ghcr.io/depwatch/depwatch:v1"}
}

func TestBuildWeederJobDefaults(t *testing.T) {
	s := weederSpec(t, "shoot--a", "etcd-main-client", t0)
	j, err := Build(resolved(), s)
	if err != nil {
		t.Fatal(err)
	}
	if j.Namespace != "depwatch" || j.Name != s.Name() {
		t.Errorf("job %s/%s", j.Namespace, j.Name)
	}
	wantLabels := map[string]string{
		"app.kubernetes.io/name":      "depwatch",
		"app.kubernetes.io/component": "weeder",
		"depwatch.io/kind":            "weeder",
		"depwatch.io/namespace":       "shoot--a",
		"depwatch.io/service":         "etcd-main-client",
	}
	for k, v := range wantLabels {
		if j.Labels[k] != v || j.Spec.Template.Labels[k] != v {
			t.Errorf("label %s: job %q pod %q, want %q", k, j.Labels[k], j.Spec.Template.Labels[k], v)
		}
	}
	if got := j.Annotations[AnnotationTriggerTime]; got != "2026-05-01T12:00:00.123456789Z" {
		t.Errorf("trigger time = %q", got)
	}
	if j.Annotations[AnnotationTrigger] != TriggerReady || j.Annotations[AnnotationTarget] != "shoot--a/etcd-main-client" {
		t.Errorf("annotations = %v", j.Annotations)
	}
	if *j.Spec.ActiveDeadlineSeconds != 480 { // 5m + 1m gate wait + 2m margin
		t.Errorf("activeDeadlineSeconds = %d", *j.Spec.ActiveDeadlineSeconds)
	}
	if *j.Spec.BackoffLimit != 2 || *j.Spec.TTLSecondsAfterFinished != 3600 {
		t.Errorf("backoffLimit %d ttl %d", *j.Spec.BackoffLimit, *j.Spec.TTLSecondsAfterFinished)
	}
	r := j.Spec.PodFailurePolicy.Rules[0]
	if r.Action != batchv1.PodFailurePolicyActionFailJob || r.OnExitCodes.Values[0] != 2 || *r.OnExitCodes.ContainerName != "weeder" {
		t.Errorf("podFailurePolicy = %+v", r)
	}
	p := j.Spec.Template.Spec
	if p.RestartPolicy != corev1.RestartPolicyNever || p.ServiceAccountName != "depwatch-weeder" || !*p.AutomountServiceAccountToken {
		t.Errorf("pod spec: restart %s sa %s", p.RestartPolicy, p.ServiceAccountName)
	}
	if p.HostNetwork {
		t.Errorf("hostNetwork on by default")
	}
	psc := p.SecurityContext
	if !*psc.RunAsNonRoot || *psc.RunAsUser != 65532 || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v", psc)
	}
	c := p.Containers[0]
	if c.Image != "ghcr.io/depwatch/depwatch:v1" || c.ImagePullPolicy != corev1.PullIfNotPresent || strings.Join(c.Args, " ") != "reap" || c.Name != "weeder" {
		t.Errorf("container = %s %s %v %s", c.Image, c.ImagePullPolicy, c.Args, c.Name)
	}
	sc := c.SecurityContext
	if *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container securityContext = %+v", sc)
	}
	if c.Resources.Limits.Memory().String() != "128Mi" || c.Resources.Requests.Cpu().String() != "10m" {
		t.Errorf("resources = %+v", c.Resources)
	}
}

func TestBuildAppliesTemplateOverrides(t *testing.T) {
	tpl := resolved()
	tpl.ImagePullPolicy = corev1.PullNever
	tpl.ServiceAccounts = map[Kind]string{KindWeeder: "my-weeder"}
	tpl.NodeSelector = map[string]string{"role": "infra"}
	tpl.Tolerations = []corev1.Toleration{{Key: "infra", Operator: corev1.TolerationOpExists}}
	tpl.PriorityClassName = "system-cluster-critical"
	tpl.HostNetwork = true
	tpl.Env = []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
		{Name: "LOG_FORMAT", Value: "Fluentd"},
		{Name: "NAMESPACE", Value: "hijack"}, // the kind's own variables win
	}
	tpl.TTLSecondsAfterFinished = ptr.To(int32(60))
	tpl.BackoffLimit = ptr.To(int32(0))
	tpl.DeadlineMargin = &metav1.Duration{Duration: 30 * time.Second}
	tpl.Labels = map[string]string{"team": "sre", "depwatch.io/kind": "overridden?"}
	j, err := Build(tpl, weederSpec(t, "ns", "svc", t0))
	if err != nil {
		t.Fatal(err)
	}
	p := j.Spec.Template.Spec
	c := p.Containers[0]
	env := envMap(c.Env)
	switch {
	case c.ImagePullPolicy != corev1.PullNever:
		t.Errorf("pull policy %s", c.ImagePullPolicy)
	case p.ServiceAccountName != "my-weeder":
		t.Errorf("sa %s", p.ServiceAccountName)
	case p.NodeSelector["role"] != "infra" || len(p.Tolerations) != 1 || p.PriorityClassName != "system-cluster-critical":
		t.Errorf("scheduling %+v", p)
	case !p.HostNetwork:
		t.Errorf("hostNetwork off")
	case env["KUBERNETES_SERVICE_HOST"] != "127.0.0.1" || env["LOG_FORMAT"] != "Fluentd":
		t.Errorf("extra env missing: %v", env)
	case env["NAMESPACE"] != "ns":
		t.Errorf("template env overrode NAMESPACE: %v", c.Env)
	case *j.Spec.TTLSecondsAfterFinished != 60 || *j.Spec.BackoffLimit != 0 || *j.Spec.ActiveDeadlineSeconds != 390:
		t.Errorf("ttl %d backoff %d deadline %d", *j.Spec.TTLSecondsAfterFinished, *j.Spec.BackoffLimit, *j.Spec.ActiveDeadlineSeconds)
	case j.Labels["team"] != "sre" || j.Labels["depwatch.io/kind"] != "weeder":
		t.Errorf("labels %v", j.Labels)
	}
}

func TestBuildRequiresImageAndNamespace(t *testing.T) {
	s := weederSpec(t, "ns", "svc", t0)
	if _, err := Build(Template{Namespace: "depwatch"}, s); err == nil || !strings.Contains(err.Error(), "jobTemplate.image") {
		t.Errorf("no image: %v", err)
	}
	if _, err := Build(Template{Image: "x"}, s); err == nil || !strings.Contains(err.Error(), "jobTemplate.namespace") {
		t.Errorf("no namespace: %v", err)
	}
}

func TestTemplateValidateNamesTheField(t *testing.T) {
	cases := []struct {
		name string
		tpl  Template
		want string
	}{
		{"pull policy", Template{ImagePullPolicy: "Sometimes"}, "jobTemplate.imagePullPolicy"},
		{"namespace", Template{Namespace: "Not_A_Namespace"}, "jobTemplate.namespace"},
		{"unknown kind", Template{ServiceAccounts: map[Kind]string{"chaos": "x"}}, "jobTemplate.serviceAccounts"},
		{"bad sa name", Template{ServiceAccounts: map[Kind]string{KindWeeder: "Bad Name"}}, "jobTemplate.serviceAccounts.weeder"},
		{"negative ttl", Template{TTLSecondsAfterFinished: ptr.To(int32(-1))}, "jobTemplate.ttlSecondsAfterFinished"},
		{"negative backoff", Template{BackoffLimit: ptr.To(int32(-1))}, "jobTemplate.backoffLimit"},
		{"negative margin", Template{DeadlineMargin: &metav1.Duration{Duration: -time.Second}}, "jobTemplate.deadlineMargin"},
		{"env without name", Template{Env: []corev1.EnvVar{{Value: "x"}}}, "jobTemplate.env[0].name"},
		{"backoff the policy refuses", Template{BackoffLimit: ptr.To(int32(MaxBackoffLimit + 1))}, "jobTemplate.backoffLimit"},
		{"env from a Secret", Template{Env: []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}}},
			"jobTemplate.env[0].valueFrom: TOKEN: not allowed"},
		{"bad label", Template{Labels: map[string]string{"a": "not valid!"}}, "jobTemplate.labels.a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.tpl.Validate("jobTemplate")
			if len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("errs = %v, want %q", errs, tc.want)
			}
		})
	}
	if errs := (Template{ImagePullPolicy: corev1.PullNever, ServiceAccounts: map[Kind]string{KindProbe: "p"}}).Validate("jobTemplate"); len(errs) != 0 {
		t.Errorf("valid template refused: %v", errs)
	}
}

func finished(j *batchv1.Job, typ batchv1.JobConditionType) *batchv1.Job {
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue})
	return j
}

func TestLaunchCreatesWhenNoneActive(t *testing.T) {
	client := fake.NewClientset()
	l := &Launcher{Executor: InCluster(client), Template: resolved()}
	out, err := l.Launch(context.Background(), weederSpec(t, "ns", "svc", t0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Result != ResultCreated || out.Run.Name == "" || len(out.Replaced) != 0 {
		t.Errorf("outcome = %+v", out)
	}
	list, _ := client.BatchV1().Jobs("depwatch").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Errorf("%d Jobs", len(list.Items))
	}
}

func TestLaunchReplacesTheActiveJobOfTheSameService(t *testing.T) {
	ctx := context.Background()
	tpl := resolved()
	old, _ := Build(tpl, weederSpec(t, "ns", "svc", t0))
	done, _ := Build(tpl, weederSpec(t, "ns", "svc", t0.Add(-time.Hour)))
	other, _ := Build(tpl, weederSpec(t, "ns", "other", t0))
	otherNS, _ := Build(tpl, weederSpec(t, "ns2", "svc", t0))
	client := fake.NewClientset(old, finished(done, batchv1.JobComplete), other, otherNS)
	l := &Launcher{Executor: InCluster(client), Template: tpl}

	s := weederSpec(t, "ns", "svc", t0.Add(time.Minute))
	out, err := l.Launch(ctx, s, activeFor(s, old, finished(done, batchv1.JobComplete), other, otherNS))
	if err != nil {
		t.Fatal(err)
	}
	if out.Result != ResultReplaced || len(out.Replaced) != 1 || out.Replaced[0] != old.Name {
		t.Fatalf("outcome = %+v", out)
	}
	names := map[string]bool{}
	list, _ := client.BatchV1().Jobs("depwatch").List(ctx, metav1.ListOptions{})
	for _, j := range list.Items {
		names[j.Name] = true
	}
	if names[old.Name] {
		t.Errorf("the active Job %s was not deleted", old.Name)
	}
	for _, keep := range []string{done.Name, other.Name, otherNS.Name, out.Run.Name} {
		if !names[keep] {
			t.Errorf("Job %s is gone; only the same service's active Job may be replaced", keep)
		}
	}
	var deletes int
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" {
			deletes++
		}
	}
	if deletes != 1 {
		t.Errorf("%d deletes, want 1", deletes)
	}
}

func TestLaunchKeepsTheActiveJobWhenAsked(t *testing.T) {
	ctx := context.Background()
	tpl := resolved()
	s := weederSpec(t, "ns", "svc", t0)
	old, _ := Build(tpl, s)
	client := fake.NewClientset(old)
	l := &Launcher{Executor: InCluster(client), Template: tpl}
	s2 := weederSpec(t, "ns", "svc", t0.Add(time.Minute))
	s2.OnActive = KeepActive
	out, err := l.Launch(ctx, s2, activeFor(s2, old))
	if err != nil {
		t.Fatal(err)
	}
	if out.Result != ResultKept || out.Run.Name != old.Name {
		t.Errorf("outcome = %+v", out)
	}
}

func TestLaunchIsIdempotentForTheSameTrigger(t *testing.T) {
	tpl := resolved()
	s := weederSpec(t, "ns", "svc", t0)
	// A retry of a launch whose create succeeded but whose answer was lost hits
	// AlreadyExists (same target, same trigger time): it returns that Job.
	l2 := &Launcher{Executor: InCluster(fake.NewClientset(finished(mustBuild(t, tpl, s), batchv1.JobFailed))), Template: tpl}
	out, err := l2.Launch(context.Background(), s, nil)
	if err != nil || out.Result != ResultCreated || out.Run.Name != s.Name() {
		t.Errorf("outcome %+v err %v", out, err)
	}
}

// activeFor is what a RunView holding jobs shows of s's target's active runs, as a controller
// hands them to Launch.
func activeFor(s Spec, jobs ...*batchv1.Job) []Run {
	v := NewRunView(nil, nil, func(Run) []string { return nil }, RunHandlers{})
	for _, j := range jobs {
		v.Observe(RunOf(j))
	}
	return v.ForTarget(s.Target(), Run.Active)
}

func mustBuild(t *testing.T, tpl Template, s Spec) *batchv1.Job {
	t.Helper()
	j, err := Build(tpl, s)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestFinished(t *testing.T) {
	cases := []struct {
		cond []batchv1.JobCondition
		want bool
	}{
		{nil, false},
		{[]batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue}}, false},
		{[]batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionFalse}}, false},
		{[]batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}, true},
		{[]batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}, true},
		{[]batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue}}, true},
	}
	for i, tc := range cases {
		if got := Finished(&batchv1.Job{Status: batchv1.JobStatus{Conditions: tc.cond}}); got != tc.want {
			t.Errorf("case %d: Finished = %v", i, got)
		}
	}
}

// The manual weeder examples are the Job the builder makes, by hand: same contract.
func TestManualWeederExamplesFollowTheJobContract(t *testing.T) {
	for _, p := range []string{"../examples/weeder-job.yaml", "../examples/weeder-job-local.yaml"} {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var j batchv1.Job
		if err := yaml.UnmarshalStrict(raw, &j); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		c := j.Spec.Template.Spec.Containers[0]
		env := envMap(c.Env)
		var sels []string
		if err := json.Unmarshal([]byte(env["LABEL_SELECTORS"]), &sels); err != nil || len(sels) == 0 {
			t.Errorf("%s: LABEL_SELECTORS %q: %v", p, env["LABEL_SELECTORS"], err)
		}
		if env["WATCH"] != "true" || env["CONTAINER_STATUSES"] != "CrashLoopBackOff" || env["NAMESPACE"] == "" || env["RUN_DURATION"] == "" || env["REAP_COOLDOWN"] == "" {
			t.Errorf("%s: env %v", p, env)
		}
		if j.Labels[LabelKind] != "weeder" || j.Spec.Template.Spec.ServiceAccountName != "depwatch-weeder" || c.Name != "weeder" || strings.Join(c.Args, " ") != "reap" {
			t.Errorf("%s: labels %v sa %s", p, j.Labels, j.Spec.Template.Spec.ServiceAccountName)
		}
		if !*j.Spec.Template.Spec.SecurityContext.RunAsNonRoot || *c.SecurityContext.AllowPrivilegeEscalation || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("%s: not restricted", p)
		}
	}
}

func TestArmedWeederWaitsForItsServiceAndItsDeadlineCoversTheWait(t *testing.T) {
	s, err := Weeder(WeederSpec{Namespace: "shoot--a", Service: "etcd-main-client", Selectors: apiserverSelectors(),
		WatchDuration: 5 * time.Minute, TriggerTime: t0, Armed: true, MaxWait: DefaultArmedMaxWait})
	if err != nil {
		t.Fatal(err)
	}
	j, err := Build(resolved(), s)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["START_WHEN_READY"] != "shoot--a/etcd-main-client" || env["MAX_WAIT"] != "6h0m0s" || env["RUN_DURATION"] != "5m0s" {
		t.Errorf("env = %v", env)
	}
	if got := *j.Spec.ActiveDeadlineSeconds; got != int64((6*time.Hour+5*time.Minute+DefaultDeadlineMargin)/time.Second) {
		t.Errorf("activeDeadlineSeconds = %d", got)
	}
	if j.Annotations[AnnotationTrigger] != TriggerOutage || j.Annotations[AnnotationArmedAt] != "2026-05-01T12:00:00.123456789Z" || j.Spec.Template.Annotations[AnnotationArmedAt] == "" {
		t.Errorf("annotations = %v", j.Annotations)
	}
	if !Armed(j) {
		t.Error("Armed = false")
	}
	unarmed, _ := Build(resolved(), weederSpec(t, "shoot--a", "etcd-main-client", t0))
	if Armed(unarmed) || unarmed.Annotations[AnnotationArmedAt] != "" {
		t.Errorf("an unarmed weeder looks armed: %v", unarmed.Annotations)
	}
	for _, wait := range []time.Duration{-time.Second, 0} {
		if _, err := Weeder(WeederSpec{Namespace: "n", Service: "s", Selectors: apiserverSelectors(), WatchDuration: time.Minute, Armed: true, MaxWait: wait}); err == nil {
			t.Errorf("an armed weeder's MaxWait %s was accepted", wait)
		}
	}
}

func TestWeederBoundsRestartsWithReapCooldown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cooldown time.Duration
		want     string
	}{
		{"configured", 30 * time.Second, "30s"},
		{"off", 0, "0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Weeder(WeederSpec{Namespace: "ns", Service: "svc", Selectors: apiserverSelectors(), WatchDuration: time.Minute, ReapCooldown: tc.cooldown})
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := envMap(s.Env)["REAP_COOLDOWN"]; !ok || got != tc.want {
				t.Errorf("REAP_COOLDOWN = %q (set: %v), want %q", got, ok, tc.want)
			}
		})
	}
	if _, err := Weeder(WeederSpec{Namespace: "ns", Service: "svc", Selectors: apiserverSelectors(), WatchDuration: time.Minute, ReapCooldown: -time.Second}); err == nil || !strings.Contains(err.Error(), "reap cooldown and back-off floor must not be negative") {
		t.Errorf("a negative cooldown: err = %v", err)
	}
}

// The template's env cannot loosen the bound: REAP_COOLDOWN is the weeder kind's own.
func TestWeederReapCooldownCannotBeOverriddenByTheTemplateEnv(t *testing.T) {
	tpl := resolved()
	tpl.Env = append(tpl.Env, corev1.EnvVar{Name: "REAP_COOLDOWN", Value: "0s"})
	j, err := Build(tpl, weederSpec(t, "shoot--a", "etcd-main-client", t0))
	if err != nil {
		t.Fatal(err)
	}
	var values []string
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "REAP_COOLDOWN" {
			values = append(values, e.Value)
		}
	}
	if len(values) != 1 || values[0] != DefaultWeederReapCooldown.String() {
		t.Errorf("REAP_COOLDOWN values in the Job = %v, want only the weeder's %s", values, DefaultWeederReapCooldown)
	}
}

// A weeder launched on a return is not armed, but it follows its service: if the service goes
// down again while it runs, the dependents crash because of the new outage and must not be
// reaped (the coordinator stops the Job too, but only after the fact).
func TestUnarmedWeederPausesWhileItsServiceIsDownAgain(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	j, err := Build(resolved(), weederSpec(t, "shoot--a", "etcd-main-client", t0))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["START_WHEN_READY"] != "shoot--a/etcd-main-client" || env["MAX_WAIT"] != UnarmedGateWait.String() {
		t.Errorf("env = %v, want START_WHEN_READY of its service and MAX_WAIT %s", env, UnarmedGateWait)
	}
	if Armed(j) {
		t.Error("a weeder launched on a return counts as armed")
	}
	j.Annotations[AnnotationTrigger] = TriggerCatchUp
	if Armed(j) {
		t.Error("a catch-up weeder counts as armed")
	}
	// A gated Job made by hand (no depwatch annotations, not managed by the coordinator) is armed.
	j.Annotations = nil
	delete(j.Labels, LabelManagedBy)
	if !Armed(j) {
		t.Error("a hand-made Job with START_WHEN_READY does not count as armed")
	}
}
