//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// Most tests share the lab's coordinator (manifests/overlays/local). A test that kills,
// stops, reconfigures or restarts a coordinator gets one of its own instead, so it can run
// beside the rest of the suite: a copy of the lab's Deployment with its own name, ports,
// ConfigMap and Lease, weeding only namespaces labelled privateCoordinatorLabel=<its home
// namespace>. The lab's config leaves namespaces with that label to them.
const privateCoordinatorLabel = "depwatch.io/e2e-coordinator"

// deployedCoordinator is one coordinator Deployment in the depwatch namespace and where to reach it.
type deployedCoordinator struct {
	name      string // Deployment
	component string // its pods' app.kubernetes.io/component label
	leaseNS   string // where its Lease lives
	metrics   int    // loopback ports (the pods run on the host network)
	health    int
	home      string // a private coordinator's namespace; "" for the lab's
	config    string // a private coordinator's ConfigMap
}

// lab is the coordinator ensureCoordinator installs.
var lab = &deployedCoordinator{name: "depwatch-coordinator", component: "coordinator", leaseNS: depwatchNS, metrics: 19643, health: 19644}

func (c *deployedCoordinator) selector() string { return "app.kubernetes.io/component=" + c.component }

// privateCoordinator starts a coordinator of the test's own, with env added to the lab's
// (flags as an operator sets them), and waits until it leads. It is removed when the test
// ends.
func privateCoordinator(t *testing.T, prefix string, env map[string]string) *deployedCoordinator {
	t.Helper()
	return privateCoordinatorWith(t, prefix, env, nil)
}

// privateCoordinatorWith is privateCoordinator whose config, the lab's without the prober,
// edit may change (give it a prober of its own, say) before it starts.
func privateCoordinatorWith(t *testing.T, prefix string, env map[string]string, edit func(home string, cfg map[string]any)) *deployedCoordinator {
	t.Helper()
	ensureCoordinator(t)
	ctx := context.Background()
	home := newNamespace(t, prefix+"-home")
	name := "dwc-" + strings.TrimPrefix(home, "e2e-")
	c := &deployedCoordinator{name: name, component: "coordinator-" + name, leaseNS: home, home: home, config: name}

	// Its Lease in its home namespace, with the rights the manifests' Role grants on the lab's.
	labRole, err := kube.RbacV1().Roles(depwatchNS).Get(ctx, "depwatch-coordinator", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the lab coordinator's Role: %v", err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "depwatch-coordinator", Namespace: home}}
	for _, r := range labRole.Rules {
		if slices.Contains(r.Resources, "leases") {
			role.Rules = append(role.Rules, r)
		}
	}
	if _, err := kube.RbacV1().Roles(home).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Lease Role of %s: %v", c.name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "depwatch-coordinator", Namespace: home},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "depwatch-coordinator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "depwatch-coordinator", Namespace: depwatchNS}},
	}
	if _, err := kube.RbacV1().RoleBindings(home).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Lease RoleBinding of %s: %v", c.name, err)
	}

	// The lab's config, for this coordinator's namespaces only and without the prober.
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(labConfig(t)), &cfg); err != nil {
		t.Fatalf("reading the lab's config: %v", err)
	}
	cfg["namespaces"] = map[string]any{"selector": map[string]any{"matchLabels": map[string]any{privateCoordinatorLabel: home}}}
	delete(cfg, "prober")
	if edit != nil {
		edit(home, cfg)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: c.config, Namespace: depwatchNS}, Data: map[string]string{"config.yaml": string(b)}}
	if _, err := kube.CoreV1().ConfigMaps(depwatchNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the config of %s: %v", c.name, err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().ConfigMaps(depwatchNS).Delete(context.Background(), c.config, metav1.DeleteOptions{})
	})

	c.deploy(t, env)
	c.waitLeading(t)
	return c
}

// standby starts a second replica of a private coordinator (a Deployment of its own: replicas
// on the host network cannot share ports) on the same config and Lease, and waits until it
// stands by.
func (c *deployedCoordinator) standby(t *testing.T) *deployedCoordinator {
	t.Helper()
	name := c.name + "-standby"
	s := &deployedCoordinator{name: name, component: "coordinator-" + name, leaseNS: c.leaseNS, home: c.home, config: c.config}
	s.deploy(t, nil)
	waitFor(t, 30*time.Second, "the standby to say it stands by", func() (bool, error) {
		out, err := kubectl(t, "-n", depwatchNS, "logs", "deployment/"+s.name)
		return strings.Contains(out, "Standing by"), err
	})
	return s
}

// deploy creates c's Deployment from the lab's: c's name, labels, ports, Lease namespace and
// ConfigMap, the lab's env plus env.
func (c *deployedCoordinator) deploy(t *testing.T, env map[string]string) {
	t.Helper()
	ctx := context.Background()
	orig, err := kube.AppsV1().Deployments(depwatchNS).Get(ctx, lab.name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the lab coordinator's Deployment: %v", err)
	}
	c.metrics, c.health = freePort(t), freePort(t)
	d := orig.DeepCopy()
	d.ObjectMeta = metav1.ObjectMeta{Name: c.name, Namespace: depwatchNS}
	d.Status = appsv1.DeploymentStatus{}
	lbl := map[string]string{"app.kubernetes.io/name": "depwatch", "app.kubernetes.io/component": c.component}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: lbl}
	d.Spec.Template.Labels = lbl
	d.Spec.Replicas = ptr.To(int32(1))
	spec := &d.Spec.Template.Spec
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == "config" && spec.Volumes[i].ConfigMap != nil {
			spec.Volumes[i].ConfigMap.Name = c.config
		}
	}
	ct := &spec.Containers[0]
	var args []string
	for _, a := range ct.Args {
		switch {
		case strings.HasPrefix(a, "--metrics-bind-addr="):
			a = fmt.Sprintf("--metrics-bind-addr=127.0.0.1:%d", c.metrics)
		case strings.HasPrefix(a, "--health-bind-addr="):
			a = fmt.Sprintf("--health-bind-addr=127.0.0.1:%d", c.health)
		case strings.HasPrefix(a, "--leader-election-namespace="):
			continue
		}
		args = append(args, a)
	}
	ct.Args = append(args, "--leader-election-namespace="+c.leaseNS) // after the subcommand
	for k, v := range env {
		ct.Env = append(ct.Env, corev1.EnvVar{Name: k, Value: v})
	}
	ct.Ports = nil
	for _, pr := range []*corev1.Probe{ct.LivenessProbe, ct.ReadinessProbe, ct.StartupProbe} {
		if pr != nil && pr.HTTPGet != nil {
			pr.HTTPGet.Port = intstr.FromInt32(int32(c.health))
		}
	}
	if _, err := kube.AppsV1().Deployments(depwatchNS).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating coordinator %s: %v", c.name, err)
	}
	t.Cleanup(func() {
		dumpIfFailed(t) // its log goes with it
		_ = kube.AppsV1().Deployments(depwatchNS).Delete(context.Background(), c.name, metav1.DeleteOptions{})
		waitFor(t, time.Minute, "coordinator "+c.name+"'s pods to be gone", func() (bool, error) {
			pods, err := kube.CoreV1().Pods(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: c.selector()})
			return err == nil && len(pods.Items) == 0, err
		})
	})
	mustKubectl(t, "-n", depwatchNS, "rollout", "status", "deployment/"+c.name, "--timeout=120s")
}

// namespace creates a namespace for the test that this private coordinator weeds.
func (c *deployedCoordinator) namespace(t *testing.T, prefix string) string {
	t.Helper()
	return newNamespaceLabelled(t, prefix, map[string]string{privateCoordinatorLabel: c.home})
}

// waitLeading waits until c's metrics say it leads.
func (c *deployedCoordinator) waitLeading(t *testing.T) {
	t.Helper()
	if !c.leadsWithin(t, minWait) {
		t.Fatalf("timed out after %s waiting for coordinator %s to take the lead", minWait, c.name)
	}
}

// leadsWithin tells whether c's metrics say it leads before d has passed.
func (c *deployedCoordinator) leadsWithin(t *testing.T, d time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for c.metric(t, "depwatch_coordinator_leader") != 1 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
	return true
}

// scale sets c's Deployment's replicas.
func (c *deployedCoordinator) scale(t *testing.T, replicas int32) {
	scaleDeployment(t, depwatchNS, c.name, replicas)
}

// waitReplicas waits until c has exactly n ready pods and no others.
func (c *deployedCoordinator) waitReplicas(t *testing.T, n int) {
	t.Helper()
	waitFor(t, 90*time.Second, fmt.Sprintf("%d pods of coordinator %s", n, c.name), func() (bool, error) {
		pods, err := kube.CoreV1().Pods(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: c.selector()})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, pod := range pods.Items {
			if podReady(pod) {
				ready++
			}
		}
		return len(pods.Items) == n && ready == n, nil
	})
}

// kill deletes c's pods at once, without a grace period: SIGKILL, nothing released.
func (c *deployedCoordinator) kill(t *testing.T) {
	t.Helper()
	mustKubectl(t, "-n", depwatchNS, "delete", "pod", "-l", c.selector(), "--grace-period=0", "--force", "--wait=false")
}

// killProcess sends SIGKILL to c's process itself: its pod stays, its Lease is not released.
func (c *deployedCoordinator) killProcess(t *testing.T) {
	killProcessWith(t, fmt.Sprintf("--metrics-bind-addr=127.0.0.1:%d", c.metrics))
}

// leaseHolder is the holder of c's Lease ("" when none or unreadable).
func (c *deployedCoordinator) leaseHolder(t *testing.T) string {
	l, err := kube.CoordinationV1().Leases(c.leaseNS).Get(context.Background(), "depwatch-coordinator", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leaseAcquired is when the current holder of c's Lease acquired it.
func (c *deployedCoordinator) leaseAcquired(t *testing.T) time.Time {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(c.leaseNS).Get(context.Background(), "depwatch-coordinator", metav1.GetOptions{})
	if err != nil || l.Spec.AcquireTime == nil {
		t.Fatalf("reading when coordinator %s's Lease was acquired: %v", c.name, err)
	}
	return l.Spec.AcquireTime.Time
}

// restarts sums the restart counts of c's containers.
func (c *deployedCoordinator) restarts(t *testing.T) int32 {
	t.Helper()
	pods, err := kube.CoreV1().Pods(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: c.selector()})
	if err != nil {
		t.Fatalf("listing the pods of coordinator %s: %v", c.name, err)
	}
	var n int32
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			n += s.RestartCount
		}
	}
	return n
}

// scrape reads every sample of c's /metrics, keyed by the name with its labels as exposed;
// nil if it cannot be read.
func (c *deployedCoordinator) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.metrics))
	if err != nil {
		t.Logf("reading the metrics of coordinator %s: %v", c.name, err)
		return nil
	}
	defer resp.Body.Close()
	samples := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			samples[line[:i]] = f
		}
	}
	return samples
}

// metric reads one sample (name with its labels, as exposed) from c's /metrics; -1 if it
// cannot be read.
func (c *deployedCoordinator) metric(t *testing.T, sample string) float64 {
	t.Helper()
	if v, ok := c.scrape(t)[sample]; ok {
		return v
	}
	return -1
}

// readyz is c's /readyz status code and body (0 when unreachable).
func (c *deployedCoordinator) readyz(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", c.health))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// configMapName is the ConfigMap mounted into c (kustomize adds a hash suffix to the lab's).
func (c *deployedCoordinator) configMapName(t *testing.T) string {
	t.Helper()
	d, err := kube.AppsV1().Deployments(depwatchNS).Get(context.Background(), c.name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Deployment of coordinator %s: %v", c.name, err)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "config" && v.ConfigMap != nil {
			return v.ConfigMap.Name
		}
	}
	t.Fatalf("coordinator %s mounts no ConfigMap volume named config", c.name)
	return ""
}

// labConfig is the config.yaml the lab's coordinator runs.
func labConfig(t *testing.T) string {
	t.Helper()
	name := lab.configMapName(t)
	cm, err := kube.CoreV1().ConfigMaps(depwatchNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading ConfigMap %s/%s: %v", depwatchNS, name, err)
	}
	return cm.Data["config.yaml"]
}
