package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	scalefake "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/depwatch/depwatch/test/upstream"
)

// The test control plane: namespace, Secret, and the kinds the fake RESTMapper knows.
const (
	testNS         = "shoot--proj--dev"
	testSecret     = "dwd-probe-kubeconfig"
	testKubeconfig = "apiVersion: v1\nkind: Config\n# a kubeconfig the fake factory accepts\n"
)

var (
	gvrDeployments  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrStatefulSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	gvrWidgets      = schema.GroupVersionResource{Group: "example.io", Version: "v1", Resource: "widgets"}
	testNow         = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
)

// scaleOp is one update of a scale subresource as the fake API server saw it.
type scaleOp struct {
	name        string
	replicas    int32
	annotations map[string]string // the object's annotations when the replicas changed
}

// cluster is a fake seed (Secret, Events, dependents with a scale subresource and an instant
// "controller" that makes replicas ready) plus a fake shoot (Nodes, Leases, discovery).
type cluster struct {
	t      *testing.T
	seed   *k8sfake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	scales *scalefake.FakeScaleClient
	mapper meta.RESTMapper
	shoot  *k8sfake.Clientset

	mu    sync.Mutex
	ops   []scaleOp
	stuck map[string]bool // names whose ready replicas never follow spec.replicas

	shootFactoryCalls int
	logs              *bytes.Buffer
	machineKind       bool // the seed serves MCM's Machine kind
}

func newCluster(t *testing.T, objs ...*unstructured.Unstructured) *cluster {
	t.Helper()
	c := &cluster{t: t, stuck: map[string]bool{}, logs: &bytes.Buffer{}}
	c.seed = k8sfake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: testSecret, Namespace: testNS},
		Data:       map[string][]byte{KubeconfigKey: []byte(testKubeconfig)},
	})
	listKinds := map[schema.GroupVersionResource]string{
		gvrDeployments: "DeploymentList", gvrStatefulSets: "StatefulSetList", gvrWidgets: "WidgetList",
		MachineGVR: "MachineList",
	}
	rObjs := make([]runtime.Object, len(objs))
	for i, o := range objs {
		rObjs[i] = o
	}
	c.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, rObjs...)
	// Not a Gardener seed unless a test adds Machines: the Machine kind is not served.
	c.dyn.PrependReactor("list", "machines", func(k8stesting.Action) (bool, runtime.Object, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.machineKind {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(MachineGVR.GroupResource(), "")
	})

	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: "example.io", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	c.mapper = m

	// Deployments and StatefulSets are scaled by a patch of the object itself (spec.replicas);
	// other kinds through their scale subresource. Both land in patchScale.
	for _, r := range []string{"deployments", "statefulsets"} {
		c.dyn.PrependReactor("patch", r, c.patchReplicas)
	}
	c.scales = &scalefake.FakeScaleClient{}
	c.scales.AddReactor("get", "*", c.getScale)
	c.scales.AddReactor("patch", "*", c.patchScale)
	c.shoot = k8sfake.NewClientset()
	return c
}

func (c *cluster) fullGVR(gr schema.GroupResource) schema.GroupVersionResource {
	for _, g := range []schema.GroupVersionResource{gvrDeployments, gvrStatefulSets, gvrWidgets} {
		if g.GroupResource() == gr {
			return g
		}
	}
	c.t.Fatalf("unknown resource %v", gr)
	return schema.GroupVersionResource{}
}

func (c *cluster) getScale(a k8stesting.Action) (bool, runtime.Object, error) {
	ga := a.(k8stesting.GetAction)
	o, err := c.dyn.Tracker().Get(c.fullGVR(ga.GetResource().GroupResource()), ga.GetNamespace(), ga.GetName())
	if err != nil {
		return true, nil, err
	}
	u := o.(*unstructured.Unstructured)
	return true, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), ResourceVersion: u.GetResourceVersion()},
		Spec:       autoscalingv1.ScaleSpec{Replicas: int32(number(u, "spec", "replicas"))},
		Status:     autoscalingv1.ScaleStatus{Replicas: int32(number(u, "spec", "replicas"))},
	}, nil
}

// patchReplicas handles a merge patch of a Deployment or StatefulSet that sets spec.replicas
// as patchScale does; any other patch (annotations) is left to the fake's own tracker.
func (c *cluster) patchReplicas(a k8stesting.Action) (bool, runtime.Object, error) {
	pa := a.(k8stesting.PatchAction)
	var patch struct {
		Spec struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil || patch.Spec.Replicas == nil {
		return false, nil, nil
	}
	if pa.GetSubresource() != "" || pa.GetPatchType() != types.MergePatchType {
		c.t.Errorf("unexpected replicas patch %q %s", pa.GetSubresource(), pa.GetPatchType())
	}
	handled, _, err := c.applyReplicas(pa, *patch.Spec.Replicas)
	if err != nil {
		return handled, nil, err
	}
	o, err := c.dyn.Tracker().Get(pa.GetResource(), pa.GetNamespace(), pa.GetName())
	return true, o, err
}

// isReplicasPatch tells a patch that sets spec.replicas (a scale) from one of annotations.
func isReplicasPatch(pa k8stesting.PatchAction) bool {
	var patch struct {
		Spec struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
	}
	return json.Unmarshal(pa.GetPatch(), &patch) == nil && patch.Spec.Replicas != nil
}

// onReplicasPatch runs react first on every scale write, whichever way it is made (a patch of
// a Deployment's or StatefulSet's spec.replicas, or of a scale subresource).
func (c *cluster) onReplicasPatch(react k8stesting.ReactionFunc) {
	c.scales.PrependReactor("patch", "*", react)
	for _, r := range []string{"deployments", "statefulsets"} {
		c.dyn.PrependReactor("patch", r, func(a k8stesting.Action) (bool, runtime.Object, error) {
			if !isReplicasPatch(a.(k8stesting.PatchAction)) {
				return false, nil, nil
			}
			return react(a)
		})
	}
}

// patchScale applies a merge patch of the scale subresource: spec.replicas to the object and,
// unless the object is stuck, status.readyReplicas too (an instant controller).
func (c *cluster) patchScale(a k8stesting.Action) (bool, runtime.Object, error) {
	pa := a.(k8stesting.PatchAction)
	if pa.GetSubresource() != "scale" || pa.GetPatchType() != types.MergePatchType {
		c.t.Errorf("unexpected patch %s %s", pa.GetSubresource(), pa.GetPatchType())
	}
	if g := pa.GetResource().Group; g == "apps" {
		c.t.Errorf("a %s was scaled through its scale subresource; the probe patches spec.replicas of the object itself", pa.GetResource().Resource)
	}
	var patch struct {
		Spec struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil || patch.Spec.Replicas == nil {
		c.t.Errorf("scale patch %s: %v", pa.GetPatch(), err)
		return true, nil, apierrors.NewBadRequest("bad patch")
	}
	return c.applyReplicas(pa, *patch.Spec.Replicas)
}

// applyReplicas records the scale operation and sets spec.replicas (and, unless stuck, the
// ready replicas) of the object the patch names.
func (c *cluster) applyReplicas(pa k8stesting.PatchAction, replicas int32) (bool, runtime.Object, error) {
	gvr := pa.GetResource()
	o, err := c.dyn.Tracker().Get(gvr, pa.GetNamespace(), pa.GetName())
	if err != nil {
		return true, nil, err
	}
	u := o.(*unstructured.Unstructured)
	c.mu.Lock()
	c.ops = append(c.ops, scaleOp{name: pa.GetName(), replicas: replicas, annotations: maps.Clone(u.GetAnnotations())})
	stuck := c.stuck[pa.GetName()]
	c.mu.Unlock()
	_ = unstructured.SetNestedField(u.Object, int64(replicas), "spec", "replicas")
	if !stuck {
		_ = unstructured.SetNestedField(u.Object, int64(replicas), "status", "readyReplicas")
	}
	if err := c.dyn.Tracker().Update(gvr, u, pa.GetNamespace()); err != nil {
		return true, nil, err
	}
	return true, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace()},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
	}, nil
}

func number(u *unstructured.Unstructured, path ...string) int64 {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case int32:
		return int64(n)
	case int:
		return int64(n)
	}
	return 0
}

func (c *cluster) deps() Deps {
	return Deps{
		Seed: c.seed, Dynamic: c.dyn, Scales: c.scales, Mapper: c.mapper,
		NewShootClient: func(kc []byte, _ time.Duration) (kubernetes.Interface, error) {
			c.mu.Lock()
			c.shootFactoryCalls++
			c.mu.Unlock()
			if string(kc) != testKubeconfig {
				return nil, errors.New("not the test kubeconfig")
			}
			return c.shoot, nil
		},
		Now:          func() time.Time { return testNow },
		PollInterval: 2 * time.Millisecond,
	}
}

// object returns the dependent as the fake API server holds it now.
func (c *cluster) object(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	c.t.Helper()
	o, err := c.dyn.Tracker().Get(gvr, testNS, name)
	if err != nil {
		c.t.Fatalf("get %s: %v", name, err)
	}
	return o.(*unstructured.Unstructured)
}

func (c *cluster) replicas(gvr schema.GroupVersionResource, name string) int64 {
	return number(c.object(gvr, name), "spec", "replicas")
}

func (c *cluster) scaleOps() []scaleOp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]scaleOp(nil), c.ops...)
}

// events returns "Reason kind/name" of every Event recorded in the seed.
func (c *cluster) events() []string {
	c.t.Helper()
	list, err := c.seed.CoreV1().Events(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Source.Component != EventComponent {
			c.t.Errorf("event %s has source %q, want %q", e.Name, e.Source.Component, EventComponent)
		}
		out = append(out, e.Reason+" "+e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name)
	}
	return out
}

// writes counts the mutating calls on the seed's dependents (patches and scale updates).
func (c *cluster) writes() int {
	n := 0
	for _, a := range c.dyn.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			n++
		}
	}
	for _, a := range c.scales.Actions() {
		if a.GetVerb() != "get" {
			n++
		}
	}
	return n
}

// nodes puts Nodes and their Leases in the shoot: renewed ago before testNow. Leases without a
// Node are decide_test.go's (leaseSet's orphans).
func (c *cluster) nodes(renewedAgo ...time.Duration) {
	c.t.Helper()
	for i, ago := range renewedAgo {
		name := "node-" + string(rune('a'+i))
		mustCreate(c.t, c.shoot.Tracker(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		mustCreate(c.t, c.shoot.Tracker(), lease(name, ago))
	}
}

func mustCreate(t *testing.T, tr k8stesting.ObjectTracker, o runtime.Object) {
	t.Helper()
	if err := tr.Add(o); err != nil {
		t.Fatal(err)
	}
}

func lease(name string, renewedAgo time.Duration) *coordinationv1.Lease {
	rt := metav1.NewMicroTime(testNow.Add(-renewedAgo))
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NodeLeaseNamespace},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &rt},
	}
}

// Lease ages for grace 40s x buffer 0.75 = 30s.
const (
	fresh   = 5 * time.Second
	expired = 2 * time.Minute
)

// unhealthy: 3 of 3 leases expired → scale down. healthy: all fresh → scale up.
func (c *cluster) unhealthy() { c.nodes(expired, expired, expired) }
func (c *cluster) healthy()   { c.nodes(fresh, fresh, fresh) }

func workload(kind, name string, replicas int64, annotations map[string]string) *unstructured.Unstructured {
	apiVersion := "apps/v1"
	if kind == "Widget" {
		apiVersion = "example.io/v1"
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": testNS, "uid": "uid-" + name},
		"spec":       map[string]any{"replicas": replicas},
		"status":     map[string]any{"readyReplicas": replicas},
	}}
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}

func deployment(name string, replicas int64, annotations map[string]string) *unstructured.Unstructured {
	return workload("Deployment", name, replicas, annotations)
}

func dep(kind, name string, down, up int) DependentResource {
	apiVersion := "apps/v1"
	if kind == "Widget" {
		apiVersion = "example.io/v1"
	}
	return DependentResource{
		Ref:       ResourceRef{Kind: kind, Name: name, APIVersion: apiVersion},
		ScaleDown: ScaleInfo{Level: down, Timeout: 2 * time.Second},
		ScaleUp:   ScaleInfo{Level: up, Timeout: 2 * time.Second},
	}
}

func testOptions(resources ...DependentResource) Options {
	return Options{
		Namespace: testNS, KubeconfigSecretName: testSecret, ProbeTimeout: time.Second,
		NodeMonitorGrace: 40 * time.Second, NodeLeaseFailureFraction: 0.6, LeaseExpiryBufferFraction: 0.75,
		Resources: resources,
	}
}

func (c *cluster) logger() logrus.FieldLogger {
	l := logrus.New()
	l.SetFormatter(&logrus.JSONFormatter{})
	l.SetOutput(io.MultiWriter(c.logs, testWriter{c.t}))
	l.SetLevel(logrus.DebugLevel)
	return l
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	if testing.Verbose() {
		w.t.Log(string(bytes.TrimSpace(p)))
	}
	return len(p), nil
}

func (c *cluster) run(opts Options) (Summary, error) {
	c.t.Helper()
	return Run(context.Background(), c.deps(), opts, c.logger())
}

// machines makes the seed a Gardener seed (the Machine kind exists) and adds a Machine in the
// test namespace for each node name → phase given.
func (c *cluster) machines(phases map[string]string) {
	c.t.Helper()
	c.mu.Lock()
	c.machineKind = true
	c.mu.Unlock()
	for node, phase := range phases {
		if err := c.dyn.Tracker().Add(upstream.MachineFor(testNS, node, phase)); err != nil {
			c.t.Fatal(err)
		}
	}
}

// findLog returns the first JSON log line whose key has the value.
func findLog(logs, key, value string) (map[string]any, bool) {
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m[key] == value {
			return m, true
		}
	}
	return nil, false
}

// Run is RunAll for a run of one namespace (NAMESPACE): its summary and error.
func Run(ctx context.Context, deps Deps, opts Options, log logrus.FieldLogger) (Summary, error) {
	_, sums, err := RunAll(ctx, deps, opts, log)
	if len(sums) == 0 {
		return Summary{Namespace: opts.Namespace}, err
	}
	return sums[0], err
}
