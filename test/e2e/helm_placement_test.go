//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A private registry and a dedicated node pool are said once, to the chart: the pull secret
// and the toleration given as the chart's imagePullSecrets and tolerations are on the
// coordinator's pod and on the pod of the weeder Job it launches, and that Job runs (armed
// during the outage, then gated open by the return). The lab's images are local and never
// pulled, so a pull secret of a registry that does not exist changes nothing but the spec,
// and the toleration is of a taint no node has. Then the release is removed as docs/install.md
// says, and nothing the coordinator created is left.
func TestHelmChartPullSecretAndTolerationReachTheWeederJob(t *testing.T) {
	parallelLong(t, 60*time.Second)
	helm, releaseNS, release, c, work := newHelmRelease(t, "helm-place", "dwp")

	const secret = "e2e-regcred"
	_, err := kube.CoreV1().Secrets(releaseNS).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.invalid":{"auth":"ZTJlOmUyZQ=="}}}`)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the pull secret: %v", err)
	}
	toleration := corev1.Toleration{Key: "depwatch.io/e2e-dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}

	values := helmValues(c, releaseNS, "1m", map[string]any{"upstream": weederDependents()})
	values["imagePullSecrets"] = []any{map[string]any{"name": secret}}
	values["tolerations"] = []any{map[string]any{"key": toleration.Key, "operator": string(toleration.Operator), "value": toleration.Value, "effect": string(toleration.Effect)}}
	helmRun(t, helm, "install", release, filepath.Join(repoRoot, "manifests/charts/depwatch"), "-n", releaseNS,
		"-f", writeValues(t, values), "--wait", "--timeout=2m")
	t.Cleanup(func() { _, _ = helmOut(helm, "uninstall", release, "-n", releaseNS, "--wait", "--timeout=1m") })
	c.waitLeading(t)

	pods, err := kube.CoreV1().Pods(releaseNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=coordinator"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("listing the release's coordinator pods: %v (%d found)", err, len(pods.Items))
	}
	if problem := placementProblem(pods.Items[0].Spec, secret, toleration); problem != "" {
		t.Errorf("the coordinator's pod %s: %s", pods.Items[0].Name, problem)
	}

	p := newPair(t, work)
	p.jobsNS = releaseNS
	outageStart := p.beginOutage()
	armed := p.waitArmedJob(outageStart, 2*time.Minute) // its pod runs: it logged that it is armed
	jobPods, err := kube.CoreV1().Pods(releaseNS).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + armed.Name})
	if err != nil || len(jobPods.Items) == 0 {
		t.Fatalf("listing the pods of weeder Job %s: %v (%d found)", armed.Name, err, len(jobPods.Items))
	}
	for _, pod := range jobPods.Items {
		if problem := placementProblem(pod.Spec, secret, toleration); problem != "" {
			t.Errorf("weeder Job %s's pod %s: %s", armed.Name, pod.Name, problem)
		}
	}

	// The Job goes on to do its work: the return opens its gate.
	p.scaleUpstream(1)
	waitFor(t, 2*time.Minute, fmt.Sprintf("weeder Job %s to log its service's return", armed.Name), func() (bool, error) {
		out, err := runKubectl("-n", releaseNS, "logs", "job/"+armed.Name)
		return err == nil && strings.Contains(out, "is Ready at"), nil
	})

	// Removed as docs/install.md says, the release leaves nothing of what its coordinator created:
	// no Job, no membership ConfigMap, no Lease.
	helmRun(t, helm, "uninstall", release, "-n", releaseNS, "--wait", "--timeout=2m")
	mustKubectl(t, "-n", releaseNS, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/instance="+release, "--timeout=2m")
	mustKubectl(t, "-n", releaseNS, "delete", "jobs,configmaps", "-l", "depwatch.io/kind")
	mustKubectl(t, "-n", releaseNS, "delete", "lease", "depwatch-coordinator", "--ignore-not-found")
	if left := mustKubectl(t, "-n", releaseNS, "get", "jobs,configmaps", "-l", "depwatch.io/kind", "-o", "name"); strings.TrimSpace(left) != "" {
		t.Errorf("after docs/install.md's uninstall, left behind:\n%s", left)
	}
	if left := mustKubectl(t, "-n", releaseNS, "get", "lease", "depwatch-coordinator", "--ignore-not-found", "-o", "name"); strings.TrimSpace(left) != "" {
		t.Errorf("after docs/install.md's uninstall, the Lease is left behind: %s", left)
	}
}

// placementProblem says what of the chart's pull secret and toleration a pod spec lacks; ""
// when it has both.
func placementProblem(spec corev1.PodSpec, secret string, toleration corev1.Toleration) string {
	var missing []string
	if !slices.Contains(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: secret}) {
		missing = append(missing, fmt.Sprintf("no imagePullSecret %s (has %v)", secret, spec.ImagePullSecrets))
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tol.MatchToleration(&toleration) }) {
		missing = append(missing, fmt.Sprintf("no toleration %s=%s:%s (has %v)", toleration.Key, toleration.Value, toleration.Effect, spec.Tolerations))
	}
	return strings.Join(missing, "; ")
}
