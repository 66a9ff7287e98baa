//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Config changes: the coordinator checks its mounted ConfigMap while it runs; a valid change
// restarts it (the process exits 0 and the kubelet starts the container again), an invalid
// one changes nothing and is reported. The test edits the config of a private coordinator,
// so the others run on meanwhile. The kubelet refreshes a ConfigMap volume at its next sync
// of the pod (syncFrequency, 1m by default, plus jitter, or at once when the pod is updated:
// applyConfig nudges it), and the coordinator reads the file every 10 s; the waits here are
// a generous, bounded 3 minutes.
const configSyncTimeout = 3 * time.Minute

func TestInvalidConfigMapChangesNothingAndAFixedOneRestartsTheCoordinator(t *testing.T) {
	parallelLong(t, 90*time.Second)
	c := privateCoordinator(t, "reload", nil)
	cm, err := kube.CoreV1().ConfigMaps(depwatchNS).Get(context.Background(), c.config, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading ConfigMap %s/%s: %v", depwatchNS, c.config, err)
	}
	original := cm.Data["config.yaml"]
	if !strings.Contains(original, "watchDuration: 5m0s") {
		t.Fatalf("the local config no longer says watchDuration: 5m0s; this test edits that line:\n%s", original)
	}

	ns := c.namespace(t, "reload")
	// Arming off for this Service: a return launches an unarmed weeder Job (trigger=ready).
	p := newPairNamed(t, ns, "upstream-unarmed")
	restarts := c.restarts(t)

	// 1. An invalid config: a negative watchDuration. Reported, not applied, no restart.
	c.applyConfig(t, strings.Replace(original, "watchDuration: 5m0s", "watchDuration: -1m", 1))
	waitFor(t, configSyncTimeout, "depwatch_coordinator_config_valid 0", func() (bool, error) {
		return c.metric(t, "depwatch_coordinator_config_valid") == 0, nil
	})
	code, body := c.readyz(t)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "watchDuration: -1m0s: must not be negative") {
		t.Errorf("/readyz with an invalid config = %d %q, want 503 naming watchDuration", code, body)
	}
	waitFor(t, time.Minute, "the coordinator pod to be reported not ready", func() (bool, error) {
		pods, err := kube.CoreV1().Pods(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: c.selector()})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		for _, pod := range pods.Items {
			if podReady(pod) {
				return false, nil
			}
		}
		return true, nil
	})
	logs, _ := kubectl(t, "-n", depwatchNS, "logs", "deployment/"+c.name, "--tail=200")
	if !strings.Contains(logs, "The config file is invalid") || !strings.Contains(logs, "watchDuration") {
		t.Errorf("the coordinator's log does not report the invalid config naming watchDuration:\n%s", logs)
	}

	// 2. It still works, with the config it started with (watchDuration 5m0s).
	job := p.outageAndReturn()
	if got := jobEnvValue(job, "RUN_DURATION"); got != "5m0s" {
		t.Errorf("weeder Job %s launched while the config is invalid has RUN_DURATION=%q, want the running 5m0s", job.Name, got)
	}
	if got := c.restarts(t); got != restarts {
		t.Errorf("the coordinator's container restarted %d time(s) on an invalid config, want none", got-restarts)
	}

	// 3. Fixed, with a change: watchDuration 4m0s. The coordinator restarts with it.
	c.applyConfigAndRestart(t, "watchDuration 4m0s", strings.Replace(original, "watchDuration: 5m0s", "watchDuration: 4m0s", 1))
	previous, _ := kubectl(t, "-n", depwatchNS, "logs", "deployment/"+c.name, "--previous", "--tail=200")
	if !strings.Contains(previous, "The config file changed and is valid") {
		t.Errorf("the stopped coordinator's log does not say the config change stopped it:\n%s", previous)
	}
	waitFor(t, configSyncTimeout, "the restarted coordinator to be ready", func() (bool, error) {
		code, _ := c.readyz(t)
		return code == http.StatusOK && c.metric(t, "depwatch_coordinator_config_valid") == 1, nil
	})
	c.waitReplicas(t, 1)
	job = p.outageAndReturn()
	if got := jobEnvValue(job, "RUN_DURATION"); got != "4m0s" {
		t.Errorf("weeder Job %s launched after the fix has RUN_DURATION=%q, want the new 4m0s", job.Name, got)
	}
}

// applyConfigAndRestart applies config to c's ConfigMap (applyConfig) and waits until every
// pod of c has restarted its container to apply it and c leads again.
func (c *deployedCoordinator) applyConfigAndRestart(t *testing.T, what, config string) {
	t.Helper()
	before := c.podRestarts(t)
	c.applyConfig(t, config)
	waitFor(t, configSyncTimeout, fmt.Sprintf("every pod of coordinator %s to restart with %s", c.name, what), func() (bool, error) {
		now := c.podRestarts(t)
		for pod, n := range before {
			if now[pod] <= n {
				return false, nil
			}
		}
		return true, nil
	})
	c.waitLeading(t)
}

// podRestarts is the restart count of each of c's pods, by name.
func (c *deployedCoordinator) podRestarts(t *testing.T) map[string]int32 {
	t.Helper()
	pods, err := kube.CoreV1().Pods(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: c.selector()})
	if err != nil {
		t.Fatalf("listing the pods of coordinator %s: %v", c.name, err)
	}
	out := map[string]int32{}
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			out[p.Name] += s.RestartCount
		}
	}
	return out
}

// outageAndReturn takes the pair's upstream down and back and returns the weeder Job the
// return launched (the pair's Service must have arming off).
func (p *pair) outageAndReturn() batchv1.Job {
	p.t.Helper()
	p.scaleUpstream(0)
	p.waitServiceReady(false, time.Minute)
	time.Sleep(2 * time.Second) // let the coordinator see the outage before the return
	returnAt := time.Now()
	p.scaleUpstream(1)
	p.waitServiceReady(true, time.Minute)
	var job batchv1.Job
	waitFor(p.t, time.Minute, fmt.Sprintf("a weeder Job for the return of %s/%s", p.ns, p.svc), func() (bool, error) {
		for _, j := range jobsCreatedAfter(p.weederJobs(), returnAt) {
			if j.Annotations["depwatch.io/trigger"] == "ready" {
				job = j
				return true, nil
			}
		}
		return false, nil
	})
	return job
}

func jobEnvValue(j batchv1.Job, name string) string {
	for _, c := range j.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// applyConfig replaces the config.yaml of c's ConfigMap with kubectl apply, as a user would;
// its labels are kept.
func (c *deployedCoordinator) applyConfig(t *testing.T, config string) {
	t.Helper()
	name := c.configMapName(t)
	cur, err := kube.CoreV1().ConfigMaps(depwatchNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading ConfigMap %s/%s: %v", depwatchNS, name, err)
	}
	cm := corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: depwatchNS, Labels: cur.Labels},
		Data:       map[string]string{"config.yaml": config},
	}
	b, err := yaml.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "configmap.yaml")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "apply", "-f", file)
	// Any update of a pod makes the kubelet sync it at once, and a sync refreshes its
	// ConfigMap volumes; otherwise the refresh waits for the periodic sync (syncFrequency,
	// 1m + jitter). Operators use the same nudge; the coordinator's check of its file is what is
	// under test.
	mustKubectl(t, "-n", depwatchNS, "annotate", "pod", "-l", c.selector(), "--overwrite",
		"e2e.depwatch.io/config-nudge="+strconv.FormatInt(time.Now().UnixNano(), 10))
}
