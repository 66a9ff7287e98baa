package manifests

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// The probe's policies are CEL; these tests evaluate them as the API server does (its own
// compiler, variables, match conditions and validator from k8s.io/apiserver, as its
// validating admission policy plugin puts them together), on the requests depwatch's probe
// makes (probe/scale.go) and on those it must not. test/e2e/security_probe_test.go runs them
// on the real cluster.

// policyNamed reads the ValidatingAdmissionPolicy name from a multi-document manifest.
func policyNamed(t *testing.T, path, name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	for _, doc := range strings.Split(string(readFile(t, path)), "\n---\n") {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := yaml.Unmarshal([]byte(doc), &p); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if p.Kind == "ValidatingAdmissionPolicy" && p.Name == name {
			return &p
		}
	}
	t.Fatalf("%s has no ValidatingAdmissionPolicy %s", path, name)
	return nil
}

// compiled is a policy compiled as the validating admission policy plugin compiles it
// (validating.compilePolicy, which is not exported).
func compiled(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	t.Helper()
	hasParams := p.Spec.ParamKind != nil
	vars := cel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	exprVars := cel.OptionalVariableDeclarations{HasParams: hasParams}
	c, err := cel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatal(err)
	}
	var variables []cel.NamedExpressionAccessor
	for _, v := range p.Spec.Variables {
		variables = append(variables, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	c.CompileAndStoreVariables(variables, vars, environment.StoredExpressions)
	var conds []cel.ExpressionAccessor
	for i := range p.Spec.MatchConditions {
		conds = append(conds, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
	}
	matcher := matchconditions.NewMatcher(c.CompileCondition(conds, vars, environment.StoredExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	validations := make([]cel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]cel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	// Every expression must compile: a compile error is only seen at evaluation.
	return validating.NewValidator(c.CompileCondition(validations, vars, environment.StoredExpressions), matcher,
		c.CompileCondition(nil, vars, environment.StoredExpressions),
		c.CompileCondition(messages, exprVars, environment.StoredExpressions), p.Spec.FailurePolicy, nil)
}

// write is one UPDATE (a PATCH, as admission sees it) of an apps object or its scale.
type write struct {
	user        string
	resource    string // deployments, statefulsets
	subresource string // "" or scale
	old, new    runtime.Object
}

// verdict evaluates w against the policy with params (nil: none): "" when admitted, else the
// denials' messages (an evaluation error included: the policy fails closed).
func verdict(t *testing.T, v validating.Validator, w write, params runtime.Object) string {
	t.Helper()
	meta := w.new.(metav1.Object)
	gvr := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: w.resource}
	gvk := w.new.GetObjectKind().GroupVersionKind()
	attrs := admission.NewAttributesRecord(w.new, w.old, gvk, meta.GetNamespace(), meta.GetName(), gvr, w.subresource,
		admission.Update, &metav1.PatchOptions{}, false, &user.DefaultInfo{Name: w.user})
	va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: gvk, VersionedObject: w.new, VersionedOldObject: w.old}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: meta.GetNamespace()}}
	res := v.Validate(context.Background(), gvr, va, params, ns, 1e9, nil)
	var denials []string
	for _, d := range res.Decisions {
		if d.Action != validating.ActionAdmit {
			denials = append(denials, d.Message)
		}
	}
	return strings.Join(denials, "; ")
}

const (
	probeUser = "system:serviceaccount:depwatch:depwatch-probe"
	shootNS   = "shoot--a--b"
)

func deployment(name string, replicas int32, annotations map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: shootNS, Annotations: annotations, Labels: labels,
			ResourceVersion: "7", Generation: 3},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "registry.example/" + name + ":v1"}}}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}},
		Status: appsv1.DeploymentStatus{Replicas: replicas, ReadyReplicas: replicas},
	}
}

func statefulSet(name string, replicas int32, annotations map[string]string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: shootNS, Annotations: annotations, Labels: labels},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels}, ServiceName: name,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: "registry.example/" + name + ":v1"}}}}},
	}
}

func stored(n string) map[string]string {
	return map[string]string{probe.AnnotationReplicas: n, probe.AnnotationMeltdownProtection: ""}
}

func scaleOf(name string, replicas int32) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: shootNS}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
}

func TestProbeScalesPolicyAdmitsTheProbesOwnWritesAndNoOthers(t *testing.T) {
	v := compiled(t, policyNamed(t, "admission/probe-scales.yaml", "depwatch-probe-scales"))
	kcm := "kube-controller-manager"
	withImage := deployment(kcm, 3, nil)
	withImage.Spec.Template.Spec.Containers[0].Image = "evil.example/x"
	relabelled := deployment(kcm, 3, nil)
	relabelled.Labels["extra"] = "x"
	paused := deployment(kcm, 3, nil)
	paused.Spec.Paused = true
	withOther := deployment(kcm, 3, map[string]string{"example.com/other": "x"})
	for _, c := range []struct {
		name   string
		w      write
		denied string // "" admitted, else a piece of the message
	}{
		// probe/scale.go storeAndZero: the annotations first, then the replicas.
		{"scale-down: store the replicas and the marker", write{probeUser, "deployments", "", deployment(kcm, 3, nil), deployment(kcm, 3, stored("3"))}, ""},
		{"scale-down: to 0", write{probeUser, "deployments", "", deployment(kcm, 3, stored("3")), deployment(kcm, 0, stored("3"))}, ""},
		{"scale-down: to 0, a StatefulSet", write{probeUser, "statefulsets", "", statefulSet("etcd", 3, stored("3")), statefulSet("etcd", 0, stored("3"))}, ""},
		{"scale-down: the count stored again by a later run", write{probeUser, "deployments", "", deployment(kcm, 2, stored("3")), deployment(kcm, 2, stored("2"))}, ""},
		// restoreReplicas, then the annotations removed once a replica is ready.
		{"scale-up: to the stored count", write{probeUser, "deployments", "", deployment(kcm, 0, stored("3")), deployment(kcm, 3, stored("3"))}, ""},
		{"scale-up: to 1 without a stored count", write{probeUser, "deployments", "", deployment(kcm, 0, nil), deployment(kcm, 1, nil)}, ""},
		{"scale-up: the annotations removed", write{probeUser, "deployments", "", deployment(kcm, 3, stored("3")), deployment(kcm, 3, nil)}, ""},
		// ignored: a leftover marker removed.
		{"ignore-scaling: the marker removed", write{probeUser, "deployments", "",
			deployment(kcm, 2, map[string]string{probe.AnnotationIgnoreScaling: "true", probe.AnnotationMeltdownProtection: ""}),
			deployment(kcm, 2, map[string]string{probe.AnnotationIgnoreScaling: "true"})}, ""},
		{"the coordinator's in-process probe", write{"system:serviceaccount:depwatch:depwatch-coordinator", "deployments", "", deployment(kcm, 3, stored("3")), deployment(kcm, 0, stored("3"))}, ""},
		{"someone else's scale to 7 (not matched)", write{"kubernetes-admin", "deployments", "", deployment(kcm, 3, nil), deployment(kcm, 7, nil)}, ""},

		{"to 7 from 3", write{probeUser, "deployments", "", deployment(kcm, 3, stored("3")), deployment(kcm, 7, stored("3"))}, "only to 0, or from 0"},
		{"to 7 from 0, 3 stored", write{probeUser, "deployments", "", deployment(kcm, 0, stored("3")), deployment(kcm, 7, stored("3"))}, "from 0 to 7 replicas"},
		{"to 2 from 0 without a stored count", write{probeUser, "deployments", "", deployment(kcm, 0, nil), deployment(kcm, 2, nil)}, "only to 0, or from 0"},
		{"to the stored count when it is not a number", write{probeUser, "statefulsets", "", statefulSet("etcd", 0, stored("x")), statefulSet("etcd", 1, stored("x"))}, "only to 0, or from 0"},
		{"a raised count stored", write{probeUser, "deployments", "", deployment(kcm, 3, nil), deployment(kcm, 3, stored("7"))}, "only to the replicas it had (3)"},
		{"a raised count stored and scaled to at once", write{probeUser, "deployments", "", deployment(kcm, 0, nil), deployment(kcm, 7, stored("7"))}, "only to the replicas it had (0)"},
		{"another annotation", write{probeUser, "deployments", "", deployment(kcm, 3, nil), withOther}, "another annotation changes"},
		{"another annotation removed", write{probeUser, "deployments", "", withOther, deployment(kcm, 3, nil)}, "another annotation changes"},
		{"the image", write{probeUser, "deployments", "", deployment(kcm, 3, nil), withImage}, "another field"},
		{"a label", write{probeUser, "deployments", "", deployment(kcm, 3, nil), relabelled}, "another field"},
		{"paused", write{probeUser, "deployments", "", deployment(kcm, 3, nil), paused}, "another field"},
		{"the scale subresource, even to 0", write{probeUser, "deployments", "scale", scaleOf(kcm, 3), scaleOf(kcm, 0)}, "may not write the scale subresource"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := verdict(t, v, c.w, nil)
			switch {
			case c.denied == "" && got != "":
				t.Errorf("refused: %s", got)
			case c.denied != "" && !strings.Contains(got, c.denied):
				t.Errorf("verdict %q; want a refusal saying %q", got, c.denied)
			case c.denied != "" && !strings.Contains(got, "depwatch-probe-scales"):
				t.Errorf("the refusal %q does not name the policy", got)
			}
		})
	}
}

// What the coordinator writes (jobs.ScaleTargets, from the prober config) is what the policy
// reads: the Gardener config's dependents are admitted, nothing else is.
func TestProbeTargetsPolicyReadsWhatTheCoordinatorWrites(t *testing.T) {
	cfg, err := coordinator.Options{ConfigFile: "components/gardener/config.yaml"}.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	params := jobs.Template{Namespace: "depwatch"}.ScaleTargets(cfg.Prober.Resources())
	if len(params.Data) != 3 {
		t.Fatalf("the Gardener config's dependents give %v; want 3", params.Data)
	}
	p := policyNamed(t, "admission/probe-targets.yaml", "depwatch-probe-targets")
	if !strings.Contains(string(readFile(t, "admission/probe-targets.yaml")), "name: "+jobs.ScaleTargetsName) {
		t.Errorf("the binding does not name the ConfigMap %s the coordinator writes", jobs.ScaleTargetsName)
	}
	v := compiled(t, p)
	down := func(kind, name string) write {
		if kind == "StatefulSet" {
			return write{probeUser, "statefulsets", "", statefulSet(name, 3, stored("3")), statefulSet(name, 0, stored("3"))}
		}
		return write{probeUser, "deployments", "", deployment(name, 3, stored("3")), deployment(name, 0, stored("3"))}
	}
	for _, r := range cfg.Prober.Resources() {
		if got := verdict(t, v, down(r.Ref.Kind, r.Ref.Name), params); got != "" {
			t.Errorf("the config's %s is refused: %s", r.Ref, got)
		}
	}
	for _, w := range []write{
		down("Deployment", "gardener-resource-manager"),
		down("StatefulSet", "kube-controller-manager"), // the name, another kind
		{probeUser, "deployments", "scale", scaleOf("etcd-main", 3), scaleOf("etcd-main", 0)},
	} {
		got := verdict(t, v, w, params)
		if !strings.Contains(got, "only the dependents the prober config lists") || !strings.Contains(got, "depwatch/"+jobs.ScaleTargetsName) {
			t.Errorf("%s %s: verdict %q; want refused by depwatch-probe-targets", w.resource, w.new.(metav1.Object).GetName(), got)
		}
	}
	// An earlier config's dependent stays admitted once this config's are added (a probe Job it
	// launched may still be scaling it back up).
	grown := params.DeepCopy()
	grown.Data = jobs.UnionScaleTargets(map[string]string{jobs.ScaleTargetKey("Deployment", "gardener-resource-manager"): "apps/v1"}, params.Data)
	if got := verdict(t, v, down("Deployment", "gardener-resource-manager"), grown); got != "" {
		t.Errorf("an earlier config's dependent is refused: %s", got)
	}
	// No dependents (the coordinator without a prober creates it empty): nothing.
	empty := jobs.Template{Namespace: "depwatch"}.ScaleTargets(nil)
	if got := verdict(t, v, down("Deployment", "kube-controller-manager"), empty); got == "" {
		t.Error("with no dependents listed, a scale is admitted")
	}
}

// The chart renders both probe policies for the release: its namespace's accounts, and the
// parameters the coordinator writes (a fixed name) in its namespace.
func TestChartProbePoliciesFollowTheRelease(t *testing.T) {
	objs := parseObjects(t, run(t, helmBinary(t), "template", "dw", chart, "--namespace", "ops"))
	for _, name := range []string{"dw-depwatch-probe-scales", "dw-depwatch-probe-targets"} {
		p, b := objs["ValidatingAdmissionPolicy <nil>/"+name], objs["ValidatingAdmissionPolicyBinding <nil>/"+name]
		if p == nil || b == nil {
			t.Fatalf("the chart renders no policy and binding %s", name)
		}
		rendered, _ := yaml.Marshal(map[string]any(p))
		if !strings.Contains(string(rendered), "system:serviceaccount:ops:depwatch-probe") || strings.Contains(string(rendered), "system:serviceaccount:depwatch:") {
			t.Errorf("the chart's %s does not name the release namespace's accounts:\n%s", name, rendered)
		}
		spec, _ := b["spec"].(map[string]any)
		if spec["matchResources"] != nil || spec["policyName"] != name {
			t.Errorf("the chart's binding %s %v: want policy %s in every namespace", name, spec, name)
		}
		if name == "dw-depwatch-probe-targets" {
			ref, _ := spec["paramRef"].(map[string]any)
			if ref["name"] != jobs.ScaleTargetsName || ref["namespace"] != "ops" || ref["parameterNotFoundAction"] != "Allow" {
				t.Errorf("the chart's probe-targets binding reads %v; want ConfigMap ops/%s, Allow", ref, jobs.ScaleTargetsName)
			}
		}
	}
}
