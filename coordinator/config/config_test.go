package config

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/jobs"
)

// dwdWeederConfig is dependency-watchdog's weeder ConfigMap data as Gardener ships it.
var dwdWeederConfig = func() string {
	b, err := os.ReadFile("testdata/gardener-weeder-config.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

func TestConfigAcceptsDependencyWatchdogWeederConfigAsIs(t *testing.T) {
	cfg, err := Parse([]byte(dwdWeederConfig))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if cfg.Watch() != 2*time.Minute {
		t.Errorf("watchDuration = %s", cfg.Watch())
	}
	if got := strings.Join(cfg.Services(), ","); got != "etcd-main-client,kube-apiserver" {
		t.Errorf("services = %s", got)
	}
	sels, err := jobs.SelectorStrings(cfg.Selectors("etcd-main-client"))
	if err != nil || len(sels) != 1 || sels[0] != "gardener.cloud/role in (controlplane),role in (apiserver)" {
		t.Errorf("selectors = %q, %v", sels, err)
	}
	if cfg.UseEndpoints || cfg.Namespaces != nil || !cfg.NamespaceSelector().Empty() {
		t.Errorf("depwatch sections should default off: %+v", cfg)
	}
}

func TestConfigDefaultsWatchDurationToFiveMinutes(t *testing.T) {
	cfg, err := Parse([]byte("servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Watch() != 5*time.Minute {
		t.Errorf("watchDuration = %s", cfg.Watch())
	}
}

func TestConfigReadsDepwatchSections(t *testing.T) {
	cfg, err := Parse([]byte(`
servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}
namespaces:
  selector: {matchLabels: {gardener.cloud/role: shoot}}
  names: [shoot--a]
useEndpoints: true
gracePeriod: 10s
jobTemplate:
  namespace: ops
  image: localhost/depwatch:dev
  imagePullPolicy: Never
  serviceAccounts: {weeder: w}
  hostNetwork: true
  env: [{name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}]
  ttlSecondsAfterFinished: 600
  resources: {limits: {memory: 64Mi}}
  tolerations: [{operator: Exists}]
  nodeSelector: {a: b}
  priorityClassName: high
  imagePullSecrets: [{name: regcred}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [infra]}]}]
prober:
  kubeConfigSecretName: shoot-access
  kcmNodeMonitorGraceDuration: 40s
  dependentResourceInfos:
    - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
      scaleUp: {level: 1}
      scaleDown: {level: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	tpl := cfg.JobTemplate
	switch {
	case !cfg.UseEndpoints || cfg.GracePeriod.Duration != 10*time.Second:
		t.Errorf("useEndpoints/gracePeriod: %+v", cfg)
	case cfg.Namespaces.Names[0] != "shoot--a" || cfg.NamespaceSelector().String() != "gardener.cloud/role=shoot":
		t.Errorf("namespaces: %+v", cfg.Namespaces)
	case tpl.Namespace != "ops" || tpl.Image != "localhost/depwatch:dev" || tpl.ImagePullPolicy != corev1.PullNever:
		t.Errorf("jobTemplate: %+v", tpl)
	case tpl.ServiceAccountFor(jobs.KindWeeder) != "w" || !tpl.HostNetwork || *tpl.TTLSecondsAfterFinished != 600:
		t.Errorf("jobTemplate: %+v", tpl)
	case tpl.Resources.Limits.Memory().String() != "64Mi" || len(tpl.Tolerations) != 1 || tpl.NodeSelector["a"] != "b" || tpl.PriorityClassName != "high":
		t.Errorf("jobTemplate: %+v", tpl)
	case len(tpl.Env) != 1 || tpl.Env[0].Value != "127.0.0.1":
		t.Errorf("env: %+v", tpl.Env)
	case len(tpl.ImagePullSecrets) != 1 || tpl.ImagePullSecrets[0].Name != "regcred":
		t.Errorf("imagePullSecrets: %+v", tpl.ImagePullSecrets)
	case tpl.Affinity == nil || tpl.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "infra":
		t.Errorf("affinity: %+v", tpl.Affinity)
	case len(cfg.Warnings()) > 0:
		t.Errorf("warnings: %q", cfg.Warnings())
	case cfg.Prober == nil || cfg.Prober.KubeConfigSecretName != "shoot-access" || len(cfg.Prober.Resources()) != 1:
		t.Errorf("prober section dropped: %+v", cfg.Prober)
	}
}

func TestConfigArmDefaults(t *testing.T) {
	cfg, err := Parse([]byte("servicesAndDependantSelectors: {a: {podSelectors: [{matchLabels: {app: x}}]}, b: {arm: false, podSelectors: [{matchLabels: {app: z}}]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Arm("a") || cfg.Arm("b") || cfg.MaxWait() != 6*time.Hour {
		t.Errorf("arm a %v b %v maxWait %s; want true, false, 6h", cfg.Arm("a"), cfg.Arm("b"), cfg.MaxWait())
	}
}

func TestConfigRefusesInvalidFieldsNamingThem(t *testing.T) {
	svc := "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}\n"
	cases := []struct {
		name, yaml, want string
	}{
		{"not yaml", "a: [", "not valid YAML"},
		{"near miss of a depwatch field", svc + "armWeedr: false", "armWeedr: unknown field; did you mean armWeeder?"},
		{"unparsable watchDuration", svc + "watchDuration: 5 minutes", `watchDuration="5 minutes": must be a Go duration`},
		{"negative watchDuration", svc + "watchDuration: -1m", "watchDuration: -1m0s: must not be negative"},
		{"negative gracePeriod", svc + "gracePeriod: -1s", "gracePeriod: -1s"},
		{"no services and the annotation off", "watchDuration: 1m\ndependsOnAnnotation: false", "servicesAndDependantSelectors: required"},
		{"no services, annotations with legacy Endpoints", "watchDuration: 1m\nuseEndpoints: true", "servicesAndDependantSelectors: required"},
		{"services not a map", "servicesAndDependantSelectors: [a]", `servicesAndDependantSelectors=["a"]: must be an object`},
		{"misspelt podSelectors are ignored, so none are left", "servicesAndDependantSelectors: {svc: {podSelector: []}}", "servicesAndDependantSelectors.svc.podSelectors: required"},
		{"near miss in a pod selector", "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabel: {app: x}}]}}", "servicesAndDependantSelectors.svc.podSelectors[0].matchLabel: unknown field; did you mean matchLabels?"},
		{"no pod selectors", "servicesAndDependantSelectors: {svc: {podSelectors: []}}", "servicesAndDependantSelectors.svc.podSelectors: required"},
		{"empty pod selector selects everything", "servicesAndDependantSelectors: {svc: {podSelectors: [{}]}}", "servicesAndDependantSelectors.svc.podSelectors[0]: empty selector"},
		{"null pod selector", "servicesAndDependantSelectors: {svc: {podSelectors: [null]}}", "podSelectors[0]: must not be null"},
		{"bad operator", "servicesAndDependantSelectors: {svc: {podSelectors: [{matchExpressions: [{key: a, operator: Like}]}]}}", "servicesAndDependantSelectors.svc.podSelectors[0]: "},
		{"bad service name", "servicesAndDependantSelectors: {Bad_Name: {podSelectors: [{matchLabels: {a: b}}]}}", "servicesAndDependantSelectors.Bad_Name: \"Bad_Name\" is not a service name"},
		{"bad namespace selector", svc + "namespaces: {selector: {matchExpressions: [{key: a, operator: In}]}}", "namespaces.selector: "},
		{"bad namespace name", svc + "namespaces: {names: [UPPER]}", "namespaces.names[0]: \"UPPER\""},
		{"useEndpoints not a bool", svc + "useEndpoints: sometimes", `useEndpoints="sometimes": must be true or false`},
		{"armWeeder not a bool", svc + "armWeeder: sometimes", `armWeeder="sometimes": must be true or false`},
		{"negative armedMaxWait", svc + "armedMaxWait: -1h", "armedMaxWait: -1h0m0s: must not be negative"},
		{"unparsable armedMaxWait", svc + "armedMaxWait: a while", `armedMaxWait="a while": must be a Go duration`},
		{"service arm not a bool", "servicesAndDependantSelectors: {svc: {arm: maybe, podSelectors: [{matchLabels: {app: x}}]}}", `servicesAndDependantSelectors.svc.arm="maybe": must be true or false`},
		{"bad pull policy", svc + "jobTemplate: {imagePullPolicy: Sometimes}", "jobTemplate.imagePullPolicy"},
		{"negative ttl", svc + "jobTemplate: {ttlSecondsAfterFinished: -5}", "jobTemplate.ttlSecondsAfterFinished: -5"},
		{"ttl not a number", svc + "jobTemplate: {ttlSecondsAfterFinished: soon}", `jobTemplate.ttlSecondsAfterFinished="soon": must be an integer`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// An unknown field is ignored with a warning naming its path, at any depth (gardenlet may add
// fields); the config loads and the field sets nothing.
func TestConfigWarnsOfUnknownFieldsNamingTheirPathAndLoads(t *testing.T) {
	svc := "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"top-level field", svc + "watchDuraton: 1m", "watchDuraton: unknown field, ignored (did you mean watchDuration?"},
		{"service field", "servicesAndDependantSelectors: {svc: {future: 1, podSelectors: [{matchLabels: {app: x}}]}}", "servicesAndDependantSelectors.svc.future: unknown field, ignored"},
		{"namespaces field", svc + "namespaces: {all: true}", "namespaces.all: unknown field, ignored"},
		{"jobTemplate field", svc + "jobTemplate: {imagePolicy: Never}", "jobTemplate.imagePolicy: unknown field, ignored"},
		{"deep in jobTemplate", svc + "jobTemplate: {tolerations: [{key: a, effect: NoSchedule, future: x}]}", "jobTemplate.tolerations[0].future: unknown field, ignored"},
		{"a line break stays on one line", svc + "\"watch\\nDuration\": 1m", `"watch\nDuration": unknown field, ignored`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if w := cfg.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], tc.want) || strings.Contains(w[0], "\n") {
				t.Errorf("warnings %q, want one line starting %q", w, tc.want)
			}
			if cfg.Watch() != 5*time.Minute {
				t.Errorf("an unknown field set watchDuration: %s", cfg.Watch())
			}
		})
	}
}

func TestConfigReportsEveryProblemAtOnce(t *testing.T) {
	_, err := Parse([]byte("servicesAndDependantSelectors: {a: {podSelectors: [{}]}, b: {podSelectors: []}}\njobTemplate: {imagePullPolicy: x}"))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"servicesAndDependantSelectors.a.podSelectors[0]", "servicesAndDependantSelectors.b.podSelectors", "jobTemplate.imagePullPolicy"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

// A value that does not decode does not hide the problems of the fields that did: each is
// reported once, and a field that did not decode is not also called missing or invalid.
func TestConfigReportsDecodeAndValidationProblemsTogether(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"an undecodable duration beside invalid fields",
			"watchDuration: soon\nservicesAndDependantSelectors: {a: {podSelectors: [{}]}}\njobTemplate: {imagePullPolicy: x}\n",
			[]string{`watchDuration="soon": must be a Go duration`, "servicesAndDependantSelectors.a.podSelectors[0]", "jobTemplate.imagePullPolicy"}},
		{"an undecodable service beside a valid one and an invalid one",
			"servicesAndDependantSelectors: {a: {podSelectors: 3}, b: {podSelectors: [{matchLabels: {app: web}}]}, c: {podSelectors: []}}\narmedMaxWait: -1h\n",
			[]string{"servicesAndDependantSelectors.a.podSelectors=3: must be a list", "servicesAndDependantSelectors.c.podSelectors", "armedMaxWait"}},
		{"the only service undecodable is not also called missing",
			"servicesAndDependantSelectors: {a: {podSelectors: 3}}\n",
			[]string{"servicesAndDependantSelectors.a.podSelectors=3: must be a list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for _, want := range tc.want {
				if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, want) }) {
					t.Errorf("no line with %q:\n%v", want, err)
				}
			}
		})
	}
}
