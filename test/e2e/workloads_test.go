//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator"
	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/jobs"
)

// crashingPod creates a bare pod whose container exits 1 at once, so the kubelet puts it in
// real CrashLoopBackOff.
func crashingPod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	return createPod(t, ns, name, labels, []string{"/testapp", "exit", "1"})
}

// sleepingPod creates a healthy bare pod that runs until it is stopped.
func sleepingPod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	return createPod(t, ns, name, labels, []string{"/testapp", "sleep"})
}

func createPod(t *testing.T, ns, name string, labels map[string]string, command []string) *corev1.Pod {
	t.Helper()
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "app", Image: testappImage, ImagePullPolicy: corev1.PullNever, Command: command,
			}},
		},
	}
	created, err := kube.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
	return created
}

// waitCrashLoopBackOff waits until the pod's container has crashed, been restarted, crashed
// again and now waits out the kubelet's back-off. The kubelet shows waiting/CrashLoopBackOff
// only when it re-syncs the pod, mostly at the end of a back-off; in between the container
// shows as terminated (podstate.CrashLoopBackOff knows both).
func waitCrashLoopBackOff(t *testing.T, ns, name string) {
	t.Helper()
	waitCrashLoopBackOffAhead(t, ns, name, 0)
}

// reapJobStart is how much of a crash-looping pod's back-off a one-shot reap Job's test leaves
// ahead before it applies the Job, so that the Job's one cycle finds the pod still waiting,
// not restarted by the kubelet: `kubectl apply` to the Job's list of pods takes a few seconds
// on an idle machine and took 40 s on one at load average 50. A minute takes the 80 s
// back-off (about two minutes of crash-looping first).
const reapJobStart = time.Minute

// waitCrashLoopBackOffAhead is waitCrashLoopBackOff with at least ahead of the back-off left,
// so a one-shot reap Job started now still finds the pod crash-looping, not restarted by the
// kubelet in the meantime.
func waitCrashLoopBackOffAhead(t *testing.T, ns, name string, ahead time.Duration) {
	t.Helper()
	waitFor(t, 5*time.Minute, fmt.Sprintf("pod %s/%s in CrashLoopBackOff with %s or more of it ahead", ns, name, ahead), func() (bool, error) {
		pod, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, crashLooping := podstate.CrashLoopBackOff(pod)
		if !crashLooping || len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].RestartCount < 1 {
			return false, nil
		}
		cl, ok := backOffOf(*pod)
		return ahead == 0 || (ok && cl.ahead() >= ahead), nil
	})
}

func waitPodRunning(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, 60*time.Second, fmt.Sprintf("pod %s/%s running", ns, name), func() (bool, error) {
		pod, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pod.Status.Phase == corev1.PodRunning, nil
	})
}

// podExists tells whether the very pod (same UID) is still there and not being deleted.
func podExists(t *testing.T, ns, name string, uid types.UID) bool {
	t.Helper()
	pod, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("reading pod %s/%s: %v", ns, name, err)
	}
	return pod.UID == uid && pod.DeletionTimestamp == nil
}

// waitJobFinished waits for the Job's Complete or Failed condition and returns which.
//
// A Job with an activeDeadlineSeconds is waited for at least that long and a minute more: the
// Job controller itself ends it by then, so on a loaded machine, where its pod starts late,
// the test still reads the Job's own verdict rather than its own guess.
func waitJobFinished(t *testing.T, ns, name string, timeout time.Duration) batchv1.JobConditionType {
	t.Helper()
	if job, err := kube.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil && job.Spec.ActiveDeadlineSeconds != nil {
		timeout = max(timeout, time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second+time.Minute)
	}
	var result batchv1.JobConditionType
	waitFor(t, timeout, fmt.Sprintf("job %s/%s to finish", ns, name), func() (bool, error) {
		job, err := kube.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range job.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				result = c.Type
				return true, nil
			}
		}
		return false, nil
	})
	return result
}

// jobPod returns the Job's (last) pod.
func jobPod(t *testing.T, ns, job string) corev1.Pod {
	t.Helper()
	pods, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("finding the pod of job %s/%s: %v (found %d)", ns, job, err, len(pods.Items))
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		return pods.Items[i].CreationTimestamp.Before(&pods.Items[j].CreationTimestamp)
	})
	return pods.Items[len(pods.Items)-1]
}

// podTerminationMessage is what the pod's terminated container wrote to its termination log.
func podTerminationMessage(pod corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return cs.State.Terminated.Message
		}
	}
	return ""
}

// eventsFor lists the Events recorded on one object, by reason.
func eventsFor(t *testing.T, ns, name string) map[string][]corev1.Event {
	t.Helper()
	list, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatalf("listing events of %s/%s: %v", ns, name, err)
	}
	byReason := map[string][]corev1.Event{}
	for _, e := range list.Items {
		byReason[e.Reason] = append(byReason[e.Reason], e)
	}
	return byReason
}

// applyExample applies files from examples/ with `kubectl apply -k`, through a kustomization
// that moves them into the test's namespace (names suffixed so cluster-scoped objects of
// parallel tests don't collide), runs the local image on the host network so the pod reaches
// the API server on loopback, and sets the Job container's env. It returns the suffix.
func applyExample(t *testing.T, ns string, files []string, env map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(repoRoot, "examples", f))
		if err != nil {
			t.Fatalf("reading example %s: %v", f, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	envList := []map[string]string{
		{"name": "KUBERNETES_SERVICE_HOST", "value": apiServerHost},
		{"name": "KUBERNETES_SERVICE_PORT", "value": apiServerPort},
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		envList = append(envList, map[string]string{"name": k, "value": env[k]})
	}
	envJSON, _ := json.Marshal(envList)
	resources, _ := json.Marshal(files)
	suffix := "-" + ns
	kustomization := fmt.Sprintf(`namespace: %s
nameSuffix: %s
resources: %s
images:
- name: ghcr.io/depwatch/depwatch
  newName: localhost/depwatch
  newTag: dev
patches:
- target: {kind: Job}
  patch: |-
    - {op: add, path: /spec/template/spec/hostNetwork, value: true}
    - {op: add, path: /spec/template/spec/containers/0/imagePullPolicy, value: Never}
    - {op: replace, path: /spec/template/spec/containers/0/env, value: %s}
`, ns, suffix, resources, envJSON)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "apply", "-k", dir)
	t.Cleanup(func() {
		dumpIfFailed(t) // before the example's Jobs and their logs go
		_, _ = kubectl(t, "delete", "-k", dir, "--ignore-not-found", "--wait=false")
	})
	return suffix
}

// jobLogs returns `kubectl logs job/<name>`, as a user reads it.
func jobLogs(t *testing.T, ns, job string) string {
	t.Helper()
	return mustKubectl(t, "-n", ns, "logs", "job/"+job)
}

// findLine returns the first log line whose fields all have the given values.
func findLine(lines []logLine, want map[string]string) (logLine, bool) {
next:
	for _, l := range lines {
		for k, v := range want {
			if l.str(k) != v {
				continue next
			}
		}
		return l, true
	}
	return nil, false
}

func reasonsOf(l logLine) string {
	b, _ := json.Marshal(l["reasons"])
	return strings.ToLower(string(b))
}

// localJobTemplate is the local overlay's jobTemplate, in the depwatch namespace: what the
// coordinator builds its Jobs with on this cluster.
func localJobTemplate(t *testing.T) jobs.Template {
	t.Helper()
	cfg, err := coordinator.Options{ConfigFile: filepath.Join(repoRoot, "manifests", "overlays", "local", "config.yaml")}.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	tpl := cfg.JobTemplate
	tpl.Namespace = depwatchNS
	return tpl
}

// createDepwatchJob builds the Job for spec as the coordinator would (jobs.Build) and creates
// it; it is deleted when the test ends. It returns the Job's name.
func createDepwatchJob(t *testing.T, tpl jobs.Template, spec jobs.Spec) string {
	t.Helper()
	job, err := jobs.Build(tpl, spec)
	if err != nil {
		t.Fatal(err)
	}
	created, err := kube.BatchV1().Jobs(depwatchNS).Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s Job: %v", spec.Kind, err)
	}
	t.Cleanup(func() {
		dumpIfFailed(t) // before the Job and its log go
		_ = kube.BatchV1().Jobs(depwatchNS).Delete(context.Background(), created.Name,
			metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
	return created.Name
}
