//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/test/upstream"
)

// Swapping the image: gardenlet's dependency-watchdog Deployments, exactly as gardenlet writes
// them (gardener v1.149.3, pkg/component/nodemanagement/dependencywatchdog/bootstrap.go, with
// the ConfigMaps of pkg/gardenlet/controller/seed/seed/components.go newDependencyWatchdogs),
// run depwatch's image instead of dependency-watchdog's. Nothing of gardenlet's is changed
// but what the lab cannot do otherwise (gardenletDWDPod says what and why), and the RBAC is
// gardenlet's, rule for rule: it grants no Jobs, so the runs happen in the Deployment's own
// pod, and no request of either pod may be refused.

// gardenerVersion is the gardener release whose objects this file writes.
const gardenerVersion = "v1.149.3"

// dwdRole is one of gardenlet's two dependency-watchdog Deployments.
type dwdRole string

const (
	dwdWeeder dwdRole = "weeder"
	dwdProber dwdRole = "prober"
)

// gardenletWeederConfigMap and gardenletProberConfigMap are the dep-config.yaml gardenlet
// writes (test/upstream, shared with the coordinator's unit tests).
var (
	gardenletWeederConfigMap = upstream.GardenletWeederConfig()
	gardenletProberConfigMap = upstream.GardenletProberConfig()
)

// The prober's timings under gardenlet's config: what its own defaults make of it. The waits
// below are hang catchers derived from them, not bounds the test asserts.
const (
	gardenletProbeInterval   = 30 * time.Second // probeInterval
	dwdInitialDelay          = 30 * time.Second // initialDelay's default
	dwdJitter                = 0.2              // backoffJitterFactor's default
	dwdProbeTimeout          = 30 * time.Second // probeTimeout's default, also each scale's timeout
	depwatchProbeRunDuration = 2 * time.Minute  // probeJobRunDuration's default: a shard's run
	gardenletProbeSecret     = "shoot-access-dependency-watchdog-probe"
)

// dwdDeployment is one of gardenlet's dependency-watchdog Deployments, in a test's own
// namespace standing in for garden, with gardenlet's two replicas.
type dwdDeployment struct {
	role dwdRole
	ns   string
	name string // dependency-watchdog-<role>
}

// dwdReplicas is how many replicas each Deployment runs: two, as a highly available seed runs
// them (lab deviation: gardenlet writes one and gardener-resource-manager's
// high-availability-config webhook, which the lab does not have, sets the replicas of a
// "controller"; the test sets two itself). Started together, the two race for the Lease.
const dwdReplicas = 2

func (d *dwdDeployment) lease() string { return "dwd-" + string(d.role) + "-leader-election" }

// gardenletConfigMapName is the ConfigMap's name as gardener's kubernetesutils.MakeUnique
// makes it: the name, "-", and the first 8 hex digits of the SHA-256 of the concatenated
// SHA-256 hex digests of its values, by sorted key.
func gardenletConfigMapName(name string, data map[string]string) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		sum := sha256.Sum256([]byte(data[k]))
		b.WriteString(hex.EncodeToString(sum[:]))
	}
	sum := sha256.Sum256([]byte(b.String()))
	return name + "-" + hex.EncodeToString(sum[:])[:8]
}

// ensureSeedPriorityClass makes sure the seed's PriorityClass gardener-system-800 exists.
// gardenlet creates it with the seed's system components (value 999998800); the lab's
// stand-in has value 0 and never preempts, so the Deployments cannot push other tests' pods
// off the node. It is kept, like the stand-in CRDs.
func ensureSeedPriorityClass(t *testing.T) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:       metav1.ObjectMeta{Name: "gardener-system-800"},
		Value:            0,
		PreemptionPolicy: ptr.To(corev1.PreemptNever),
		Description:      "depwatch e2e stand-in for the Gardener seed's PriorityClass (never preempts)",
	}
	if _, err := kube.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating PriorityClass gardener-system-800: %v", err)
	}
}

// gardenletRules are bootstrap.go's getClusterRolePolicyRules and getRolePolicyRules.
func gardenletRules(role dwdRole) (cluster, ns []rbacv1.PolicyRule) {
	switch role {
	case dwdWeeder:
		cluster = []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		}
	case dwdProber:
		cluster = []rbacv1.PolicyRule{
			{APIGroups: []string{"extensions.gardener.cloud"}, Resources: []string{"clusters"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces", "secrets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			{APIGroups: []string{"machine.sapcloud.io"}, Resources: []string{"machines"}, Verbs: []string{"get", "list", "watch"}},
		}
	}
	ns = []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"dwd-" + string(role) + "-leader-election"}, Verbs: []string{"get", "watch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "get", "update", "patch"}},
	}
	return cluster, ns
}

// gardenletCommand is bootstrap.go's getContainerCommand.
func gardenletCommand(role dwdRole) []string {
	cmd := []string{"/usr/local/bin/dependency-watchdog", string(role), "--config-file=/etc/dependency-watchdog/config/dep-config.yaml"}
	if role == dwdProber {
		cmd = append(cmd, "--kube-api-qps=20.0", "--kube-api-burst=100", "--zap-log-level=INFO")
	}
	return append(cmd, "--enable-leader-election=true")
}

// deployGardenletDWD writes, in namespace ns (the test's garden), what gardenlet's
// ManagedResource for dependency-watchdog-<role> holds (ServiceAccount, ClusterRole and
// binding, Role and binding, the hashed ConfigMap with config, the Deployment), with
// depwatch's image, and waits until the pod leads. The cluster-scoped objects carry ns in
// their names, so the test runs beside others; they go when it ends.
func deployGardenletDWD(t *testing.T, role dwdRole, ns, config string) *dwdDeployment {
	t.Helper()
	ctx := context.Background()
	ensureSeedPriorityClass(t)
	d := &dwdDeployment{role: role, ns: ns, name: "dependency-watchdog-" + string(role)}
	app := map[string]string{"app": d.name}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: ns}, AutomountServiceAccountToken: ptr.To(false)}
	clusterRules, nsRules := gardenletRules(role)
	// gardenlet names both "gardener.cloud:dependency-watchdog-<role>"; the cluster-scoped
	// ones get the test's namespace added.
	rbacName := "gardener.cloud:" + d.name
	clusterName := rbacName + ":" + ns
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: d.name, Namespace: ns}}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: clusterName}, Rules: clusterRules}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: clusterName}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterName}}
	r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: rbacName, Namespace: ns}, Rules: nsRules}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rbacName, Namespace: ns}, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: rbacName}}
	data := map[string]string{"dep-config.yaml": config}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: gardenletConfigMapName(d.name+"-config", data), Namespace: ns,
			Labels: map[string]string{"app": d.name, "resources.gardener.cloud/garbage-collectable-reference": "true"}},
		Immutable: ptr.To(true),
		Data:      data,
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), clusterName, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), clusterName, metav1.DeleteOptions{})
	})
	for what, create := range map[string]func() error{
		"ServiceAccount": func() error {
			_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
			return err
		},
		"ClusterRole": func() error {
			_, err := kube.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{})
			return err
		},
		"ClusterRoleBinding": func() error {
			_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
			return err
		},
		"Role": func() error { _, err := kube.RbacV1().Roles(ns).Create(ctx, r, metav1.CreateOptions{}); return err },
		"RoleBinding": func() error {
			_, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{})
			return err
		},
		"ConfigMap": func() error {
			_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil {
			t.Fatalf("creating gardenlet's %s for %s: %v", what, d.name, err)
		}
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: ns,
			Labels:      map[string]string{"app": d.name, "high-availability-config.resources.gardener.cloud/type": "controller"},
			Annotations: map[string]string{"reference.resources.gardener.cloud/configmap-" + shortSHA(cm.Name): cm.Name}},
		Spec: appsv1.DeploymentSpec{
			Replicas:             ptr.To(int32(dwdReplicas)),
			RevisionHistoryLimit: ptr.To(int32(2)),
			Selector:             &metav1.LabelSelector{MatchLabels: app},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: gardenletPodLabels(d.name), Annotations: map[string]string{"reference.resources.gardener.cloud/configmap-" + shortSHA(cm.Name): cm.Name}},
				Spec:       gardenletDWDPod(d, cm.Name),
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating gardenlet's Deployment %s: %v", d.name, err)
	}
	t.Logf("gardenlet's %s (gardener %s) in %s with image %s, ConfigMap %s", d.name, gardenerVersion, ns, depwatchImage, cm.Name)
	t.Cleanup(func() { dumpIfFailed(t); d.logTail(t) }) // before the namespace, and the log, go
	mustKubectl(t, "-n", ns, "rollout", "status", "deployment/"+d.name, "--timeout=120s")
	waitFor(t, time.Minute, "the Lease "+d.lease()+" to be held", func() (bool, error) {
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, d.lease(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && ptr.Deref(l.Spec.HolderIdentity, "") != "", err
	})
	return d
}

func shortSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:8]
}

// gardenletPodLabels are bootstrap.go's getPodLabels (the network policy labels a seed's
// NetworkPolicies match; the lab has none to match them).
func gardenletPodLabels(name string) map[string]string {
	l := map[string]string{"app": name,
		"networking.gardener.cloud/to-dns":               "allowed",
		"networking.gardener.cloud/to-runtime-apiserver": "allowed",
	}
	if name == "dependency-watchdog-prober" {
		l["networking.gardener.cloud/to-public-networks"] = "allowed"
		l["networking.gardener.cloud/to-private-networks"] = "allowed"
	}
	return l
}

// gardenletDWDPod is bootstrap.go's pod template with the lab's deviations, each marked:
//
//   - the lab has no kube-proxy: the pod runs on the host network and reaches the API server
//     on loopback (KUBERNETES_SERVICE_HOST/PORT), as every lab pod that calls it;
//   - on the host network the pods share the node's ports: each replica's /metrics and
//     /healthz listen on a loopback port the kernel picks (port 0, through their flags'
//     variables DEPWATCH_METRICS_BIND_ADDR, DEPWATCH_HEALTH_BIND_ADDR; the test reads it from
//     the pod's "Serving /metrics." line), and the metrics port is not declared (on the host
//     network a declared port is a host port, and two replicas could not share the node);
//     the command stays gardenlet's;
//   - the ServiceAccount says automountServiceAccountToken: false and on a seed
//     gardener-resource-manager's webhook projects the token (volume kube-api-access-gardener);
//     the lab has no gardener-resource-manager, so the pod carries that volume itself.
func gardenletDWDPod(d *dwdDeployment, configMap string) corev1.PodSpec {
	return corev1.PodSpec{
		PriorityClassName:             "gardener-system-800",
		ServiceAccountName:            d.name,
		TerminationGracePeriodSeconds: ptr.To(int64(5)),
		HostNetwork:                   true, // lab deviation: no kube-proxy
		Containers: []corev1.Container{{
			Name:            "dependency-watchdog",
			Image:           depwatchImage, // the one change a seed's operator makes (image vector overwrite)
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         gardenletCommand(d.role),
			Env: []corev1.EnvVar{ // lab deviations: no kube-proxy, shared host ports
				{Name: "KUBERNETES_SERVICE_HOST", Value: apiServerHost},
				{Name: "KUBERNETES_SERVICE_PORT", Value: apiServerPort},
				{Name: "DEPWATCH_METRICS_BIND_ADDR", Value: "127.0.0.1:0"},
				{Name: "DEPWATCH_HEALTH_BIND_ADDR", Value: "127.0.0.1:0"},
			},
			// lab deviation: gardenlet declares port 9643 (metrics); on the host network a
			// declared port is a host port the scheduler reserves, so two replicas could not
			// share the node.
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
			}},
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/dependency-watchdog/config", ReadOnly: true},
				{Name: "kube-api-access-gardener", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}, // lab deviation: the projected token
			},
		}},
		Volumes: []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}},
			// lab deviation: what gardener-resource-manager's projected-token-mount webhook adds.
			{Name: "kube-api-access-gardener", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To(int32(420)),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To(int64(43200)), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
						FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}, Path: "namespace"}}}},
				},
			}}},
		},
	}
}

// pods are the Deployment's pods, by name.
func (d *dwdDeployment) pods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := kube.CoreV1().Pods(d.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + d.name})
	if err != nil {
		t.Fatalf("listing the pods of %s: %v", d.name, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// podLog is one replica's log as it is now.
func (d *dwdDeployment) podLog(t *testing.T, pod string) string {
	t.Helper()
	out, _ := kubectl(t, "-n", d.ns, "logs", "pod/"+pod, "--tail=-1")
	return out
}

// log is every replica's log as it is now, one after the other: only the leader acts, so the
// lines about the work are one replica's, in its order.
func (d *dwdDeployment) log(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, p := range d.pods(t) {
		b.WriteString(d.podLog(t, p.Name))
		b.WriteString("\n")
	}
	return b.String()
}

// logTail puts the end of every replica's log into a failed test's output.
func (d *dwdDeployment) logTail(t *testing.T) {
	if !t.Failed() {
		return
	}
	for _, p := range d.pods(t) {
		out, _ := kubectl(t, "-n", d.ns, "logs", "pod/"+p.Name, "--tail=80")
		t.Logf("the last lines of %s/%s's log:\n%s", d.ns, p.Name, out)
	}
}

// metricsOf is a replica's /metrics endpoint, on the loopback port it says it serves on.
func (d *dwdDeployment) metricsOf(t *testing.T, pod string, lines []logLine) *deployedCoordinator {
	t.Helper()
	l, ok := findLine(lines, map[string]string{"msg": "Serving /metrics."})
	if !ok {
		t.Fatalf("%s says nowhere where it serves /metrics", pod)
	}
	port := mustPort(l.str("addr"))
	if port == 0 {
		t.Fatalf("%s serves /metrics on %q", pod, l.str("addr"))
	}
	return &deployedCoordinator{name: pod, metrics: port}
}

// waitLine waits for a line of the pod's log that match says is the one, and returns the
// log's lines and its index.
func (d *dwdDeployment) waitLine(t *testing.T, timeout time.Duration, what string, match func(logLine) bool) ([]logLine, int) {
	t.Helper()
	var lines []logLine
	at := -1
	waitFor(t, timeout, what+" in the log of "+d.ns+"/"+d.name, func() (bool, error) {
		lines = parseLogLines(d.log(t))
		for i, l := range lines {
			if match(l) {
				at = i
				return true, nil
			}
		}
		return false, nil
	})
	return lines, at
}

// assertInProcessAndNeverRefused: each replica says, in its first lines and in its metric,
// that the runs are carried out in-process; exactly one leads; none restarted; no request of
// theirs was refused (a "forbidden" anywhere in a log fails the test: gardenlet's RBAC must be
// enough), and none logged an error (a standby that lost the race to create the Lease says
// so at info; an on-call who greps a healthy seed's logs for errors finds none).
func (d *dwdDeployment) assertInProcessAndNeverRefused(t *testing.T) {
	t.Helper()
	pods := d.pods(t)
	if len(pods) != dwdReplicas {
		t.Errorf("%s has %d pods, want %d", d.name, len(pods), dwdReplicas)
	}
	leaders := 0
	for _, p := range pods {
		out := d.podLog(t, p.Name)
		lines := parseLogLines(out)
		first := -1
		for i, l := range lines {
			if l.str("executor") == "in-process" {
				first = i
				break
			}
		}
		if first < 0 || first > 3 {
			t.Errorf("the executor is not said in the first lines of %s's log (line %d)", p.Name, first)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				t.Errorf("%s was refused a request under gardenlet's RBAC: %s", p.Name, line)
			}
		}
		for _, l := range lines {
			if lvl := l.str("level"); lvl == "error" || lvl == "fatal" || lvl == "panic" {
				t.Errorf("%s logged at %s level: %v", p.Name, lvl, l)
			}
		}
		c := d.metricsOf(t, p.Name, lines)
		if in, job := c.metric(t, `depwatch_coordinator_executor{kind="in-process"}`), c.metric(t, `depwatch_coordinator_executor{kind="job"}`); in != 1 || job != 0 {
			t.Errorf("%s: depwatch_coordinator_executor: in-process %v, job %v; want 1 and 0", p.Name, in, job)
		}
		if c.metric(t, "depwatch_coordinator_leader") == 1 {
			leaders++
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				t.Errorf("pod %s restarted %d times", p.Name, cs.RestartCount)
			}
		}
	}
	if leaders != 1 {
		t.Errorf("%d replicas of %s lead, want 1", leaders, d.name)
	}
}

// TestGardenletsDWDWeederOnDepwatchsImageRestartsTheDependentOnceEveryEndpointIsReady:
// gardenlet's dependency-watchdog-weeder Deployment with depwatch's image decides as
// dependency-watchdog v1.6+ does: a service is back when every endpoint is ready. A shoot's
// etcd-main-client has two members; its kube-apiserver stand-in works only once both do. The
// weeder is armed when the service goes down; with one member back (one of two endpoints
// ready) the crash-looping dependent is left to the kubelet, which restarts it itself; with
// both back the weeder restarts it before the kubelet's own back-off would have: in the
// Deployment's own pod (the weeder's log line deleting it names the run's Job), with no Job
// anywhere.
func TestGardenletsDWDWeederOnDepwatchsImageRestartsTheDependentOnceEveryEndpointIsReady(t *testing.T) {
	parallelLong(t, 6*time.Minute)
	ensureCoordinator(t) // the lab's coordinator runs beside; the shoot's label keeps it off
	garden := newNamespace(t, "dwdw-garden")
	// A private coordinator's label the lab's config leaves alone; no coordinator serves it:
	// only gardenlet's weeder acts in this namespace.
	shoot := newNamespaceLabelled(t, "dwdw-shoot", map[string]string{privateCoordinatorLabel: garden})
	d := deployGardenletDWD(t, dwdWeeder, garden, gardenletWeederConfigMap)

	// The second member is Ready while the gate serves; the dependent works only then too.
	gate := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	createDeployment(t, hostNetworkDeployment("gate", shoot, 1, nil, []string{"/testapp", "serve", gate}, gate))
	p := startPair(t, shoot, "etcd-main-client")
	second := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	createDeployment(t, hostNetworkDeployment("etcd-main-1", shoot, 1, map[string]string{"role": "etcd-main-client"},
		[]string{"/testapp", "serve", second}, gate))
	p.waitReadyEndpoints(2, 2, time.Minute)
	// kube-apiserver's pod as gardenlet's weeder config selects it for etcd-main-client.
	createDeployment(t, hostNetworkDeployment(dependentName, shoot, 1, map[string]string{"gardener.cloud/role": "controlplane", "role": "apiserver"},
		[]string{"/testapp", "depend", gate}, gate))
	p.waitDependentReady(time.Minute, "")

	p.scaleUpstream(0)
	scaleDeployment(t, shoot, "gate", 0)
	p.waitReadyEndpoints(0, 1, time.Minute)
	target := shoot + "/etcd-main-client"
	isArmed := func(l logLine) bool {
		return strings.HasPrefix(l.str("msg"), "Reaper armed at") && l.str("wait_for") == target
	}
	d.waitLine(t, time.Minute, "the armed weeder of "+target, isArmed)

	// One member back: one of two endpoints ready. The weeder leaves the dependent alone; the
	// kubelet's own restart of it comes, and it crash-loops on.
	half := p.waitCrashLoop(30*time.Second, 5*time.Minute)
	p.scaleUpstream(1)
	p.waitReadyEndpoints(1, 2, time.Minute)
	restarted := p.waitKubeletRestart(half, 6*time.Minute)
	for _, l := range parseLogLines(d.log(t)) {
		if l.str("namespace") == shoot && l.str("pod") == half.pod.Name && l.str("action") == "deleted" {
			t.Errorf("with one of two endpoints of %s ready, the weeder deleted pod %s (%v); dependency-watchdog waits until every endpoint is ready", target, half.pod.Name, l)
		}
	}
	t.Logf("one of two endpoints ready: the kubelet restarted %s itself (restart %d); the weeder did not", half.pod.Name, restarted)

	// Both members back: every endpoint ready, the service is back.
	cl := p.waitCrashLoop(30*time.Second, 6*time.Minute)
	scaleDeployment(t, shoot, "gate", 1)
	upAt := p.waitReadyEndpoints(2, 2, time.Minute)
	ready, readyAt := p.waitDependentReady(minWait, cl.pod.UID)
	t.Logf("etcd-main-client all Ready → dependent %s Ready: %s (a figure: the new pod's start is the node's speed)", ready.Name, readyAt.Sub(upAt).Round(10*time.Millisecond))

	// The actor: gardenlet's weeder pod, its in-process run of the armed weeder.
	lines, deleted := d.waitLine(t, 30*time.Second, "the crash-looping pod deleted", func(l logLine) bool {
		return l.str("namespace") == shoot && l.str("pod") == cl.pod.Name && l.str("action") == "deleted"
	})
	armedAt := slices.IndexFunc(lines, isArmed) // in the same read of the log
	if armedAt < 0 {
		t.Fatalf("the armed line of %s is gone from the log", target)
	}
	armed := lines[armedAt]
	if deleted < armedAt {
		t.Errorf("the pod was deleted (line %d) before the weeder was armed (line %d)", deleted, armedAt)
	}
	// Under gardenlet's RBAC the weeder reads no Services: a service whose endpoints are all
	// gone counts as gone, its armed run stops, and the return starts a run of its own. Either
	// is this pod's in-process run, named as a Job in garden would be.
	if job := lines[deleted].str("job"); job == "" || !strings.HasPrefix(job, garden+"/weeder-") || lines[deleted].str("executor") != "in-process" {
		t.Errorf("the delete was made by run %q (executor %q; the armed weeder is %q): want an in-process run of this pod, named as a Job in %s", job, lines[deleted].str("executor"), armed.str("job"), garden)
	}
	// The verdict, from the delete's own log line: before the kubelet's restart was due.
	if at, err := time.Parse(time.RFC3339, lines[deleted].str("time")); err != nil || !at.Before(cl.kubeletRestart) {
		t.Errorf("the crash-looping pod was deleted at %q, not before the kubelet's own restart of it at %s (%v)", lines[deleted].str("time"), clock(cl.kubeletRestart), err)
	}
	if js := p.weederJobs(); len(js) > 0 {
		t.Errorf("weeder Jobs cover %s: %v; gardenlet's weeder may create none", target, jobNames(js))
	}
	if list, err := kube.BatchV1().Jobs(garden).List(context.Background(), metav1.ListOptions{}); err != nil || len(list.Items) > 0 {
		t.Errorf("Jobs in %s: %v (%v)", garden, list, err)
	}
	d.assertInProcessAndNeverRefused(t)
}

func createDeployment(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	if _, err := kube.AppsV1().Deployments(dep.Namespace).Create(context.Background(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment %s/%s: %v", dep.Namespace, dep.Name, err)
	}
}

// waitReadyEndpoints waits until the pair's service has exactly ready ready endpoints of
// total (terminating ones left out), and returns when it saw that.
func (p *pair) waitReadyEndpoints(ready, total int, timeout time.Duration) time.Time {
	p.t.Helper()
	waitFor(p.t, timeout, fmt.Sprintf("service %s/%s with %d of %d endpoints ready", p.ns, p.svc, ready, total), func() (bool, error) {
		slices, err := kube.DiscoveryV1().EndpointSlices(p.ns).List(context.Background(), metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=" + p.svc,
		})
		if err != nil {
			return false, err
		}
		r, n := 0, 0
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if ptr.Deref(e.Conditions.Terminating, false) {
					continue
				}
				n++
				if ptr.Deref(e.Conditions.Ready, true) {
					r++
				}
			}
		}
		return r == ready && n == total, nil
	})
	return time.Now()
}

// waitKubeletRestart waits until the kubelet restarted cl's container in its pod (the same
// pod, a higher restart count) and returns the restart count. A pod deleted or replaced
// meanwhile fails the test: someone other than the kubelet acted.
func (p *pair) waitKubeletRestart(cl crashLoop, timeout time.Duration) int32 {
	p.t.Helper()
	var restarts int32
	waitFor(p.t, timeout, fmt.Sprintf("the kubelet to restart %s/%s itself", p.ns, cl.pod.Name), func() (bool, error) {
		pod, err := kube.CoreV1().Pods(p.ns).Get(context.Background(), cl.pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && (pod.UID != cl.pod.UID || pod.DeletionTimestamp != nil)) {
			p.t.Fatalf("pod %s was deleted before the kubelet restarted it: someone other than the kubelet acted", cl.pod.Name)
		}
		if err != nil {
			return false, err
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == cl.container && cs.RestartCount > cl.restarts {
				restarts = cs.RestartCount
				return true, nil
			}
		}
		return false, nil
	})
	return restarts
}

// TestGardenletsDWDProberOnDepwatchsImageScalesTheControlPlaneDownAndUpInLevelOrder:
// gardenlet's dependency-watchdog-prober Deployment with depwatch's image, on a shoot (its
// Cluster, its namespace labelled gardener.cloud/role=shoot, gardenlet's Secret) whose node
// leases expired (3 of 4), scales the control plane down in the config's level order
// (machine-controller-manager and cluster-autoscaler, then kube-controller-manager), keeping
// the replicas and meltdown annotations; once the leases are renewed, it scales back up in the
// scale-up order (kube-controller-manager, machine-controller-manager, cluster-autoscaler) to
// the kept replicas and removes the annotations. Its own pod does it, with no Job.
func TestGardenletsDWDProberOnDepwatchsImageScalesTheControlPlaneDownAndUpInLevelOrder(t *testing.T) {
	parallelLong(t, 5*time.Minute)
	selectsEveryShoot(t)
	s := newProbeScenario(t, "dwdp-shoot", probeSetup{expired: []string{"w1", "w2", "w3"}})
	// gardenlet's Secret name; the scenario's own goes, so no other test's prober (they use
	// shoot-kubeconfig) can probe this namespace, and this prober probes no one else's.
	sec, err := kube.CoreV1().Secrets(s.ns).Get(context.Background(), probeSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: gardenletProbeSecret, Namespace: s.ns}, Data: sec.Data}
	if _, err := kube.CoreV1().Secrets(s.ns).Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Secrets(s.ns).Delete(context.Background(), probeSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A seed has a Cluster per shoot; this one is settled and has workers.
	ensureClusterCRD(t)
	applyCluster(t, s.ns, upstream.Shoot{OpType: "Reconcile", OpState: "Succeeded"})
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "cluster.extensions.gardener.cloud", s.ns, "--ignore-not-found") })

	garden := newNamespace(t, "dwdp-garden")
	d := deployGardenletDWD(t, dwdProber, garden, gardenletProberConfigMap)
	t.Cleanup(func() { _, _ = kubectl(t, "label", "namespace", s.ns, "gardener.cloud/role-") })
	mustKubectl(t, "label", "namespace", s.ns, "gardener.cloud/role=shoot")

	// Hang catchers from the config: the first probe after initialDelay plus a jittered
	// interval, a shard's run hand-over, and every level's timeout.
	downBy := dwdInitialDelay + 2*time.Duration(float64(gardenletProbeInterval)*(1+dwdJitter)) + depwatchProbeRunDuration + 3*dwdProbeTimeout
	for _, name := range []string{mcm, ca, kcm} {
		s.waitReplicas(name, 0, downBy)
	}
	for _, name := range dependents {
		dep := s.deployment(name)
		// The meltdown annotation's value is empty, as dependency-watchdog writes it: its
		// presence is what counts.
		if _, meltdown := dep.Annotations[annMeltdown]; dep.Annotations[annReplicas] != fmt.Sprint(dependentReplicas) || !meltdown {
			t.Errorf("%s scaled down without the replicas (%q) or meltdown (present: %v) annotation", name, dep.Annotations[annReplicas], meltdown)
		}
	}
	lines := d.shootLines(t, s.ns)
	assertOrderOf(t, "scale-down (levels: machine-controller-manager and cluster-autoscaler, then kube-controller-manager)", lines,
		// A level an earlier probe set to 0 before its run ended is found already-down, and
		// waited for, by the next one.
		[]map[string]string{{"name": mcm, "action": "scaled-down"}, {"name": mcm, "action": "ready|already-down"}, {"name": kcm, "action": "scaled-down"}},
		[]map[string]string{{"name": ca, "action": "scaled-down"}, {"name": ca, "action": "ready|already-down"}, {"name": kcm, "action": "scaled-down"}})
	d.assertActor(t, lines, map[string]string{"name": kcm, "action": "scaled-down"})

	s.setRenewing(true, "w1", "w2", "w3")
	upBy := 2*time.Duration(float64(gardenletProbeInterval)*(1+dwdJitter)) + depwatchProbeRunDuration + 30*time.Second + 3*dwdProbeTimeout // + machine-controller-manager's initialDelay
	for _, name := range []string{kcm, mcm, ca} {
		s.waitReplicas(name, dependentReplicas, upBy)
	}
	lines = d.shootLines(t, s.ns)
	assertOrderOf(t, "scale-up (levels: kube-controller-manager, machine-controller-manager, cluster-autoscaler)", lines,
		[]map[string]string{{"name": kcm, "action": "scaled-up"}, {"name": kcm, "action": "ready", "reason": "a replica is ready"},
			{"name": mcm, "action": "scaled-up"}, {"name": mcm, "action": "ready", "reason": "a replica is ready"}, {"name": ca, "action": "scaled-up"}})
	d.assertActor(t, lines, map[string]string{"name": ca, "action": "scaled-up"})
	waitFor(t, 2*dwdProbeTimeout, "the scale-down annotations removed", func() (bool, error) {
		for _, name := range dependents {
			dep := s.deployment(name)
			if _, meltdown := dep.Annotations[annMeltdown]; dep.Annotations[annReplicas] != "" || meltdown {
				return false, nil
			}
		}
		return true, nil
	})
	if js := s.probeJobs(); len(js) > 0 {
		t.Errorf("probe Jobs cover %s (%s first): gardenlet's prober may create none, and the lab's coordinator does not select it", s.ns, js[0].Name)
	}
	d.assertInProcessAndNeverRefused(t)
}

// shootLines are the prober pod's log lines about namespace ns.
func (d *dwdDeployment) shootLines(t *testing.T, ns string) []logLine {
	t.Helper()
	var out []logLine
	for _, l := range parseLogLines(d.log(t)) {
		if l.str("namespace") == ns {
			out = append(out, l)
		}
	}
	return out
}

// assertActor: the line that want matches was written by an in-process run of this pod, a
// Job named in its namespace.
func (d *dwdDeployment) assertActor(t *testing.T, lines []logLine, want map[string]string) {
	t.Helper()
	l, ok := findLine(lines, want)
	switch {
	case !ok:
		t.Errorf("no line %v in %s's log", want, d.name)
	case !strings.HasPrefix(l.str("job"), d.ns+"/probe-") || l.str("executor") != "in-process":
		t.Errorf("line %v was not written by an in-process probe run of %s: job %q, executor %q", want, d.name, l.str("job"), l.str("executor"))
	}
}

// assertOrderOf checks each chain: the first line matching each of its steps comes after the
// first matching the step before.
func assertOrderOf(t *testing.T, what string, lines []logLine, chains ...[]map[string]string) {
	t.Helper()
	for _, chain := range chains {
		last := -1
		for _, want := range chain {
			i := lineIndex(lines, want)
			switch {
			case i < 0:
				t.Errorf("%s: no line %v", what, want)
				return
			case i < last:
				t.Errorf("%s: %v (line %d) came before the step preceding it (line %d)", what, want, i, last)
			}
			last = i
		}
	}
}
