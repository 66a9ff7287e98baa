package manifests

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator"
	"github.com/depwatch/depwatch/coordinator/egress"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/reaper"
)

// depwatchJobs are the weeder and probe Jobs the coordinator builds from the Gardener
// component's config (the base's has no service and no prober section; its jobTemplate is the
// same, TestTheBaseConfigFollowsAnnotationsEverywhereAndRunsNoProber).
func depwatchJobs(t *testing.T) map[jobs.Kind]*batchv1.Job {
	t.Helper()
	cfg, err := coordinator.Options{ConfigFile: "components/gardener/config.yaml"}.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	tpl := cfg.JobTemplate
	tpl.Namespace, tpl.Image = "depwatch", "ghcr.io/depwatch/depwatch:v0.1.0"
	svc := cfg.Services()[0]
	weeder, err := jobs.Weeder(jobs.WeederSpec{Namespace: "shoot--a--b", Service: svc, Selectors: cfg.Selectors(svc),
		WatchDuration: cfg.Watch(), TriggerTime: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Prober
	prb, err := jobs.Probe(p.ProbeSpec("shoot--a--b", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	out := map[jobs.Kind]*batchv1.Job{}
	for _, s := range []jobs.Spec{weeder, prb} {
		j, err := jobs.Build(tpl, s)
		if err != nil {
			t.Fatal(err)
		}
		out[s.Kind] = j
	}
	return out
}

// The admission policy names what the jobs package builds: the service accounts, the
// subcommands, the labels a Job's pods carry, and the membership ConfigMaps' name and labels.
// The policy is CEL the API server evaluates (test/e2e/security_admission_test.go runs it);
// this keeps its literals from drifting from the code that makes the Jobs.
func TestAdmissionPolicyNamesWhatTheJobsPackageBuilds(t *testing.T) {
	jobsPolicy := string(readFile(t, "admission/jobs.yaml"))
	built := depwatchJobs(t)
	accounts := fmt.Sprintf("in ['%s', '%s']", built[jobs.KindWeeder].Spec.Template.Spec.ServiceAccountName,
		built[jobs.KindProbe].Spec.Template.Spec.ServiceAccountName)
	if !strings.Contains(jobsPolicy, accounts) {
		t.Errorf("manifests/admission/jobs.yaml does not match the Jobs' service accounts (%s)", accounts)
	}
	for kind, j := range built {
		spec := j.Spec.Template.Spec
		c := spec.Containers[0]
		labels := j.Spec.Template.Labels
		// The policy names the weeder's subcommand; any other kind's is the kind itself.
		subcommand := fmt.Sprintf("variables.kind == '%s' ? '%s' : variables.kind", jobs.KindWeeder,
			strings.Join(built[jobs.KindWeeder].Spec.Template.Spec.Containers[0].Args, " "))
		if kind != jobs.KindWeeder && strings.Join(c.Args, " ") != string(kind) {
			t.Errorf("a %s Job runs %v; the policy expects its kind, %s", kind, c.Args, kind)
		}
		for what, want := range map[string]string{
			"its service account and kind": fmt.Sprintf("variables.serviceAccount == '%s' ? '%s'", spec.ServiceAccountName, labels[jobs.LabelComponent]),
			"its subcommand":               subcommand,
			"the name label":               fmt.Sprintf("[?'%s'].orValue('') == '%s'", jobs.LabelAppName, labels[jobs.LabelAppName]),
			"the component label":          fmt.Sprintf("[?'%s'].orValue('') == variables.kind", jobs.LabelComponent),
		} {
			if !strings.Contains(jobsPolicy, want) {
				t.Errorf("%s Job: manifests/admission/jobs.yaml does not name %s as the jobs package builds it (%s)", kind, what, want)
			}
		}
		if kind == jobs.KindWeeder {
			// The one rule of the weeder's reap run the policy requires: crash-looping pods only.
			var rule string
			for _, e := range c.Env {
				if e.Value == reaper.ReasonCrashLoopBackOff {
					rule = fmt.Sprintf("e.name == '%s').all(e, e.?value.orValue('') == '%s')", e.Name, e.Value)
				}
			}
			if rule == "" || !strings.Contains(jobsPolicy, rule) {
				t.Errorf("weeder Job: manifests/admission/jobs.yaml does not require its rule of reaping %s pods only as the jobs package writes it (%q; env %v)",
					reaper.ReasonCrashLoopBackOff, rule, c.Env)
			}
		}
		if len(c.Command) != 0 || len(c.Args) != 1 || len(spec.Volumes) != 0 || len(spec.InitContainers) != 0 || len(spec.Containers) != 1 {
			t.Errorf("%s Job: the policy admits one container running the image's entrypoint with one argument and no volume; the jobs package built %+v", kind, spec)
		}
	}

	// The run's own variables the policy admits per kind are the contracts' (reaper and probe
	// JobEnvNames), in their order; every variable a built Job carries is one of them or one
	// the parameters pin.
	flat := strings.Join(strings.Fields(jobsPolicy), " ")
	for kind, names := range map[jobs.Kind][]string{jobs.KindWeeder: reaper.JobEnvNames(), jobs.KindProbe: probe.JobEnvNames()} {
		want := fmt.Sprintf("variables.kind == '%s' ? ['%s']", kind, strings.Join(names, "', '"))
		if !strings.Contains(flat, want) {
			t.Errorf("manifests/admission/jobs.yaml does not admit exactly the %s contract's variables: want %s", kind, want)
		}
		for _, e := range built[kind].Spec.Template.Spec.Containers[0].Env {
			if !slices.Contains(names, e.Name) && !slices.Contains([]string{"LOG_FORMAT", "LOG_LEVEL", "GOMEMLIMIT"}, e.Name) &&
				!slices.ContainsFunc(depwatchConfigEnv(t), func(p corev1.EnvVar) bool { return p == e }) {
				t.Errorf("a %s Job carries %s, which the policy admits neither as its run's nor as pinned by the base's parameters", kind, e.Name)
			}
		}
	}

	cmPolicy := string(readFile(t, "admission/coordinator-configmaps.yaml"))
	m := jobs.Template{Namespace: "depwatch"}.Membership("shard", probe.Membership{Namespaces: []string{"a"}})
	prefix := strings.TrimSuffix(m.Name, "shard")
	if !strings.Contains(cmPolicy, fmt.Sprintf("startsWith('%s')", prefix)) {
		t.Errorf("manifests/admission/coordinator-configmaps.yaml does not admit the membership ConfigMaps' names (%s<shard>)", prefix)
	}
	for _, k := range []string{jobs.LabelKind, jobs.LabelManagedBy} {
		if want := fmt.Sprintf("[?'%s'].orValue('') == '%s'", k, m.Labels[k]); !strings.Contains(cmPolicy, want) {
			t.Errorf("manifests/admission/coordinator-configmaps.yaml does not check the membership label %s=%s", k, m.Labels[k])
		}
	}
}

// Each NetworkPolicy of the base selects the pods it is written for, and only those: the
// coordinator's pods, and the pods of the weeder and probe Jobs as the jobs package builds
// them and as the examples run them by hand.
func TestNetworkPoliciesSelectDepwatchsPods(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("no kubectl on PATH to render manifests/base with")
	}
	objs := parseObjects(t, run(t, "kubectl", "kustomize", "base"))
	policies := map[string]labels.Selector{}
	for key, o := range objs {
		if !strings.HasPrefix(key, "NetworkPolicy ") {
			continue
		}
		var np networkingv1.NetworkPolicy
		b, _ := yaml.Marshal(map[string]any(o))
		if err := yaml.UnmarshalStrict(b, &np); err != nil {
			t.Fatal(err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || sel.Empty() {
			t.Fatalf("NetworkPolicy %s: selector %v (%v)", np.Name, np.Spec.PodSelector, err)
		}
		policies[np.Name] = sel
	}
	pods := map[string]map[string]string{} // pod → the policy meant for it
	want := map[string]string{}
	var d struct {
		Spec struct {
			Template struct {
				Metadata struct{ Labels map[string]string } `json:"metadata"`
			} `json:"template"`
		} `json:"spec"`
	}
	b, _ := yaml.Marshal(map[string]any(objs["Deployment depwatch/depwatch-coordinator"]))
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	pods["the coordinator"], want["the coordinator"] = d.Spec.Template.Metadata.Labels, "depwatch-coordinator"
	for kind, j := range depwatchJobs(t) {
		name := fmt.Sprintf("a %s Job's pod", kind)
		pods[name], want[name] = j.Spec.Template.Labels, "depwatch-"+string(kind)
	}
	for _, f := range []string{"weeder-job.yaml", "weeder-job-local.yaml", "probe-job.yaml"} {
		var j batchv1.Job
		if err := yaml.Unmarshal(readFile(t, filepath.Join("..", "examples", f)), &j); err != nil {
			t.Fatal(err)
		}
		name := "examples/" + f
		pods[name], want[name] = j.Spec.Template.Labels, "depwatch-"+j.Spec.Template.Labels[jobs.LabelComponent]
	}
	for _, pod := range slices.Sorted(maps.Keys(pods)) {
		var got []string
		for _, np := range slices.Sorted(maps.Keys(policies)) {
			if policies[np].Matches(labels.Set(pods[pod])) {
				got = append(got, np)
			}
		}
		if !slices.Equal(got, []string{want[pod]}) {
			t.Errorf("%s (labels %v) is selected by %v; want exactly %s", pod, pods[pod], got, want[pod])
		}
	}
}

// The chart ships manifests/admission as files/admission: a chart cannot read files outside
// its folder.
func TestChartShipsTheAdmissionPolicies(t *testing.T) {
	files, _ := filepath.Glob("admission/*.yaml")
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		copied := filepath.Join(chart, "files", f)
		got, err := os.ReadFile(copied)
		if err != nil || !bytes.Equal(got, readFile(t, f)) {
			t.Errorf("manifests/%s differs from manifests/%s, its source: cp manifests/%[2]s manifests/%[1]s", copied, f)
		}
	}
}

// The chart's policies follow its release, its image and its config: named after the release,
// bound to its namespace, admitting the image its coordinator starts Jobs with (the config's
// jobTemplate.image when set) and the host network where its config's Jobs use it; off, they
// are not rendered. Its NetworkPolicies take their rules from the values.
func TestChartPoliciesFollowTheRelease(t *testing.T) {
	helm := helmBinary(t)
	render := func(args ...string) map[string]object {
		t.Helper()
		return parseObjects(t, run(t, helm, append([]string{"template", "dw", chart, "--namespace", "ops"}, args...)...))
	}
	field := func(o object, path ...string) any {
		var v any = map[string]any(o)
		for _, p := range path {
			m, _ := v.(map[string]any)
			v = m[p]
		}
		return v
	}
	param := func(objs map[string]object) corev1.PodTemplate {
		t.Helper()
		var pt corev1.PodTemplate
		b, _ := yaml.Marshal(map[string]any(objs["PodTemplate ops/dw-depwatch-jobs"]))
		if err := yaml.UnmarshalStrict(b, &pt); err != nil || len(pt.Template.Spec.Containers) != 1 {
			t.Fatalf("no PodTemplate ops/dw-depwatch-jobs with one container among %v (%v)", slices.Sorted(maps.Keys(objs)), err)
		}
		return pt
	}

	objs := render("--set", "image.tag=v9.9.9")
	for _, name := range []string{"dw-depwatch-jobs", "dw-depwatch-coordinator-configmaps"} {
		policy, binding := objs["ValidatingAdmissionPolicy <nil>/"+name], objs["ValidatingAdmissionPolicyBinding <nil>/"+name]
		if policy == nil || binding == nil {
			t.Fatalf("no ValidatingAdmissionPolicy and binding %s among %v", name, slices.Sorted(maps.Keys(objs)))
		}
		if got := field(binding, "spec", "policyName"); got != name {
			t.Errorf("binding %s binds policy %v", name, got)
		}
		if got := field(binding, "spec", "matchResources", "namespaceSelector", "matchLabels"); !reflectEqual(got, map[string]any{"kubernetes.io/metadata.name": "ops"}) {
			t.Errorf("binding %s selects %v; want the release's namespace ops", name, got)
		}
	}
	if got := field(objs["ValidatingAdmissionPolicyBinding <nil>/dw-depwatch-jobs"], "spec", "paramRef", "name"); got != "dw-depwatch-jobs" {
		t.Errorf("binding dw-depwatch-jobs takes its parameters from %v; want the PodTemplate dw-depwatch-jobs", got)
	}
	pt := param(objs)
	if got := pt.Template.Spec.Containers[0].Image; got != "ghcr.io/depwatch/depwatch:v9.9.9" {
		t.Errorf("image.tag=v9.9.9: the policy admits image %s", got)
	}
	if pt.Template.Spec.HostNetwork {
		t.Errorf("the default config's Jobs are not on the host network, but the policy admits it")
	}

	// A digest pins the image the coordinator runs, and so its Jobs and what the policy admits.
	digest := "sha256:" + strings.Repeat("ab", 32)
	objs = render("--set", "image.tag=v9.9.9", "--set", "image.digest="+digest)
	want := "ghcr.io/depwatch/depwatch:v9.9.9@" + digest
	if got := param(objs).Template.Spec.Containers[0].Image; got != want {
		t.Errorf("image.digest: the policy admits image %s, want %s", got, want)
	}
	if got := field(objs["Deployment ops/dw-depwatch-coordinator"], "spec", "template", "spec", "containers"); !strings.Contains(fmt.Sprint(got), want) {
		t.Errorf("image.digest: the coordinator does not run %s: %v", want, got)
	}

	pt = param(render("--set-json", `config={"servicesAndDependantSelectors":{"db":{"podSelectors":[{"matchLabels":{"app":"web"}}]}},"jobTemplate":{"image":"registry.example.com/depwatch:v1","hostNetwork":true}}`))
	if got := pt.Template.Spec.Containers[0].Image; got != "registry.example.com/depwatch:v1" || !pt.Template.Spec.HostNetwork {
		t.Errorf("config jobTemplate.image and hostNetwork: the policy admits image %s, host network %v", got, pt.Template.Spec.HostNetwork)
	}

	objs = render("--set", "admissionPolicy.enabled=false", "--set", "networkPolicy.enabled=false")
	for k := range objs {
		if strings.HasPrefix(k, "ValidatingAdmissionPolicy") || strings.HasPrefix(k, "PodTemplate ") || strings.HasPrefix(k, "NetworkPolicy ") {
			t.Errorf("admissionPolicy.enabled=false, networkPolicy.enabled=false: %s is still rendered", k)
		}
	}
	// The chart states the releases the suite passed on (Chart.yaml kubeVersion, >=1.N.0-0): an
	// older cluster is refused before any template, the admission policy's own 1.30 check
	// included; the oldest it states is installed with the admission policy on.
	var meta chartMetadata
	readYAML(t, chart+"/Chart.yaml", &meta)
	var minor int
	if _, err := fmt.Sscanf(meta.KubeVersion, ">=1.%d.0-0", &minor); err != nil {
		t.Fatalf("Chart.yaml kubeVersion %q is not >=1.N.0-0: %v", meta.KubeVersion, err)
	}
	older, oldest := fmt.Sprintf("1.%d.0", minor-1), fmt.Sprintf("1.%d.0", minor)
	if _, err := runErr(helm, "template", "dw", chart, "--kube-version", older, "--set", "admissionPolicy.enabled=false"); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("Kubernetes %s: want a refusal naming the chart's kubeVersion, got %v", older, err)
	}
	if _, err := runErr(helm, "template", "dw", chart, "--kube-version", oldest); err != nil {
		t.Errorf("Kubernetes %s with the admission policy on: %v", oldest, err)
	}

	objs = render("--set-json", `networkPolicy.apiServer=[{"to":[{"ipBlock":{"cidr":"10.0.0.10/32"}}],"ports":[{"protocol":"TCP","port":6443}]}]`)
	np := networkPolicy(t, objs["NetworkPolicy ops/dw-depwatch-coordinator"])
	narrowed := false
	for _, r := range np.Spec.Egress {
		for _, to := range r.To {
			narrowed = narrowed || (to.IPBlock != nil && to.IPBlock.CIDR == "10.0.0.10/32")
		}
		for _, p := range r.Ports {
			if len(r.To) == 0 && p.Port.IntValue() != 53 {
				t.Errorf("networkPolicy.apiServer narrowed: the coordinator's NetworkPolicy still allows port %s at any address", p.Port.String())
			}
		}
	}
	if !narrowed {
		t.Error("networkPolicy.apiServer narrowed: the coordinator's NetworkPolicy does not reach 10.0.0.10/32")
	}
}

// networkPolicy decodes a rendered NetworkPolicy strictly.
func networkPolicy(t *testing.T, o object) networkingv1.NetworkPolicy {
	t.Helper()
	var np networkingv1.NetworkPolicy
	b, _ := yaml.Marshal(map[string]any(o))
	if err := yaml.UnmarshalStrict(b, &np); err != nil {
		t.Fatal(err)
	}
	return np
}

// The Jobs reach no address on the API server's ports but the API server's own, in the base and
// the chart: their policies allow nothing at any address but DNS, and the coordinator is told
// to keep the one that allows the API server (coordinator/egress), with the right to write
// that one NetworkPolicy by name and no other.
func TestJobsReachTheAPIServerOnlyThroughTheKeptEgressPolicy(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("no kubectl on PATH to render manifests/base with")
	}
	for _, install := range []struct {
		name, coordinator, role string
		objs                    map[string]object
		jobPolicies             []string
	}{
		{"the kustomize base", "Deployment depwatch/depwatch-coordinator", "Role depwatch/depwatch-coordinator",
			parseObjects(t, run(t, "kubectl", "kustomize", "base")),
			[]string{"NetworkPolicy depwatch/depwatch-weeder", "NetworkPolicy depwatch/depwatch-probe"}},
		{"the local overlay", "Deployment depwatch/depwatch-coordinator", "Role depwatch/depwatch-coordinator",
			parseObjects(t, run(t, "kubectl", "kustomize", "overlays/local")),
			[]string{"NetworkPolicy depwatch/depwatch-weeder", "NetworkPolicy depwatch/depwatch-probe"}},
		{"the chart", "Deployment ops/dw-depwatch-coordinator", "Role ops/dw-depwatch-coordinator",
			parseObjects(t, run(t, helmBinary(t), "template", "dw", chart, "--namespace", "ops")),
			[]string{"NetworkPolicy ops/dw-depwatch-weeder", "NetworkPolicy ops/dw-depwatch-probe"}},
	} {
		t.Run(install.name, func(t *testing.T) {
			for _, key := range install.jobPolicies {
				o, ok := install.objs[key]
				if !ok {
					t.Fatalf("%s is not rendered", key)
				}
				for _, r := range networkPolicy(t, o).Spec.Egress {
					for _, p := range r.Ports {
						if len(r.To) == 0 && p.Port.IntValue() != 53 {
							t.Errorf("%s allows port %s at any address", key, p.Port.String())
						}
					}
				}
			}
			b, _ := yaml.Marshal(map[string]any(install.objs[install.coordinator]))
			if !strings.Contains(string(b), "--job-egress-policy") {
				t.Errorf("%s does not pass --job-egress-policy: nothing would let its Jobs reach the API server", install.coordinator)
			}
			var role rbacv1.Role
			b, _ = yaml.Marshal(map[string]any(install.objs[install.role]))
			if err := yaml.UnmarshalStrict(b, &role); err != nil {
				t.Fatal(err)
			}
			var granted []string
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "networkpolicies") {
					granted = append(granted, fmt.Sprintf("%v %v", r.ResourceNames, r.Verbs))
				}
			}
			if want := fmt.Sprintf("[%s] [create patch]", egress.PolicyName); !slices.Equal(granted, []string{want}) {
				t.Errorf("%s grants on networkpolicies %q, want exactly %q", install.role, granted, want)
			}
		})
	}
}

// depwatchConfigEnv is what the base's config adds to every Job's environment.
func depwatchConfigEnv(t *testing.T) []corev1.EnvVar {
	t.Helper()
	cfg, err := coordinator.Options{ConfigFile: "base/config.yaml"}.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg.JobTemplate.Env
}

func reflectEqual(a, b any) bool {
	x, _ := yaml.Marshal(a)
	y, _ := yaml.Marshal(b)
	return bytes.Equal(x, y)
}

// The image the admission policy admits is the coordinator's, with which it starts its Jobs:
// kustomize's `images:` reaches the policy's PodTemplate as it reaches the Deployment, in the
// base and in the local overlay (which also lets the Jobs use the host network, as its config
// has them).
func TestAdmissionParametersFollowTheCoordinatorsImage(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("no kubectl on PATH to render the manifests with")
	}
	for dir, hostNetwork := range map[string]bool{".": false, "overlays/local": true} {
		objs := parseObjects(t, run(t, "kubectl", "kustomize", dir))
		var d struct {
			Spec struct{ Template corev1.PodTemplateSpec } `json:"spec"`
		}
		b, _ := yaml.Marshal(map[string]any(objs["Deployment depwatch/depwatch-coordinator"]))
		if err := yaml.Unmarshal(b, &d); err != nil || len(d.Spec.Template.Spec.Containers) == 0 {
			t.Fatalf("%s: no coordinator Deployment (%v)", dir, err)
		}
		var pt corev1.PodTemplate
		b, _ = yaml.Marshal(map[string]any(objs["PodTemplate depwatch/depwatch-jobs"]))
		if err := yaml.UnmarshalStrict(b, &pt); err != nil || len(pt.Template.Spec.Containers) != 1 {
			t.Fatalf("%s: no PodTemplate depwatch/depwatch-jobs with one container (%v)", dir, err)
		}
		if got, want := pt.Template.Spec.Containers[0].Image, d.Spec.Template.Spec.Containers[0].Image; got != want {
			t.Errorf("kubectl kustomize %s: the admission policy admits image %s, the coordinator runs %s", dir, got, want)
		}
		if pt.Template.Spec.HostNetwork != hostNetwork {
			t.Errorf("kubectl kustomize %s: the admission policy allows the host network: %v, want %v", dir, pt.Template.Spec.HostNetwork, hostNetwork)
		}
		// The environment the config adds to every Job is what the parameters pin.
		configFile := map[string]string{".": "base/config.yaml", "overlays/local": "overlays/local/config.yaml"}[dir]
		cfg, err := coordinator.Options{ConfigFile: configFile}.LoadConfig()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := pt.Template.Spec.Containers[0].Env, cfg.JobTemplate.Env; !reflectEqual(got, want) {
			t.Errorf("kubectl kustomize %s: the admission policy pins the Jobs' added environment %v; %s's jobTemplate.env is %v", dir, got, configFile, want)
		}
	}
	// The local config names its Jobs' image and host network itself.
	cfg, err := coordinator.Options{ConfigFile: "overlays/local/config.yaml"}.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	objs := parseObjects(t, run(t, "kubectl", "kustomize", "overlays/local"))
	var pt corev1.PodTemplate
	b, _ := yaml.Marshal(map[string]any(objs["PodTemplate depwatch/depwatch-jobs"]))
	if err := yaml.Unmarshal(b, &pt); err != nil || len(pt.Template.Spec.Containers) != 1 {
		t.Fatalf("overlays/local: no PodTemplate depwatch/depwatch-jobs with one container (%v)", err)
	}
	if tpl := cfg.JobTemplate; tpl.Image != pt.Template.Spec.Containers[0].Image || tpl.HostNetwork != pt.Template.Spec.HostNetwork {
		t.Errorf("the local config's Jobs run %s (host network %v); the admission policy admits %s (host network %v)",
			tpl.Image, tpl.HostNetwork, pt.Template.Spec.Containers[0].Image, pt.Template.Spec.HostNetwork)
	}
}

// The chart's admission parameters pin the environment its config adds to every Job, so the
// policy admits the Jobs the coordinator builds from that config and no other variables:
// with the default values, and with a config whose jobTemplate.env says more.
func TestChartAdmissionParametersPinTheJobsAddedEnvironment(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`config: |
  jobTemplate:
    env:
      - {name: KUBERNETES_SERVICE_HOST, value: 10.0.0.1}
      - {name: LOG_LEVEL, value: debug}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"default values":         nil,
		"a config with more env": {"-f", values},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, _ := renderedConfig(t, args...)
			objs := parseObjects(t, run(t, helmBinary(t), append([]string{"template", "dw", chart, "--namespace", "ops"}, args...)...))
			var pt corev1.PodTemplate
			b, _ := yaml.Marshal(map[string]any(objs["PodTemplate ops/dw-depwatch-jobs"]))
			if err := yaml.UnmarshalStrict(b, &pt); err != nil || len(pt.Template.Spec.Containers) != 1 {
				t.Fatalf("no PodTemplate ops/dw-depwatch-jobs with one container (%v)", err)
			}
			if got, want := pt.Template.Spec.Containers[0].Env, cfg.JobTemplate.Env; !reflectEqual(got, want) || len(want) == 0 {
				t.Errorf("the parameters pin %v; the config's jobTemplate.env is %v", got, want)
			}
		})
	}
}

// The policy on a weeder's own actions (admission/weeder-deletes.yaml) bounds the accounts
// that carry weeder runs out: the weeder Jobs' service account as the jobs package builds
// them, and the coordinator's (the in-process executor); it reads the crash-loop reason the
// weeder's rule names. The weeder Jobs delete, never evict (EVICT=false), since the policy
// refuses every eviction; the chart binds the policy to every namespace and names its own
// release namespace's accounts.
func TestWeederDeletesPolicyBoundsTheAccountsThatRunWeeders(t *testing.T) {
	policy := string(readFile(t, "admission/weeder-deletes.yaml"))
	weeder := depwatchJobs(t)[jobs.KindWeeder]
	accounts := fmt.Sprintf("['system:serviceaccount:depwatch:%s',\n        'system:serviceaccount:depwatch:depwatch-coordinator']",
		weeder.Spec.Template.Spec.ServiceAccountName)
	if !strings.Contains(policy, accounts) {
		t.Errorf("admission/weeder-deletes.yaml does not match the accounts that run weeders: want %s", accounts)
	}
	if want := "== '" + reaper.ReasonCrashLoopBackOff + "'"; strings.Count(policy, want) != 2 {
		t.Errorf("admission/weeder-deletes.yaml does not read the waiting reason %s of containers and init containers", reaper.ReasonCrashLoopBackOff)
	}
	evict := ""
	for _, e := range weeder.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "EVICT" {
			evict = e.Value
		}
	}
	if evict != "false" {
		t.Errorf("a weeder Job carries EVICT=%q; want false: the policy refuses every eviction", evict)
	}

	objs := parseObjects(t, run(t, helmBinary(t), "template", "dw", chart, "--namespace", "ops"))
	p, b := objs["ValidatingAdmissionPolicy <nil>/dw-depwatch-weeder-deletes"], objs["ValidatingAdmissionPolicyBinding <nil>/dw-depwatch-weeder-deletes"]
	if p == nil || b == nil {
		t.Fatalf("the chart renders no policy and binding dw-depwatch-weeder-deletes")
	}
	rendered, _ := yaml.Marshal(map[string]any(p))
	if !strings.Contains(string(rendered), "system:serviceaccount:ops:depwatch-weeder") || strings.Contains(string(rendered), "system:serviceaccount:depwatch:") {
		t.Errorf("the chart's weeder-deletes policy does not name the release namespace's accounts:\n%s", rendered)
	}
	if spec, _ := b["spec"].(map[string]any); spec["matchResources"] != nil || spec["policyName"] != "dw-depwatch-weeder-deletes" {
		t.Errorf("the chart's weeder-deletes binding %v: want policy dw-depwatch-weeder-deletes in every namespace", spec)
	}
}

// The optional Gardener manifest bounds gardenlet's dependency-watchdog weeder and prober
// (running depwatch's image) exactly as depwatch's own policies bound depwatch's weeders and
// probes: the same rules, only the names and the account differ. The prober gets
// depwatch-probe-scales only (its targets policy reads parameters gardenlet's account cannot
// write).
func TestGardenerPoliciesAreDepwatchsWithGardenletsAccounts(t *testing.T) {
	docs := func(b []byte) []string {
		s := string(b)
		return strings.Split(s[strings.Index(s, "apiVersion:"):], "\n---\n")
	}
	strip := func(s string) string { // comments may differ
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				out = append(out, l)
			}
		}
		return strings.TrimSpace(strings.Join(out, "\n"))
	}
	gardener := docs(readFile(t, "gardener/dependency-watchdog-admission.yaml"))
	if len(gardener) != 4 {
		t.Fatalf("manifests/gardener/dependency-watchdog-admission.yaml has %d documents; want the weeder's and the prober's policy and binding", len(gardener))
	}
	for _, c := range []struct {
		own      string
		gardener []string
		replace  [][2]string
	}{
		{"admission/weeder-deletes.yaml", gardener[0:2], [][2]string{
			{"request.userInfo.username in ['system:serviceaccount:depwatch:depwatch-weeder',\n        'system:serviceaccount:depwatch:depwatch-coordinator']",
				"request.userInfo.username in ['system:serviceaccount:garden:dependency-watchdog-weeder']"},
			{"depwatch-weeder-deletes", "dependency-watchdog-weeder-deletes"},
		}},
		{"admission/probe-scales.yaml", gardener[2:4], [][2]string{
			{"request.userInfo.username in ['system:serviceaccount:depwatch:depwatch-probe',\n        'system:serviceaccount:depwatch:depwatch-coordinator']",
				"request.userInfo.username in ['system:serviceaccount:garden:dependency-watchdog-prober']"},
			{"depwatch-probe-scales", "dependency-watchdog-probe-scales"},
		}},
	} {
		own := strings.Join(docs(readFile(t, c.own))[:2], "\n---\n")
		for _, r := range c.replace {
			if !strings.Contains(own, r[0]) {
				t.Fatalf("%s no longer has %q: update this test and the Gardener manifest", c.own, r[0])
			}
			own = strings.ReplaceAll(own, r[0], r[1])
		}
		if got := strings.Join(c.gardener, "\n---\n"); strip(own) != strip(got) {
			t.Errorf("manifests/gardener/dependency-watchdog-admission.yaml is not %s with gardenlet's account:\n%s", c.own, got)
		}
	}
}
