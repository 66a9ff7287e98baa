//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator"
	"github.com/depwatch/depwatch/jobs"
)

// restrictedLabels make a namespace enforce, warn about and audit the restricted level.
var restrictedLabels = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
	"pod-security.kubernetes.io/warn":            "restricted",
	"pod-security.kubernetes.io/warn-version":    "latest",
	"pod-security.kubernetes.io/audit":           "restricted",
	"pod-security.kubernetes.io/audit-version":   "latest",
}

// podSecurityReasons are the reasons the PodSecurity admission gives for the checks of the
// baseline and restricted levels (k8s.io/pod-security-admission/policy, v1.36).
var podSecurityReasons = []string{
	"allowPrivilegeEscalation != false", "forbidden AppArmor profile", "non-default capabilities",
	"unrestricted capabilities", "host namespaces", "hostPath volumes", "hostPort",
	"probe or lifecycle host", "privileged", "procMount", "restricted volume types",
	"runAsNonRoot != true", "runAsUser=0", "seLinuxOptions", "seccompProfile", "forbidden sysctls",
	"hostProcess",
}

// The local overlay's relaxations, all caused by its host network: hostNetwork itself, the
// hostPorts Kubernetes defaults from the container ports on the host network, and the
// coordinator's probes on 127.0.0.1 (on the host network the pod's IP is the node's address).
var localOverlayReasons = []string{"host namespaces", "hostPort", "probe or lifecycle host"}

// podCase is one depwatch pod spec as something in this repository produces it.
type podCase struct {
	name   string
	spec   corev1.PodSpec
	labels map[string]string
	local  bool // from the local overlay / a *-local example: host network, relaxed before the check
}

// TestSecurityEveryDepwatchPodIsAdmittedUnderRestrictedPodSecurity: the coordinator's pod (as
// kustomize renders manifests/base and the local overlay), the weeder and probe Jobs' pods (as
// the jobs package builds them from the base and the local coordinator config) and every
// example's pod are server-side dry-run created in a namespace that enforces restricted:
// admitted, with no warning. The local-overlay specs are admitted only once their host
// network is taken away, and refused for nothing else before. Negative controls: the
// coordinator's pod with one protection undone at a time is refused, naming it.
func TestSecurityEveryDepwatchPodIsAdmittedUnderRestrictedPodSecurity(t *testing.T) {
	parallel(t)
	ns := newLabelledNamespace(t, "sec-psa", restrictedLabels)
	for _, sa := range []string{"depwatch-coordinator", "depwatch-weeder", "depwatch-probe", "depwatch-reaper"} {
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(context.Background(),
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating service account %s: %v", sa, err)
		}
	}
	// The namespace's labels reach the admission plugin through an informer: wait until a
	// pod that is not even baseline is refused before trusting any "admitted".
	privileged := corev1.PodSpec{ServiceAccountName: "depwatch-reaper", Containers: []corev1.Container{{Name: "c", Image: testappImage,
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}
	waitFor(t, 30*time.Second, "namespace "+ns+" to enforce restricted", func() (bool, error) {
		_, _, err := dryRunPod(ns, "probe-enforcement", nil, privileged)
		return err != nil && strings.Contains(err.Error(), "violates PodSecurity"), nil
	})

	cases := depwatchPodCases(t)
	if len(cases) < 12 {
		t.Fatalf("found only %d depwatch pod specs; the sources were not all read", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assertHardened(t, c.spec)
			spec := c.spec
			if c.local {
				if !spec.HostNetwork {
					t.Fatalf("a local-overlay spec without hostNetwork: nothing to relax, the case is mislabelled")
				}
				// As it is: refused, and only for what the host network brings.
				_, _, err := dryRunPod(ns, c.name, c.labels, spec)
				if err == nil {
					t.Fatalf("admitted with hostNetwork under restricted; the check is not enforcing")
				}
				t.Logf("as the local overlay has it: %v", err)
				if extra := unexpectedReasons(err.Error(), localOverlayReasons); len(extra) > 0 {
					t.Errorf("refused for more than the host network: %v\n%v", extra, err)
				}
				spec = relaxLocal(spec)
			}
			_, warnings, err := dryRunPod(ns, c.name, c.labels, spec)
			if err != nil {
				t.Fatalf("refused under restricted: %v", err)
			}
			if len(warnings) > 0 {
				t.Errorf("admitted with warnings: %q", warnings)
			}
		})
	}

	// Negative controls: each protection undone, one at a time, on the coordinator's own spec.
	var base corev1.PodSpec
	for _, c := range cases {
		if c.name == "coordinator-base" {
			base = c.spec
		}
	}
	if len(base.Containers) == 0 {
		t.Fatal("no coordinator-base case")
	}
	for _, n := range []struct {
		name   string
		undo   func(*corev1.PodSpec)
		reason string
	}{
		{"allowPrivilegeEscalation-true", func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		}, "allowPrivilegeEscalation != false"},
		{"capabilities-not-dropped", func(s *corev1.PodSpec) { s.Containers[0].SecurityContext.Capabilities = nil }, "unrestricted capabilities"},
		{"runs-as-root", func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsNonRoot = nil
			s.SecurityContext.RunAsUser = ptr.To(int64(0))
		}, "runAsNonRoot != true"},
		{"no-seccomp-profile", func(s *corev1.PodSpec) { s.SecurityContext.SeccompProfile = nil }, "seccompProfile"},
		{"host-network", func(s *corev1.PodSpec) { s.HostNetwork = true }, "host namespaces"},
	} {
		t.Run("refused/"+n.name, func(t *testing.T) {
			spec := *base.DeepCopy()
			n.undo(&spec)
			_, _, err := dryRunPod(ns, "negative-"+n.name, nil, spec)
			if err == nil {
				t.Fatalf("the coordinator's pod with %s was admitted under restricted", n.name)
			}
			if !strings.Contains(err.Error(), n.reason) {
				t.Errorf("refused, but not for %q: %v", n.reason, err)
			}
		})
	}
}

// depwatchPodCases collects every depwatch pod spec this repository produces.
func depwatchPodCases(t *testing.T) []podCase {
	t.Helper()
	var cases []podCase
	// The coordinator, as `kubectl apply -k` would create it.
	for _, k := range []struct{ name, dir string }{{"coordinator-base", "manifests/base"}, {"coordinator-local", "manifests/overlays/local"}} {
		out := mustKubectl(t, "kustomize", filepath.Join(repoRoot, k.dir))
		found := false
		for _, doc := range splitYAML([]byte(out)) {
			var d appsv1.Deployment
			if kindOf(t, doc) != "Deployment" {
				continue
			}
			mustUnmarshalYAML(t, doc, &d)
			cases = append(cases, podCase{name: k.name, spec: d.Spec.Template.Spec, labels: d.Spec.Template.Labels, local: k.dir != "manifests/base"})
			found = true
		}
		if !found {
			t.Fatalf("kubectl kustomize %s rendered no Deployment", k.dir)
		}
	}
	// The Jobs, as the coordinator launches them (weederSpec and prober.launch) with each
	// config's jobTemplate (the Gardener component's is the base's, with the services and the
	// prober section a weeder and a probe Job are built from).
	for _, cfgCase := range []struct{ name, path string }{
		{"gardener", "manifests/components/gardener/config.yaml"}, {"local", "manifests/overlays/local/config.yaml"},
	} {
		cfg, err := coordinator.Options{ConfigFile: filepath.Join(repoRoot, cfgCase.path)}.LoadConfig()
		if err != nil {
			t.Fatalf("loading %s: %v", cfgCase.path, err)
		}
		tmpl := cfg.JobTemplate
		tmpl.Namespace = depwatchNS
		if tmpl.Image == "" {
			tmpl.Image = depwatchImage // the coordinator's own image
		}
		svcs := cfg.Services()
		sort.Strings(svcs)
		now := time.Now()
		var specs []struct {
			name string
			spec jobs.Spec
		}
		for _, armed := range []bool{false, true} {
			s, err := jobs.Weeder(jobs.WeederSpec{Namespace: "shoot--a--b", Service: svcs[0], Selectors: cfg.Selectors(svcs[0]),
				WatchDuration: cfg.Watch(), TriggerTime: now, Armed: armed, MaxWait: cfg.MaxWait()})
			if err != nil {
				t.Fatalf("%s: weeder spec: %v", cfgCase.path, err)
			}
			specs = append(specs, struct {
				name string
				spec jobs.Spec
			}{fmt.Sprintf("weeder-armed-%v", armed), s})
		}
		p := cfg.Prober
		ps, err := jobs.Probe(p.ProbeSpec("shoot--a--b", now))
		if err != nil {
			t.Fatalf("%s: probe spec: %v", cfgCase.path, err)
		}
		specs = append(specs, struct {
			name string
			spec jobs.Spec
		}{"probe", ps})
		for _, s := range specs {
			job, err := jobs.Build(tmpl, s.spec)
			if err != nil {
				t.Fatalf("%s: building the %s Job: %v", cfgCase.path, s.name, err)
			}
			cases = append(cases, podCase{name: s.name + "-job-" + cfgCase.name, spec: job.Spec.Template.Spec,
				labels: job.Spec.Template.Labels, local: cfgCase.name == "local"})
		}
	}
	// Every example's pod.
	files, _ := filepath.Glob(filepath.Join(repoRoot, "examples", "*.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(filepath.Base(f), ".yaml")
		for _, doc := range splitYAML(data) {
			var tpl *corev1.PodTemplateSpec
			switch kindOf(t, doc) {
			case "Job":
				var j batchv1.Job
				mustUnmarshalYAML(t, doc, &j)
				tpl = &j.Spec.Template
			case "CronJob":
				var cj batchv1.CronJob
				mustUnmarshalYAML(t, doc, &cj)
				tpl = &cj.Spec.JobTemplate.Spec.Template
			case "Deployment":
				var d appsv1.Deployment
				mustUnmarshalYAML(t, doc, &d)
				tpl = &d.Spec.Template
			default:
				continue
			}
			cases = append(cases, podCase{name: "example-" + base, spec: tpl.Spec, labels: tpl.Labels,
				local: strings.HasSuffix(base, "-local")})
		}
	}
	return cases
}

// relaxLocal takes away what the local overlay needs for its host network and nothing else.
func relaxLocal(s corev1.PodSpec) corev1.PodSpec {
	s = *s.DeepCopy()
	s.HostNetwork = false
	for i := range s.Containers {
		c := &s.Containers[i]
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if p != nil && p.HTTPGet != nil && p.HTTPGet.Host == apiServerHost {
				p.HTTPGet.Host = ""
			}
		}
	}
	return s
}

// assertHardened checks what the restricted level does not: a read-only root filesystem,
// and the restricted settings spelled out on every container rather than left to defaults.
func assertHardened(t *testing.T, s corev1.PodSpec) {
	t.Helper()
	if s.SecurityContext == nil || s.SecurityContext.RunAsNonRoot == nil || !*s.SecurityContext.RunAsNonRoot {
		t.Errorf("pod securityContext.runAsNonRoot is not true")
	}
	if s.SecurityContext == nil || s.SecurityContext.SeccompProfile == nil || s.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext.seccompProfile is not RuntimeDefault")
	}
	for _, c := range append(append([]corev1.Container(nil), s.InitContainers...), s.Containers...) {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("container %s has no securityContext", c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
		case sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0:
			t.Errorf("container %s: capabilities are not exactly drop [ALL]", c.Name)
		}
	}
}

// unexpectedReasons returns the PodSecurity reasons in msg that are not in allowed.
func unexpectedReasons(msg string, allowed []string) []string {
	ok := map[string]bool{}
	for _, r := range allowed {
		ok[r] = true
	}
	var extra []string
	for _, r := range podSecurityReasons {
		if !ok[r] && strings.Contains(msg, r+" (") {
			extra = append(extra, r)
		}
	}
	return extra
}

// warningCollector keeps the warnings the API server sends with a response.
type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// dryRunPod server-side dry-run creates a pod with the spec in ns: admission runs in full,
// nothing is stored. It returns the warnings the API server sent.
func dryRunPod(ns, name string, labels map[string]string, spec corev1.PodSpec) (*corev1.Pod, []string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	w := &warningCollector{}
	cfg.WarningHandler = w
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: dnsName(name), Namespace: ns, Labels: labels},
		Spec:       spec,
	}
	created, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	w.mu.Lock()
	defer w.mu.Unlock()
	return created, w.warnings, err
}

func dnsName(s string) string {
	s = strings.ToLower(strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(s))
	if len(s) > 50 {
		s = s[:50]
	}
	return strings.Trim(s, "-") + "-" + rand.String(4)
}

// newLabelledNamespace is newNamespace with labels set at creation, so the namespace is never
// seen without them.
func newLabelledNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("e2e-%s-%s", prefix, rand.String(5))
	all := map[string]string{"depwatch.io/e2e": "true"}
	for k, v := range labels {
		all[k] = v
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: all}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func kindOf(t *testing.T, doc []byte) string {
	t.Helper()
	var m struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &m); err != nil {
		t.Fatalf("reading a YAML document: %v\n%s", err, doc)
	}
	return m.Kind
}

func mustUnmarshalYAML(t *testing.T, doc []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("decoding: %v\n%s", err, doc)
	}
}
