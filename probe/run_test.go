package probe

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

var metaGet = metav1.GetOptions{}

// The dependents of a Gardener control plane, as the probe's e2e sets them up:
// kube-controller-manager 0 down / 1 up, machine-controller-manager 1/1,
// cluster-autoscaler 2/0 (optional).
func gardenerResources() []DependentResource {
	ca := dep("Deployment", "cluster-autoscaler", 2, 0)
	ca.Optional = true
	return []DependentResource{dep("Deployment", "kube-controller-manager", 0, 1), dep("Deployment", "machine-controller-manager", 1, 1), ca}
}

// order returns the names in the order of their first scale update.
func order(ops []scaleOp) []string {
	var names []string
	for _, o := range ops {
		if !slices.Contains(names, o.name) {
			names = append(names, o.name)
		}
	}
	return names
}

func TestScaleDownFollowsLevelsAndStoresReplicas(t *testing.T) {
	c := newCluster(t,
		deployment("kube-controller-manager", 2, nil),
		deployment("machine-controller-manager", 2, nil),
		deployment("cluster-autoscaler", 3, nil))
	c.unhealthy()

	sum, err := c.run(testOptions(gardenerResources()...))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := order(c.scaleOps()), []string{"kube-controller-manager", "machine-controller-manager", "cluster-autoscaler"}; !slices.Equal(got, want) {
		t.Errorf("scale-down order = %v, want %v (levels 0, 1, 2)", got, want)
	}
	for name, want := range map[string]string{"kube-controller-manager": "2", "machine-controller-manager": "2", "cluster-autoscaler": "3"} {
		o := c.object(gvrDeployments, name)
		if r := c.replicas(gvrDeployments, name); r != 0 {
			t.Errorf("%s replicas = %d, want 0", name, r)
		}
		a := o.GetAnnotations()
		if a[AnnotationReplicas] != want {
			t.Errorf("%s %s = %q, want %q", name, AnnotationReplicas, a[AnnotationReplicas], want)
		}
		if _, ok := a[AnnotationMeltdownProtection]; !ok {
			t.Errorf("%s lacks %s", name, AnnotationMeltdownProtection)
		}
	}
	if sum.Last != ResultScaleDown || sum.Outcomes[OutcomeScaledDown] != 3 || sum.Outcomes[OutcomeFailed] != 0 {
		t.Errorf("summary: %s", sum)
	}
	evs := c.events()
	slices.Sort(evs)
	if want := []string{"ScaledDown Deployment/cluster-autoscaler", "ScaledDown Deployment/kube-controller-manager", "ScaledDown Deployment/machine-controller-manager"}; !slices.Equal(evs, want) {
		t.Errorf("events = %v, want %v", evs, want)
	}
}

func TestScaleUpFollowsItsOwnLevelsRestoresReplicasAndRemovesAnnotations(t *testing.T) {
	stored := func(n string) map[string]string {
		return map[string]string{AnnotationReplicas: n, AnnotationMeltdownProtection: "", "other": "kept"}
	}
	c := newCluster(t,
		deployment("kube-controller-manager", 0, stored("2")),
		deployment("machine-controller-manager", 0, stored("3")),
		deployment("cluster-autoscaler", 0, stored("1")))
	c.healthy()

	sum, err := c.run(testOptions(gardenerResources()...))
	if err != nil {
		t.Fatal(err)
	}
	got := order(c.scaleOps())
	if len(got) != 3 || got[0] != "cluster-autoscaler" {
		t.Errorf("scale-up order = %v, want cluster-autoscaler (level 0) first, then the two of level 1", got)
	}
	for name, want := range map[string]int64{"kube-controller-manager": 2, "machine-controller-manager": 3, "cluster-autoscaler": 1} {
		if r := c.replicas(gvrDeployments, name); r != want {
			t.Errorf("%s replicas = %d, want %d", name, r, want)
		}
		a := c.object(gvrDeployments, name).GetAnnotations()
		if _, ok := a[AnnotationReplicas]; ok {
			t.Errorf("%s still has %s", name, AnnotationReplicas)
		}
		if _, ok := a[AnnotationMeltdownProtection]; ok {
			t.Errorf("%s still has %s", name, AnnotationMeltdownProtection)
		}
		if a["other"] != "kept" {
			t.Errorf("%s lost an unrelated annotation: %v", name, a)
		}
	}
	if sum.Last != ResultScaleUp || sum.Outcomes[OutcomeScaledUp] != 3 {
		t.Errorf("summary: %s", sum)
	}
	if evs := c.events(); len(evs) != 3 || !strings.HasPrefix(evs[0], ReasonScaledUp+" ") {
		t.Errorf("events = %v", evs)
	}
}

// levelRecorder wraps the RESTMapper, which each resource calls first, to see when resources
// start, and makes the resources of level 0 rendezvous: if they were scaled one after the
// other, the first would wait in vain.
type levelRecorder struct {
	meta.RESTMapper
	mu       sync.Mutex
	arrived  int
	together int
	all      chan struct{}
	timedOut bool
}

func (l *levelRecorder) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	l.mu.Lock()
	l.arrived++
	n := l.arrived
	if n == l.together {
		close(l.all)
	}
	l.mu.Unlock()
	if n <= l.together {
		select {
		case <-l.all:
		case <-time.After(5 * time.Second):
			l.mu.Lock()
			l.timedOut = true
			l.mu.Unlock()
		}
	}
	return l.RESTMapper.RESTMapping(gk, versions...)
}

func TestResourcesOfOneLevelAreScaledConcurrently(t *testing.T) {
	c := newCluster(t, deployment("a", 1, nil), deployment("b", 1, nil), deployment("c", 1, nil))
	c.unhealthy()
	rec := &levelRecorder{RESTMapper: c.mapper, together: 2, all: make(chan struct{})}
	deps := c.deps()
	deps.Mapper = rec
	_, err := Run(context.Background(), deps, testOptions(dep("Deployment", "a", 0, 0), dep("Deployment", "b", 0, 0), dep("Deployment", "c", 1, 0)), c.logger())
	if err != nil {
		t.Fatal(err)
	}
	if rec.timedOut {
		t.Error("the two resources of level 0 did not run concurrently")
	}
	if got := order(c.scaleOps()); len(got) != 3 || got[2] != "c" {
		t.Errorf("order = %v: level 1 (c) must come after both of level 0", got)
	}
}

func TestNextLevelWaitsUntilThePreviousIsReady(t *testing.T) {
	// kcm (level 0) takes a while to lose its ready replicas; mcm (level 1) must not be touched
	// before that.
	c := newCluster(t, deployment("kube-controller-manager", 2, nil), deployment("machine-controller-manager", 2, nil))
	c.unhealthy()
	c.stuck["kube-controller-manager"] = true
	go func() {
		time.Sleep(50 * time.Millisecond)
		o := c.object(gvrDeployments, "kube-controller-manager")
		c.mu.Lock()
		n := len(c.ops)
		c.mu.Unlock()
		if n != 1 {
			t.Errorf("after 50ms %d scale updates happened, want only kcm's", n)
		}
		o.Object["status"] = map[string]any{"readyReplicas": int64(0)}
		_ = c.dyn.Tracker().Update(gvrDeployments, o, testNS)
	}()
	if _, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0), dep("Deployment", "machine-controller-manager", 1, 0))); err != nil {
		t.Fatal(err)
	}
	if got := order(c.scaleOps()); !slices.Equal(got, []string{"kube-controller-manager", "machine-controller-manager"}) {
		t.Errorf("order = %v", got)
	}
}

// TestAResumedScaleDownWaitsForTheEarlierProbesLevelToHaveNoReadyReplica: a probe whose Job's
// run ended right after it set kube-controller-manager to 0 leaves its pods still ready; the
// next probe finds it at 0 already and must still wait for its last ready replica before it
// scales machine-controller-manager, as the first probe would have.
func TestAResumedScaleDownWaitsForTheEarlierProbesLevelToHaveNoReadyReplica(t *testing.T) {
	kcm := deployment("kube-controller-manager", 0, map[string]string{AnnotationReplicas: "2", AnnotationMeltdownProtection: ""})
	kcm.Object["status"] = map[string]any{"readyReplicas": int64(1)}
	c := newCluster(t, kcm, deployment("machine-controller-manager", 2, nil))
	c.unhealthy()
	go func() {
		time.Sleep(50 * time.Millisecond)
		if n := len(c.scaleOps()); n != 0 {
			t.Errorf("after 50ms %d scale updates happened while kube-controller-manager still had a ready replica, want none", n)
		}
		o := c.object(gvrDeployments, "kube-controller-manager")
		o.Object["status"] = map[string]any{"readyReplicas": int64(0)}
		_ = c.dyn.Tracker().Update(gvrDeployments, o, testNS)
	}()
	sum, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0), dep("Deployment", "machine-controller-manager", 1, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if got := order(c.scaleOps()); !slices.Equal(got, []string{"machine-controller-manager"}) {
		t.Errorf("scale updates = %v, want machine-controller-manager's alone", got)
	}
	if sum.Ops()["unchanged"] != 1 || sum.Outcomes[OutcomeScaledDown] != 1 {
		t.Errorf("summary %s, want kube-controller-manager unchanged and machine-controller-manager scaled down", sum)
	}
}

func TestScaleDownAnnotatesBeforeSettingZero(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 4, nil))
	c.unhealthy()
	if _, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0))); err != nil {
		t.Fatal(err)
	}
	ops := c.scaleOps()
	if len(ops) != 1 || ops[0].replicas != 0 {
		t.Fatalf("scale updates = %+v", ops)
	}
	// The fake API server recorded the object's annotations at the moment replicas became 0.
	if ops[0].annotations[AnnotationReplicas] != "4" {
		t.Errorf("when replicas were set to 0 the object had annotations %v: the count must already be stored", ops[0].annotations)
	}
	if _, ok := ops[0].annotations[AnnotationMeltdownProtection]; !ok {
		t.Errorf("when replicas were set to 0 the object lacked %s", AnnotationMeltdownProtection)
	}
	// And both annotations came in one patch.
	var patches []string
	for _, a := range c.dyn.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && !isReplicasPatch(p) {
			patches = append(patches, string(p.GetPatch()))
		}
	}
	if len(patches) != 1 || !strings.Contains(patches[0], AnnotationReplicas) || !strings.Contains(patches[0], AnnotationMeltdownProtection) {
		t.Errorf("patches = %q, want one carrying both annotations", patches)
	}
}

func TestScaleDownLeavesResourcesAtZeroAndKeepsTheirStoredReplicas(t *testing.T) {
	c := newCluster(t,
		deployment("kube-controller-manager", 0, map[string]string{AnnotationReplicas: "2", AnnotationMeltdownProtection: ""}),
		deployment("machine-controller-manager", 0, nil))
	c.unhealthy()
	sum, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0), dep("Deployment", "machine-controller-manager", 0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if w := c.writes(); w != 0 {
		t.Errorf("%d writes on resources already at 0, want none", w)
	}
	if a := c.object(gvrDeployments, "kube-controller-manager").GetAnnotations(); a[AnnotationReplicas] != "2" {
		t.Errorf("stored replicas = %q, want 2 kept", a[AnnotationReplicas])
	}
	if _, ok := c.object(gvrDeployments, "machine-controller-manager").GetAnnotations()[AnnotationReplicas]; ok {
		t.Error("a resource at 0 without stored replicas must not get replicas=0 stored")
	}
	if sum.Ops()["unchanged"] != 2 || sum.Outcomes[OutcomeScaledDown] != 0 || len(c.events()) != 0 {
		t.Errorf("summary %s, events %v", sum, c.events())
	}
}

func TestScaleUpTarget(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        int64
	}{
		{"stored replicas restored", map[string]string{AnnotationReplicas: "3"}, 3},
		{"no annotation: 1", nil, 1},
		{"spaces tolerated", map[string]string{AnnotationReplicas: " 2 "}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, deployment("kube-controller-manager", 0, tt.annotations))
			c.healthy()
			if _, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0))); err != nil {
				t.Fatal(err)
			}
			if r := c.replicas(gvrDeployments, "kube-controller-manager"); r != tt.want {
				t.Errorf("replicas = %d, want %d", r, tt.want)
			}
			if _, ok := c.object(gvrDeployments, "kube-controller-manager").GetAnnotations()[AnnotationReplicas]; ok {
				t.Error("the replicas annotation must be removed once a replica is ready")
			}
		})
	}
}

func TestScaleUpKeepsAnnotationsUntilAReplicaIsReady(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 0, map[string]string{AnnotationReplicas: "2", AnnotationMeltdownProtection: ""}))
	c.healthy()
	c.stuck["kube-controller-manager"] = true
	r := dep("Deployment", "kube-controller-manager", 0, 0)
	r.ScaleUp.Timeout = 50 * time.Millisecond
	sum, err := c.run(testOptions(r))
	if !errors.Is(err, ErrScaleFailed) {
		t.Fatalf("err = %v, want ErrScaleFailed (no replica became ready within the timeout)", err)
	}
	if got := c.replicas(gvrDeployments, "kube-controller-manager"); got != 2 {
		t.Errorf("replicas = %d, want 2 set", got)
	}
	a := c.object(gvrDeployments, "kube-controller-manager").GetAnnotations()
	if a[AnnotationReplicas] != "2" {
		t.Errorf("annotations = %v: they must stay until a replica is ready", a)
	}
	if sum.Outcomes[OutcomeFailed] != 1 {
		t.Errorf("summary: %s", sum)
	}
	evs := c.events()
	slices.Sort(evs)
	if want := []string{"ScaleUpFailed Deployment/kube-controller-manager", "ScaledUp Deployment/kube-controller-manager"}; !slices.Equal(evs, want) {
		t.Errorf("events = %v, want %v", evs, want)
	}

	// The next probe finds replicas > 0 with the annotations: once ready, they are removed.
	c.stuck["kube-controller-manager"] = false
	o := c.object(gvrDeployments, "kube-controller-manager")
	o.Object["status"] = map[string]any{"readyReplicas": int64(1)}
	_ = c.dyn.Tracker().Update(gvrDeployments, o, testNS)
	sum, err = c.run(testOptions(r))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.object(gvrDeployments, "kube-controller-manager").GetAnnotations(); len(a) != 0 {
		t.Errorf("annotations = %v, want removed", a)
	}
	if sum.Outcomes[OutcomeAnnotationsRemoved] != 1 || len(c.scaleOps()) != 1 {
		t.Errorf("summary %s, scale updates %d (want no second scale)", sum, len(c.scaleOps()))
	}
}

func TestScaleUpLeavesRunningResourcesAlone(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.healthy()
	sum, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if c.writes() != 0 || sum.Last != ResultHealthy || sum.Ops()["unchanged"] != 1 {
		t.Errorf("writes %d, summary %s", c.writes(), sum)
	}
}

func TestIgnoreScalingAnnotationLeavesTheResourceAlone(t *testing.T) {
	for _, tt := range []struct {
		name     string
		healthy  bool
		replicas int64
	}{{"scale down", false, 2}, {"scale up", true, 0}} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t,
				deployment("kube-controller-manager", tt.replicas, map[string]string{AnnotationIgnoreScaling: "true"}),
				deployment("machine-controller-manager", tt.replicas, map[string]string{AnnotationIgnoreScaling: "false"}))
			if tt.healthy {
				c.healthy()
			} else {
				c.unhealthy()
			}
			sum, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0), dep("Deployment", "machine-controller-manager", 0, 0)))
			if err != nil {
				t.Fatal(err)
			}
			if got := order(c.scaleOps()); !slices.Equal(got, []string{"machine-controller-manager"}) {
				t.Errorf("scaled %v, want only machine-controller-manager (ignore-scaling=false does not count)", got)
			}
			if r := c.replicas(gvrDeployments, "kube-controller-manager"); r != tt.replicas {
				t.Errorf("ignored resource replicas = %d, want %d", r, tt.replicas)
			}
			if sum.Outcomes[OutcomeIgnored] != 1 || !strings.Contains(c.logs.String(), `"action":"ignored"`) {
				t.Errorf("summary %s; the ignored resource must be logged", sum)
			}
		})
	}
}

func TestMissingResources(t *testing.T) {
	opt := dep("Deployment", "cluster-autoscaler", 0, 0)
	opt.Optional = true
	optKind := dep("Widget", "w", 0, 0)
	optKind.Ref.APIVersion = "unknown.io/v1"
	optKind.Optional = true
	reqKind := dep("Widget", "w2", 2, 0)
	reqKind.Ref.APIVersion = "unknown.io/v1"

	t.Run("optional missing is skipped", func(t *testing.T) {
		c := newCluster(t, deployment("kube-controller-manager", 2, nil))
		c.unhealthy()
		sum, err := c.run(testOptions(opt, optKind, dep("Deployment", "kube-controller-manager", 1, 0)))
		if err != nil {
			t.Fatal(err)
		}
		if sum.Outcomes[OutcomeOptionalMissing] != 2 || sum.Outcomes[OutcomeScaledDown] != 1 || c.replicas(gvrDeployments, "kube-controller-manager") != 0 {
			t.Errorf("summary: %s", sum)
		}
	})
	t.Run("required missing is an error, its level's others still scale, later levels do not run", func(t *testing.T) {
		c := newCluster(t, deployment("kube-controller-manager", 2, nil), deployment("machine-controller-manager", 2, nil))
		c.unhealthy()
		rk := reqKind
		rk.ScaleDown.Level = 0
		sum, err := c.run(testOptions(dep("Deployment", "gone", 0, 0), rk, dep("Deployment", "kube-controller-manager", 0, 0), dep("Deployment", "machine-controller-manager", 3, 0)))
		if !errors.Is(err, ErrScaleFailed) || !strings.Contains(err.Error(), "Deployment/gone") || !strings.Contains(err.Error(), "Widget/w2") {
			t.Fatalf("err = %v, want ErrScaleFailed naming both missing resources", err)
		}
		if c.replicas(gvrDeployments, "kube-controller-manager") != 0 {
			t.Error("a resource in the failing level must still be scaled")
		}
		if c.replicas(gvrDeployments, "machine-controller-manager") != 2 {
			t.Error("a level after a failed level must not run")
		}
		if sum.Outcomes[OutcomeMissing] != 2 || sum.Outcomes[OutcomeScaledDown] != 1 || sum.Outcomes[OutcomeBlocked] != 1 {
			t.Errorf("summary: %s", sum)
		}
	})
}

func TestDryRunChangesNothing(t *testing.T) {
	for _, tt := range []struct {
		name     string
		healthy  bool
		replicas int64
		ann      map[string]string
		want     string
	}{
		{"would scale down", false, 2, nil, "would-scale-down=3"},
		{"would scale up", true, 0, map[string]string{AnnotationReplicas: "2"}, "would-scale-up=3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t,
				deployment("kube-controller-manager", tt.replicas, tt.ann),
				deployment("machine-controller-manager", tt.replicas, tt.ann),
				deployment("cluster-autoscaler", tt.replicas, tt.ann))
			if tt.healthy {
				c.healthy()
			} else {
				c.unhealthy()
			}
			opts := testOptions(gardenerResources()...)
			opts.DryRun = true
			sum, err := c.run(opts)
			if err != nil {
				t.Fatal(err)
			}
			if w := c.writes(); w != 0 {
				t.Errorf("dry run made %d writes", w)
			}
			if evs := c.events(); len(evs) != 0 {
				t.Errorf("dry run recorded events %v", evs)
			}
			if s := sum.String(); !strings.HasPrefix(s, "dry run, nothing changed") || !strings.Contains(s, tt.want) {
				t.Errorf("summary %q, want %q", s, tt.want)
			}
		})
	}
}

func TestNoDecisionScalesNothing(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(c *cluster)
		result  Result
		wantErr string // "" = exit 0
	}{
		{"API server unreachable", func(c *cluster) {
			c.shoot.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
			})
		}, ResultAPIUnreachable, ""},
		{"API server throttles (429)", func(c *cluster) {
			c.shoot.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewTooManyRequests("slow down", 1)
			})
		}, ResultThrottled, ""},
		{"API server times out", func(c *cluster) {
			c.shoot.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
				time.Sleep(300 * time.Millisecond)
				return true, nil, nil
			})
		}, ResultAPIUnreachable, ""},
		{"listing leases throttled", func(c *cluster) {
			c.shoot.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewTooManyRequests("slow down", 1)
			})
		}, ResultThrottled, ""},
		{"listing Machines in the seed throttled", func(c *cluster) {
			c.machines(nil)
			c.dyn.PrependReactor("list", "machines", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewTooManyRequests("slow down", 1)
			})
		}, ResultThrottled, ""},
		{"listing Machines in the seed forbidden", func(c *cluster) {
			c.machines(nil)
			c.dyn.PrependReactor("list", "machines", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(MachineGVR.GroupResource(), "", errors.New("no RBAC"))
			})
		}, ResultError, "may not"},
		{"credentials rejected (401)", func(c *cluster) {
			c.shoot.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewUnauthorized("token expired")
			})
		}, ResultError, "rejected the kubeconfig's credentials"},
		{"Secret missing", func(c *cluster) {
			_ = c.seed.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, testNS, testSecret)
		}, ResultError, "kubeconfig Secret " + testNS + "/" + testSecret + " not found"},
		{"Secret without the kubeconfig key", func(c *cluster) {
			s, _ := c.seed.CoreV1().Secrets(testNS).Get(context.Background(), testSecret, metaGet)
			s.Data = map[string][]byte{"token": []byte("t")}
			_ = c.seed.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, s, testNS)
		}, ResultError, `has no (or an empty) key "kubeconfig"`},
		{"garbage kubeconfig", func(c *cluster) {
			s, _ := c.seed.CoreV1().Secrets(testNS).Get(context.Background(), testSecret, metaGet)
			s.Data = map[string][]byte{KubeconfigKey: []byte("not: [a kubeconfig")}
			_ = c.seed.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, s, testNS)
		}, ResultError, "kubeconfig in Secret " + testNS + "/" + testSecret},
		{"a single node", func(c *cluster) {
			c.nodes(expired)
		}, ResultSkipped, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, deployment("kube-controller-manager", 2, nil))
			if tt.result != ResultSkipped {
				c.unhealthy() // a decision would scale down
			}
			tt.setup(c)
			opts := testOptions(dep("Deployment", "kube-controller-manager", 0, 0))
			opts.ProbeTimeout = 50 * time.Millisecond
			sum, err := c.run(opts)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v, want none (no decision is not a failure)", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if c.writes() != 0 || len(c.scaleOps()) != 0 || c.replicas(gvrDeployments, "kube-controller-manager") != 2 {
				t.Error("something was scaled")
			}
			if sum.Last != tt.result {
				t.Errorf("result = %s, want %s (%s)", sum.Last, tt.result, sum)
			}
			if strings.Contains(c.logs.String(), "not: [a kubeconfig") {
				t.Error("the log quotes the Secret's content")
			}
		})
	}
}

func TestCustomResourcesAndStatefulSetsScaleThroughTheScaleSubresource(t *testing.T) {
	c := newCluster(t, workload("Widget", "w", 2, nil), workload("StatefulSet", "etcd-events", 1, nil))
	c.unhealthy()
	sum, err := c.run(testOptions(dep("Widget", "w", 0, 0), dep("StatefulSet", "etcd-events", 1, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if c.replicas(gvrWidgets, "w") != 0 || c.replicas(gvrStatefulSets, "etcd-events") != 0 || sum.Outcomes[OutcomeScaledDown] != 2 {
		t.Errorf("summary: %s", sum)
	}
	if got := c.object(gvrWidgets, "w").GetAnnotations()[AnnotationReplicas]; got != "2" {
		t.Errorf("Widget stored replicas = %q", got)
	}
	if evs := c.events(); !slices.Contains(evs, "ScaledDown Widget/w") {
		t.Errorf("events = %v", evs)
	}
}

func TestStopBetweenLevels(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil), deployment("machine-controller-manager", 2, nil))
	c.unhealthy()
	kcm := dep("Deployment", "kube-controller-manager", 0, 0)
	mcm := dep("Deployment", "machine-controller-manager", 1, 0)
	mcm.ScaleDown.InitialDelay = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	// Cancelled (SIGTERM) once kcm's level is done: the next level must not start.
	c.onReplicasPatch(func(k8stesting.Action) (bool, runtime.Object, error) {
		cancel()
		return false, nil, nil
	})
	done := make(chan struct{})
	var sum Summary
	var err error
	go func() {
		sum, err = Run(ctx, c.deps(), testOptions(kcm, mcm), c.logger())
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after cancellation")
	}
	if err != nil {
		t.Fatal(err)
	}
	if c.replicas(gvrDeployments, "kube-controller-manager") != 0 {
		t.Error("the resource in hand must be finished")
	}
	if c.replicas(gvrDeployments, "machine-controller-manager") != 2 || sum.Outcomes[OutcomeNotStarted] != 1 {
		t.Errorf("the next level must not start after SIGTERM: %s", sum)
	}
}

type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

func TestScheduleProbesRepeatedlyWithoutOverlap(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.healthy()
	var mu sync.Mutex
	active, overlapped := 0, false
	c.shoot.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		active++
		if active > 1 {
			overlapped = true
		}
		mu.Unlock()
		time.Sleep(15 * time.Millisecond) // a probe longer than the schedule's interval
		mu.Lock()
		active--
		mu.Unlock()
		return false, nil, nil
	})
	opts := testOptions(dep("Deployment", "kube-controller-manager", 0, 0))
	opts.Schedule, opts.ScheduleSpec, opts.RunDuration = every(5*time.Millisecond), "every 5ms", 150*time.Millisecond
	start := time.Now()
	sum, err := c.run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Probes < 3 || overlapped {
		t.Errorf("probes = %d (want several), overlapped = %v", sum.Probes, overlapped)
	}
	// One more read than probes: a probe still reading when RUN_DURATION ends is abandoned
	// (nothing changed yet) and not counted.
	if c.shootFactoryCalls != sum.Probes && c.shootFactoryCalls != sum.Probes+1 {
		t.Errorf("the kubeconfig Secret must be read for every probe (token rotation): %d reads for %d probes", c.shootFactoryCalls, sum.Probes)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the run took %v, RUN_DURATION is 150ms", el)
	}
}

func TestDecisionAndActionLogLinesCarryTheirFields(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.unhealthy()
	if _, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0))); err != nil {
		t.Fatal(err)
	}
	var decision, action map[string]any
	for _, line := range strings.Split(strings.TrimSpace(c.logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		for k := range m {
			if strings.HasPrefix(k, "fields.") {
				t.Errorf("field %q clashes with logrus's own keys: %q", k, line)
			}
		}
		switch m["action"] {
		case string(ActionScaleDown):
			decision = m
		case string(OutcomeScaledDown):
			action = m
		}
	}
	for _, k := range []string{"namespace", "action", "reason", "candidates", "expired"} {
		if _, ok := decision[k]; !ok {
			t.Errorf("decision line lacks %q: %v", k, decision)
		}
	}
	for _, k := range []string{"namespace", "kind", "name", "action", "reason", "scale_level", "replicas", "previous_replicas"} {
		if _, ok := action[k]; !ok {
			t.Errorf("action line lacks %q: %v", k, action)
		}
	}
	if action["namespace"] != testNS || action["kind"] != "Deployment" || action["name"] != "kube-controller-manager" {
		t.Errorf("action line: %v", action)
	}
}

func TestKilledScaleDownConvergesWithTheStoredReplicasKept(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.unhealthy()
	opts := testOptions(dep("Deployment", "kube-controller-manager", 0, 0))

	// The first probe dies between the annotation and the scale (here: the scale fails).
	failing := true
	c.onReplicasPatch(func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing {
			return true, nil, apierrors.NewServiceUnavailable("gone")
		}
		return false, nil, nil
	})
	if _, err := c.run(opts); !errors.Is(err, ErrScaleFailed) {
		t.Fatalf("err = %v, want ErrScaleFailed", err)
	}
	if a := c.object(gvrDeployments, "kube-controller-manager").GetAnnotations(); a[AnnotationReplicas] != "2" || c.replicas(gvrDeployments, "kube-controller-manager") != 2 {
		t.Fatalf("after the failed scale: replicas %d, annotations %v", c.replicas(gvrDeployments, "kube-controller-manager"), a)
	}
	if evs := c.events(); !slices.Equal(evs, []string{"ScaleDownFailed Deployment/kube-controller-manager"}) {
		t.Errorf("events = %v", evs)
	}

	// The next probe converges; a third one finds it at 0 and keeps the stored 2.
	failing = false
	for range 2 {
		if _, err := c.run(opts); err != nil {
			t.Fatal(err)
		}
		if a := c.object(gvrDeployments, "kube-controller-manager").GetAnnotations(); a[AnnotationReplicas] != "2" || c.replicas(gvrDeployments, "kube-controller-manager") != 0 {
			t.Fatalf("replicas %d, annotations %v", c.replicas(gvrDeployments, "kube-controller-manager"), a)
		}
	}
}

func TestConflictingScaleUpdateIsRetried(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.unhealthy()
	conflicts := 1
	c.onReplicasPatch(func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "kube-controller-manager", errors.New("changed"))
		}
		return false, nil, nil
	})
	sum, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0)))
	if err != nil || sum.Outcomes[OutcomeScaledDown] != 1 || c.replicas(gvrDeployments, "kube-controller-manager") != 0 {
		t.Errorf("err %v, summary %s", err, sum)
	}
}

func TestScaleDownTimesOutWhenReplicasStayReady(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil), deployment("machine-controller-manager", 2, nil))
	c.unhealthy()
	c.stuck["kube-controller-manager"] = true
	kcm := dep("Deployment", "kube-controller-manager", 0, 0)
	kcm.ScaleDown.Timeout = 30 * time.Millisecond
	sum, err := c.run(testOptions(kcm, dep("Deployment", "machine-controller-manager", 1, 0)))
	if !errors.Is(err, ErrScaleFailed) {
		t.Fatalf("err = %v", err)
	}
	if sum.Outcomes[OutcomeFailed] != 1 || sum.Outcomes[OutcomeBlocked] != 1 || c.replicas(gvrDeployments, "machine-controller-manager") != 2 {
		t.Errorf("a level that timed out must keep the next level from running: %s", sum)
	}
}

func TestInitialDelayIsWaitedFirst(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.unhealthy()
	r := dep("Deployment", "kube-controller-manager", 0, 0)
	r.ScaleDown.InitialDelay = 60 * time.Millisecond
	start := time.Now()
	if _, err := c.run(testOptions(r)); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 60*time.Millisecond {
		t.Errorf("the run took %v, less than the initial delay", el)
	}
}

// A stored replicas value that is not an integer > 0 was written by hand: guessing 1 could
// start a controller with too few replicas, so it is an error on that resource (a Warning
// Event and an error line), as in dependency-watchdog; the resource stays at 0.
func TestScaleUpRefusesAReplicasAnnotationThatIsNotANumber(t *testing.T) {
	for _, v := range []string{"three", "0", "-2", "99999999999", ""} {
		t.Run(v, func(t *testing.T) {
			c := newCluster(t, deployment("kube-controller-manager", 0, map[string]string{AnnotationReplicas: v, AnnotationMeltdownProtection: ""}))
			c.healthy()
			sum, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0)))
			if !errors.Is(err, ErrScaleFailed) || sum.Outcomes[OutcomeFailed] != 1 {
				t.Fatalf("err = %v, summary %s; want the resource failed", err, sum)
			}
			if r := c.replicas(gvrDeployments, "kube-controller-manager"); r != 0 {
				t.Errorf("replicas = %d, want 0 (not scaled)", r)
			}
			if ev := c.events(); !slices.Contains(ev, ReasonScaleUpError+" Deployment/kube-controller-manager") {
				t.Errorf("events %v, want a %s Event", ev, ReasonScaleUpError)
			}
			if !strings.Contains(c.logs.String(), "is not an integer") {
				t.Error("the log must say the annotation is not a number")
			}
		})
	}
}

// ignore-scaling=true on a resource that still carries meltdown-protection-active (left by an
// earlier scale-down): the marker is removed, since an operator manages the resource now and
// Gardener would otherwise never scale it up; replicas and the stored count stay.
func TestIgnoreScalingRemovesALeftoverMeltdownAnnotation(t *testing.T) {
	for _, tt := range []struct {
		name    string
		healthy bool
		dryRun  bool
	}{{"scale down", false, false}, {"scale up", true, false}, {"dry run", true, true}} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, deployment("kube-controller-manager", 0, map[string]string{
				AnnotationIgnoreScaling: "true", AnnotationMeltdownProtection: "", AnnotationReplicas: "3"}))
			if tt.healthy {
				c.healthy()
			} else {
				c.unhealthy()
			}
			opts := testOptions(dep("Deployment", "kube-controller-manager", 0, 0))
			opts.DryRun = tt.dryRun
			sum, err := c.run(opts)
			if err != nil || sum.Outcomes[OutcomeIgnored] != 1 {
				t.Fatalf("err %v, summary %s", err, sum)
			}
			a := c.object(gvrDeployments, "kube-controller-manager").GetAnnotations()
			if _, left := a[AnnotationMeltdownProtection]; left != tt.dryRun {
				t.Errorf("meltdown annotation present = %v, want %v (annotations %v)", left, tt.dryRun, a)
			}
			if a[AnnotationReplicas] != "3" || c.replicas(gvrDeployments, "kube-controller-manager") != 0 || len(c.scaleOps()) != 0 {
				t.Errorf("an ignored resource must not be scaled nor lose its stored replicas: %v", a)
			}
		})
	}
}

// When a level fails, the later levels do not run, in both directions; the next probe starts
// again from the first level.
func TestAFailedLevelKeepsTheLaterLevelsFromRunning(t *testing.T) {
	for _, up := range []bool{false, true} {
		name := "scale down"
		replicas := int64(2)
		if up {
			name, replicas = "scale up", 0
		}
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, deployment("kube-controller-manager", replicas, nil),
				deployment("machine-controller-manager", replicas, nil), deployment("cluster-autoscaler", replicas, nil))
			if up {
				c.healthy()
			} else {
				c.unhealthy()
			}
			c.stuck["kube-controller-manager"] = true
			kcm := dep("Deployment", "kube-controller-manager", 0, 0)
			kcm.ScaleDown.Timeout, kcm.ScaleUp.Timeout = 30*time.Millisecond, 30*time.Millisecond
			sum, err := c.run(testOptions(kcm, dep("Deployment", "machine-controller-manager", 0, 0), dep("Deployment", "cluster-autoscaler", 1, 1)))
			if !errors.Is(err, ErrScaleFailed) {
				t.Fatalf("err = %v", err)
			}
			if sum.Outcomes[OutcomeFailed] != 1 || sum.Outcomes[OutcomeBlocked] != 1 {
				t.Errorf("summary %s: want 1 failed, 1 blocked", sum)
			}
			if r := c.replicas(gvrDeployments, "cluster-autoscaler"); r != replicas {
				t.Errorf("cluster-autoscaler (level 1) replicas = %d, want %d: it must not run after level 0 failed", r, replicas)
			}
			if !strings.Contains(c.logs.String(), `"action":"blocked"`) {
				t.Error("the blocked level must be logged")
			}
		})
	}
}

// On a Gardener seed (the Machine kind exists), the Machines of the control-plane namespace
// decide which leases count: here two expired nodes have no usable Machine, so 1 of 3
// counted leases is expired and nothing is scaled down; the log counts who was left out.
func TestMachinesInTheSeedDecideWhichLeasesCount(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.nodes(expired, expired, expired, fresh, fresh) // node-a .. node-e
	c.machines(map[string]string{"node-a": "Running", "node-b": "Failed", "node-d": "Running", "node-e": "Running"})
	sum, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Last != ResultHealthy || c.replicas(gvrDeployments, "kube-controller-manager") != 2 {
		t.Errorf("summary %s: want healthy, nothing scaled", sum)
	}
	l, ok := findLog(c.logs.String(), "action", "scale-up")
	if !ok {
		t.Fatalf("no decision line in:\n%s", c.logs)
	}
	if l["excluded"] != float64(2) || l["excluded_by_reason"] != "1 machine-failed-or-terminating, 1 no-machine" || l["candidates"] != float64(3) {
		t.Errorf("decision line: excluded %v (%v), candidates %v", l["excluded"], l["excluded_by_reason"], l["candidates"])
	}
}

// Without the Machine kind (not a Gardener seed), every existing Node's lease counts.
func TestWithoutTheMachineKindEveryNodeCounts(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.nodes(expired, expired, fresh)
	sum, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0)))
	if err != nil || sum.Last != ResultScaleDown {
		t.Errorf("err %v, summary %s: want scale-down (2 of 3 expired)", err, sum)
	}
}

// In a scheduled run, a throttled probe (429) skips the ticks within the back-off instead of
// asking the throttled API server again at full rate.
func TestThrottledProbesBackOffWithinAScheduledRun(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.healthy()
	c.shoot.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewTooManyRequests("slow down", 1)
	})
	opts := testOptions(dep("Deployment", "kube-controller-manager", 0, 0))
	opts.ScheduleSpec, opts.RunDuration = "@every 1s", 2500*time.Millisecond
	opts.Schedule, _ = envconf.CronParser.Parse(opts.ScheduleSpec)
	sum, err := c.run(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Ticks every 1s over 2.5s would be 3 probes; the first 429 backs off 10s.
	if sum.Probes != 1 || sum.Results[ResultThrottled] != 1 {
		t.Errorf("summary %s: want one throttled probe and no more within the back-off", sum)
	}
	if !strings.Contains(c.logs.String(), `"action":"back-off"`) {
		t.Error("the back-off must be logged")
	}
}

// A scale write that an admission policy refuses (the API server's wording of a policy's
// denial) is its own outcome: the run fails, the resource gets a ScaleRefused Warning Event
// quoting the policy, and the run's report counts it as admission-refused, not failed, so
// the coordinator's series shows depwatch's own policy refusing depwatch's probe.
func TestAScaleRefusedByAnAdmissionPolicyIsRecordedAndReported(t *testing.T) {
	c := newCluster(t, deployment("kube-controller-manager", 2, nil))
	c.unhealthy()
	denial := "ValidatingAdmissionPolicy 'depwatch-probe-scales' with binding 'depwatch-probe-scales' denied request: not a scale target"
	c.onReplicasPatch(func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: 403,
			Message: `deployments.apps "kube-controller-manager" is forbidden: ` + denial}}
	})
	sum, err := c.run(testOptions(dep("Deployment", "kube-controller-manager", 0, 0)))
	if !errors.Is(err, ErrScaleFailed) {
		t.Fatalf("err = %v, want ErrScaleFailed", err)
	}
	if sum.Outcomes[OutcomeAdmissionRefused] != 1 || sum.Ops()["admission-refused"] != 1 || sum.Ops()["failed"] != 0 {
		t.Errorf("summary %+v, ops %v; want one admission-refused write and no other failure", sum, sum.Ops())
	}
	list, err := c.seed.CoreV1().Events(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, e := range list.Items {
		if e.Reason == ReasonScaleRefused {
			refused++
			if e.Type != "Warning" || !strings.Contains(e.Message, denial) {
				t.Errorf("ScaleRefused Event %s %q; want a Warning quoting the policy", e.Type, e.Message)
			}
		}
	}
	if refused != 1 {
		t.Errorf("%d ScaleRefused Events, want 1", refused)
	}
}
