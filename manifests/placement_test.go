package manifests

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/jobs"
)

// renderedConfig renders the chart with args and returns its config file, loaded as the
// coordinator loads it, and the coordinator's pod spec.
func renderedConfig(t *testing.T, args ...string) (*config.Config, corev1.PodSpec) {
	t.Helper()
	objs := parseObjects(t, run(t, helmBinary(t), append([]string{"template", "dw", chart, "--namespace", "ops"}, args...)...))
	data, _ := objs["ConfigMap ops/dw-depwatch-coordinator-config"]["data"].(map[string]any)
	text, _ := data["config.yaml"].(string)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("the rendered config does not load: %v\n%s", err, text)
	}
	if w := cfg.Warnings(); len(w) > 0 {
		t.Errorf("the rendered config has fields the coordinator ignores: %q", w)
	}
	var dep struct {
		Spec struct {
			Template struct {
				Spec corev1.PodSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	b, _ := yaml.Marshal(objs["Deployment ops/dw-depwatch-coordinator"])
	if err := yaml.Unmarshal(b, &dep); err != nil {
		t.Fatal(err)
	}
	return cfg, dep.Spec.Template.Spec
}

// weederPod is the pod spec of a weeder Job the coordinator would build from cfg.
func weederPod(t *testing.T, cfg *config.Config) corev1.PodSpec {
	t.Helper()
	tpl := cfg.JobTemplate
	tpl.Namespace, tpl.Image = "ops", "registry.example.com/depwatch:v1"
	spec, err := jobs.Weeder(jobs.WeederSpec{Namespace: "shoot--a", Service: "etcd-main-client", Selectors: cfg.Selectors("etcd-main-client"), WatchDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	j, err := jobs.Build(tpl, spec)
	if err != nil {
		t.Fatal(err)
	}
	return j.Spec.Template.Spec
}

// A pull secret, a toleration and the rest of the chart's placement values are said once:
// they place the coordinator and, written into the rendered config's jobTemplate, every Job it
// launches; the rest of the default config is kept.
func TestChartPlacementAndPullSecretsReachTheJobs(t *testing.T) {
	regcred := []corev1.LocalObjectReference{{Name: "regcred"}}
	toleration := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	affinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"infra"}}}}}}}}
	cfg, coord := renderedConfig(t, "--set", "gardener.enabled=true",
		"--set", "imagePullSecrets[0].name=regcred",
		"--set", "tolerations[0].key=dedicated,tolerations[0].operator=Equal,tolerations[0].value=infra,tolerations[0].effect=NoSchedule",
		"--set", "nodeSelector.pool=infra",
		"--set", "priorityClassName=infra-critical",
		"--set-json", `affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["infra"]}]}]}}}`)
	tpl := cfg.JobTemplate
	job := weederPod(t, cfg)
	for _, c := range []struct {
		field          string
		coord, job     any
		want, inConfig any
	}{
		{"imagePullSecrets", coord.ImagePullSecrets, job.ImagePullSecrets, regcred, tpl.ImagePullSecrets},
		{"tolerations", coord.Tolerations, job.Tolerations, toleration, tpl.Tolerations},
		{"nodeSelector", coord.NodeSelector, job.NodeSelector, map[string]string{"pool": "infra"}, tpl.NodeSelector},
		{"priorityClassName", coord.PriorityClassName, job.PriorityClassName, "infra-critical", tpl.PriorityClassName},
		{"affinity", coord.Affinity, job.Affinity, affinity, tpl.Affinity},
	} {
		if !reflect.DeepEqual(c.inConfig, c.want) {
			t.Errorf("%s: the rendered config's jobTemplate has %+v, want %+v", c.field, c.inConfig, c.want)
		}
		if !reflect.DeepEqual(c.coord, c.want) || !reflect.DeepEqual(c.job, c.want) {
			t.Errorf("%s: the coordinator's pod has %+v, a weeder Job's %+v, want %+v on both", c.field, c.coord, c.job, c.want)
		}
	}
	// The default config's own jobTemplate fields and sections are kept.
	if tpl.TTLSecondsAfterFinished == nil || *tpl.TTLSecondsAfterFinished != 3600 || len(tpl.Env) != 1 || cfg.Prober == nil || len(cfg.Services()) != 2 {
		t.Errorf("the default config lost fields when the placement was written into it: %+v", cfg)
	}
}

// The config's own jobTemplate wins, field by field, even when it sets a field to empty; and
// the coordinator's default anti-affinity (its replicas spread over nodes) is not the Jobs'.
func TestChartPlacementLeavesWhatTheConfigsJobTemplateSets(t *testing.T) {
	cfg, coord := renderedConfig(t,
		"--set", "imagePullSecrets[0].name=regcred",
		"--set", "tolerations[0].operator=Exists",
		"--set-json", `config={"servicesAndDependantSelectors":{"etcd-main-client":{"podSelectors":[{"matchLabels":{"app":"x"}}]}},"jobTemplate":{"imagePullSecrets":[{"name":"jobs-regcred"}],"tolerations":[]}}`)
	tpl := cfg.JobTemplate
	if len(coord.ImagePullSecrets) != 1 || coord.ImagePullSecrets[0].Name != "regcred" || len(coord.Tolerations) != 1 {
		t.Errorf("the coordinator's pod: pull secrets %v, tolerations %v", coord.ImagePullSecrets, coord.Tolerations)
	}
	if len(tpl.ImagePullSecrets) != 1 || tpl.ImagePullSecrets[0].Name != "jobs-regcred" {
		t.Errorf("jobTemplate.imagePullSecrets set in the config was replaced by the chart's: %v", tpl.ImagePullSecrets)
	}
	if len(tpl.Tolerations) != 0 {
		t.Errorf("jobTemplate.tolerations: [] in the config was replaced by the chart's: %v", tpl.Tolerations)
	}
	if coord.Affinity == nil || coord.Affinity.PodAntiAffinity == nil {
		t.Errorf("the coordinator lost its default anti-affinity: %+v", coord.Affinity)
	}
	if tpl.Affinity != nil {
		t.Errorf("the coordinator's default anti-affinity was given to the Jobs: %+v", tpl.Affinity)
	}
}

// The schema's description of `config` says what the coordinator does with it: a field with a
// wrong value is refused, an unknown field is ignored with a warning, a near miss of one of
// depwatch's own fields is refused.
func TestChartSchemaDescribesTheConfigAsTheCoordinatorReadsIt(t *testing.T) {
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	readYAML(t, chart+"/values.schema.json", &schema)
	desc := schema.Properties["config"].Description
	const services = "servicesAndDependantSelectors: {etcd-main-client: {podSelectors: [{matchLabels: {app: web}}]}}\n"
	for _, c := range []struct {
		config, says string
		loads        bool
	}{
		{services + "newGardenletField: true\n", "ignores an unknown field with a warning", true},
		{services + "armWeedr: false\n", "near miss of one of depwatch's own fields", false},
		{services + "watchDuration: soon\n", "refuses a field with a wrong value", false},
	} {
		cfg, err := config.Parse([]byte(c.config))
		switch {
		case c.loads && (err != nil || len(cfg.Warnings()) == 0):
			t.Fatalf("the coordinator: %q: %v; this test expects it loaded with a warning", c.config, err)
		case !c.loads && err == nil:
			t.Fatalf("the coordinator loads %q; this test expects it refused", c.config)
		}
		if !strings.Contains(desc, c.says) {
			t.Errorf("values.schema.json's config description does not say it %s (the coordinator does): %q", c.says, desc)
		}
	}
	if strings.Contains(desc, "refuses unknown") {
		t.Errorf("values.schema.json's config description says unknown fields are refused; the coordinator ignores them with a warning: %q", desc)
	}
}
