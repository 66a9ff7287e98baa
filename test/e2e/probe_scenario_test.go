//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/test/upstream"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// The probe scenarios treat the local cluster as the "shoot" of itself: a Secret holds a
// kubeconfig that reaches the local API server on loopback, Deployments stand in for the
// control plane's dependents, and fake Node objects (no kubelet; unschedulable and tainted so
// nothing lands on them) with Leases the test renews stand in for worker nodes. The real node
// `localhost` stays healthy (its kubelet renews its own lease), so Jobs keep running.
const (
	probeLabel        = "depwatch.io/e2e-probe" // the local overlay's prober namespaceSelector
	probeSecret       = "shoot-kubeconfig"      // its kubeConfigSecretName
	kcm               = "kube-controller-manager"
	mcm               = "machine-controller-manager"
	ca                = "cluster-autoscaler"
	annReplicas       = "dependency-watchdog.gardener.cloud/replicas"
	annMeltdown       = "dependency-watchdog.gardener.cloud/meltdown-protection-active"
	annIgnoreScaling  = "dependency-watchdog.gardener.cloud/ignore-scaling"
	fakeNodeTaint     = "depwatch.io/e2e-fake-node"
	nodeLeaseNS       = "kube-node-lease"
	dependentReplicas = 2
)

var dependents = []string{kcm, mcm, ca}

type probeScenario struct {
	t     *testing.T
	ns    string
	nodes []string

	mu    sync.Mutex
	renew map[string]bool // node → the test keeps renewing its lease
	logs  map[string]string
	final map[string]bool // Jobs whose log was read after they finished
	order []string        // Job names in the order their logs were first collected
	// joined: running shard Jobs the namespace joined (their membership listed it)
	joined map[string]bool
}

type probeSetup struct {
	kubeconfig string   // the Secret's kubeconfig; "" = the admin kubeconfig, flattened
	expired    []string // fake nodes whose leases start expired and are not renewed
	noWorkload bool     // no Secret, Deployments or nodes (hibernation scenario)
}

// newProbeScenario builds everything but does not label the namespace: start() does, and
// the prober sees it from then on.
func newProbeScenario(t *testing.T, prefix string, setup probeSetup) *probeScenario {
	t.Helper()
	ensureCoordinator(t)
	ns := newNamespace(t, prefix)
	s := &probeScenario{t: t, ns: ns, renew: map[string]bool{}, logs: map[string]string{}, final: map[string]bool{}, joined: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		dumpIfFailed(t) // before the probe Jobs and their logs go
		// Stop probing first, then remove the Jobs, the renewer, the nodes and leases.
		_, _ = kubectl(t, "label", "namespace", ns, probeLabel+"-")
		cancel()
		wg.Wait()
		// Only the Jobs that probed this namespace alone: a shard's Job probes the other
		// tests' namespaces too, and they read its log and rely on its scaling.
		for _, j := range s.probeJobs() {
			if covers := jobs.ReadFacts(&j).Namespaces; len(covers) == 0 || slices.Equal(covers, []string{ns}) {
				_ = kube.BatchV1().Jobs(depwatchNS).Delete(context.Background(), j.Name,
					metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
			}
		}
		for _, n := range s.nodes {
			_ = kube.CoordinationV1().Leases(nodeLeaseNS).Delete(context.Background(), n, metav1.DeleteOptions{})
			_ = kube.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	wg.Add(1)
	go func() { defer wg.Done(); s.collectLogs(ctx) }()
	if setup.noWorkload {
		return s
	}

	kc := setup.kubeconfig
	if kc == "" {
		kc = mustKubectl(t, "config", "view", "--raw", "--flatten", "--minify")
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: probeSecret},
		Data:       map[string][]byte{"kubeconfig": []byte(kc)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the kubeconfig Secret: %v", err)
	}
	for _, name := range dependents {
		if _, err := kube.AppsV1().Deployments(ns).Create(context.Background(), sleeper(name, ns), metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating deployment %s: %v", name, err)
		}
	}
	expired := map[string]bool{}
	for _, i := range setup.expired {
		expired[i] = true
	}
	// The seed is a Gardener seed: the Machine kind exists (installed once, kept), and each
	// fake node has a Running Machine in the namespace, so its lease counts as
	// dependency-watchdog counts it. Every scenario does this, whichever test installed the
	// kind first; a node of another scenario (no Machine here) does not count here.
	ensureMachineCRD(t)
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("%s-w%d", ns, i)
		s.createFakeNode(name, expired[fmt.Sprintf("w%d", i)])
		s.nodes = append(s.nodes, name)
		s.renew[name] = !expired[fmt.Sprintf("w%d", i)]
		s.setMachine(name, "Running")
	}
	wg.Add(1)
	go func() { defer wg.Done(); s.renewLeases(ctx) }()
	for _, name := range dependents {
		s.waitReplicas(name, dependentReplicas, 90*time.Second)
	}
	return s
}

// sleeper is a Deployment of testapp sleeping, ready at once, stopping at once.
func sleeper(name, ns string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(dependentReplicas)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(0)),
					Containers: []corev1.Container{{
						Name: "app", Image: testappImage, ImagePullPolicy: corev1.PullNever,
						Command: []string{"/testapp", "sleep"},
					}},
				},
			},
		},
	}
}

func (s *probeScenario) createFakeNode(name string, expired bool) {
	s.t.Helper()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"depwatch.io/e2e": "fake-node"}},
		Spec: corev1.NodeSpec{
			Unschedulable: true,
			Taints:        []corev1.Taint{{Key: fakeNodeTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	if _, err := kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("creating fake node %s: %v", name, err)
	}
	renew := time.Now()
	if expired {
		renew = renew.Add(-5 * time.Minute)
	}
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nodeLeaseNS},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(name),
			LeaseDurationSeconds: ptr.To(int32(40)),
			RenewTime:            &metav1.MicroTime{Time: renew},
		},
	}
	if _, err := kube.CoordinationV1().Leases(nodeLeaseNS).Create(context.Background(), lease, metav1.CreateOptions{}); err != nil {
		s.t.Fatalf("creating the lease of fake node %s: %v", name, err)
	}
}

// renewLeases renews, every second, the leases of the fake nodes marked for renewal.
func (s *probeScenario) renewLeases(ctx context.Context) {
	everyTick(ctx, time.Second, func() {
		s.mu.Lock()
		var names []string
		for n, on := range s.renew {
			if on {
				names = append(names, n)
			}
		}
		s.mu.Unlock()
		for _, n := range names {
			patch := fmt.Sprintf(`{"spec":{"renewTime":%q}}`, metav1.NowMicro().UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
			_, _ = kube.CoordinationV1().Leases(nodeLeaseNS).Patch(ctx, n, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
	})
}

// everyTick calls f every period until ctx ends.
func everyTick(ctx context.Context, period time.Duration, f func()) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f()
	}
}

// setRenewing starts or stops renewing the leases of the given fake nodes (w1..w4).
func (s *probeScenario) setRenewing(on bool, workers ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range workers {
		s.renew[s.ns+"-"+w] = on
	}
}

// start labels the namespace: the prober selects it from now on.
func (s *probeScenario) start() time.Time {
	s.t.Helper()
	mustKubectl(s.t, "label", "namespace", s.ns, probeLabel+"=true")
	return time.Now()
}

// probeJobs are the probe Jobs that probe (or probed) the namespace: those launched with it
// (their label names it), and a shard's running Job it joined later (its membership
// ConfigMap lists it), kept once seen so that its log is collected to the end.
func (s *probeScenario) probeJobs() []batchv1.Job {
	ctx := context.Background()
	list, err := kube.BatchV1().Jobs(depwatchNS).List(ctx, metav1.ListOptions{LabelSelector: "depwatch.io/kind=probe"})
	if err != nil {
		return nil
	}
	member := map[string]bool{} // membership ConfigMaps that list the namespace now
	if cms, err := kube.CoreV1().ConfigMaps(depwatchNS).List(ctx, metav1.ListOptions{LabelSelector: "depwatch.io/kind=probe"}); err == nil {
		for _, cm := range cms.Items {
			if m, err := probe.ParseMembership(cm.Data); err == nil && slices.Contains(m.Namespaces, s.ns) {
				member[cm.Name] = true
			}
		}
	}
	var out []batchv1.Job
	s.mu.Lock()
	for _, j := range list.Items {
		follows := member[jobs.ReadFacts(&j).Membership] && !jobDone(&j)
		if j.Labels[jobs.ProbeLabel(s.ns)] == "true" || follows || s.joined[j.Name] {
			out = append(out, j)
			s.joined[j.Name] = s.joined[j.Name] || follows
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp) })
	return out
}

// report waits for a finished probe Job whose termination message reports a probe of the
// namespace and returns that message, the newest Job's first. A running Job has no message
// yet; a shard's Job the namespace joined near its end may have ended before its first probe
// and reports it "not-probed", which is waited past; and the coordinator keeps few finished
// Jobs (the lab one successful Job), so a Job listed a moment ago may be gone with its pod:
// that is waited past too, not an error.
func (s *probeScenario) report(timeout time.Duration) string {
	s.t.Helper()
	var msg string
	waitFor(s.t, timeout, "a finished probe Job's termination message naming "+s.ns, func() (bool, error) {
		probeJobs := s.probeJobs()
		for i := len(probeJobs) - 1; i >= 0; i-- {
			if !jobs.Finished(&probeJobs[i]) {
				continue
			}
			pods, err := kube.CoreV1().Pods(depwatchNS).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + probeJobs[i].Name})
			if err != nil {
				continue
			}
			for _, pod := range pods.Items {
				m := podTerminationMessage(pod)
				rep, err := probe.DecodeReport(m)
				if err != nil {
					continue
				}
				if r, ok := rep.Namespaces[s.ns]; ok && r.Last != probe.ResultNotProbed {
					msg = m
					return true, nil
				}
			}
		}
		return false, nil
	})
	return msg
}

// collectLogs keeps the log of every probe Job of the namespace: a running one's is read
// again on every round (a shard's Job probes for probeJobRunDuration, its lines come as it
// goes), a finished one's once more and then kept: the coordinator removes finished Jobs
// beyond the history limit within an interval or two.
func (s *probeScenario) collectLogs(ctx context.Context) {
	for ctx.Err() == nil {
		for _, j := range s.probeJobs() {
			s.mu.Lock()
			done := s.final[j.Name]
			s.mu.Unlock()
			if done {
				continue
			}
			finished := jobDone(&j)
			pods, err := kube.CoreV1().Pods(depwatchNS).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + j.Name})
			if err != nil || len(pods.Items) == 0 {
				continue
			}
			var b strings.Builder
			complete := true // every pod's log read whole: only then is a finished Job's log final
			for _, p := range pods.Items {
				data, err := podLog(ctx, p.Name)
				complete = complete && err == nil
				b.Write(data)
			}
			s.mu.Lock()
			if _, seen := s.logs[j.Name]; !seen {
				s.order = append(s.order, j.Name)
			}
			if b.Len() >= len(s.logs[j.Name]) { // a failed read does not shorten what was read before
				s.logs[j.Name] = b.String()
			}
			s.final[j.Name] = finished && complete
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// podLog reads a depwatch pod's log as it is now, within 10 seconds.
func podLog(ctx context.Context, pod string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc, err := kube.CoreV1().Pods(depwatchNS).GetLogs(pod, &corev1.PodLogOptions{}).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func jobDone(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// collected returns the collected logs, oldest Job first.
func (s *probeScenario) collected() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.order))
	for _, n := range s.order {
		out = append(out, s.logs[n])
	}
	return out
}

// waitLog waits for a collected probe log with a line whose fields have the given values,
// and returns the lines of that probe (of this namespace, with the same probe number).
func (s *probeScenario) waitLog(timeout time.Duration, want map[string]string) []logLine {
	s.t.Helper()
	var found []logLine
	waitFor(s.t, timeout, fmt.Sprintf("a probe Job log with %v", want), func() (bool, error) {
		for _, l := range s.collected() {
			// A probe Job covers a shard of namespaces: this scenario's lines are those naming it.
			var lines []logLine
			for _, line := range parseLogLines(l) {
				if line.str("namespace") == s.ns {
					lines = append(lines, line)
				}
			}
			if m, ok := findLine(lines, want); ok {
				// A Job probes for probeJobRunDuration: keep the lines of the probe that
				// matched (scale-down and scale-up may both be in one Job's log).
				// A running Job's log is read as it grows: the probe counts only once its
				// last line ("Probe done" or "No scaling decision") is there.
				found = nil
				complete := false
				for _, line := range lines {
					if fmt.Sprint(line["probe"]) == fmt.Sprint(m["probe"]) {
						found = append(found, line)
						msg := line.str("msg")
						complete = complete || strings.HasPrefix(msg, "Probe done") || strings.HasPrefix(msg, "No scaling decision")
					}
				}
				if complete {
					return true, nil
				}
			}
		}
		return false, nil
	})
	return found
}

func (s *probeScenario) deployment(name string) *appsv1.Deployment {
	s.t.Helper()
	d, err := kube.AppsV1().Deployments(s.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatalf("reading deployment %s: %v", name, err)
	}
	return d
}

// waitReplicas waits until the Deployment wants n replicas and has n ready (0: none left).
func (s *probeScenario) waitReplicas(name string, n int32, timeout time.Duration) {
	s.t.Helper()
	waitFor(s.t, timeout, fmt.Sprintf("deployment %s/%s at %d ready replicas", s.ns, name, n), func() (bool, error) {
		return s.atReplicas(name, n)
	})
}

// atReplicas: the Deployment wants n replicas and has n ready (0: none left).
func (s *probeScenario) atReplicas(name string, n int32) (bool, error) {
	d, err := kube.AppsV1().Deployments(s.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return d.Spec.Replicas != nil && *d.Spec.Replicas == n && d.Status.ReadyReplicas == n && d.Status.Replicas == n, nil
}

// phase waits until this namespace's lines of a decision ("scale-down", "scale-up": the
// decision line and the actions carried out for it) logged at or after since include one with want's fields, and returns all of them, from every probe
// Job, in time order. One scaling is one sequence of actions even when it spans probes: a
// Job's run can end while it waits for a level to be ready (a pod starts late on a loaded
// machine), and the next Job's probe continues from there. timeout only catches a hang.
func (s *probeScenario) phase(timeout time.Duration, decision string, since time.Time, want map[string]string) []logLine {
	s.t.Helper()
	from := since.Truncate(time.Second) // the lines' times have whole seconds
	var found []logLine
	waitFor(s.t, timeout, fmt.Sprintf("a %s line with %v since %s", decision, want, from.Format(time.TimeOnly)), func() (bool, error) {
		found = nil
		for _, l := range s.collected() {
			for _, line := range parseLogLines(l) {
				at, err := time.Parse(time.RFC3339, line.str("time"))
				if err == nil && line.str("namespace") == s.ns && (line.str("decision") == decision || line.str("action") == decision) && !at.Before(from) {
					found = append(found, line)
				}
			}
		}
		// Stable: a Job's own lines keep their order within a second.
		sort.SliceStable(found, func(i, j int) bool { return found[i].str("time") < found[j].str("time") })
		return lineIndex(found, want) >= 0, nil
	})
	return found
}

// lineIndex is the index of the first line with the given fields, or -1. A wanted value may
// name alternatives: "ready|already-down".
func lineIndex(lines []logLine, want map[string]string) int {
	for i, l := range lines {
		match := true
		for k, v := range want {
			if !slices.Contains(strings.Split(v, "|"), l.str(k)) {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

func deleteIfExists(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// stubCRD is a minimal stand-in for another project's CRD (Gardener's Cluster, MCM's
// Machine): any fields, no status subresource, so tests set status directly.
func stubCRD(group, kind, plural, scope string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  scope: %[4]s
  names: {plural: %[3]s, singular: %[5]s, kind: %[2]s, listKind: %[2]sList}
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`, group, kind, plural, scope, strings.ToLower(kind))
}

var crdMu sync.Mutex

// ensureCRD applies a CRD (idempotent) and waits until it is served. CRDs are cluster-wide
// and other tests may rely on them: they are never deleted.
func ensureCRD(t *testing.T, name, doc string) {
	t.Helper()
	crdMu.Lock()
	defer crdMu.Unlock()
	applyYAML(t, doc)
	mustKubectl(t, "wait", "--for=condition=Established", "crd/"+name, "--timeout=30s")
}

func ensureMachineCRD(t *testing.T) {
	ensureCRD(t, "machines.machine.sapcloud.io", stubCRD("machine.sapcloud.io", "Machine", "machines", "Namespaced"))
}

func ensureClusterCRD(t *testing.T) {
	ensureCRD(t, "clusters.extensions.gardener.cloud", stubCRD("extensions.gardener.cloud", "Cluster", "clusters", "Cluster"))
}

// applyYAML applies a document with kubectl.
func applyYAML(t *testing.T, doc string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "doc.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "apply", "-f", f)
}

// setMachine creates or updates the Machine "machine-<node>" in the scenario's namespace,
// labelled node=<node>, in the given phase: MCM's Machine as the unit tests build it
// (test/upstream, written from MCM's types).
func (s *probeScenario) setMachine(node, phase string) {
	s.t.Helper()
	doc, err := json.Marshal(upstream.MachineFor(s.ns, node, phase).Object) // JSON is YAML
	if err != nil {
		s.t.Fatalf("writing the Machine of %s: %v", node, err)
	}
	applyYAML(s.t, string(doc))
}
