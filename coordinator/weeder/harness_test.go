package weeder

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/jobs"
)

// harness: a weeder on a fake clientset whose informer caches are filled by hand.
type harness struct {
	t      *testing.T
	c      *Controller
	client *fake.Clientset
	rec    *record.FakeRecorder
	now    time.Time
	shown  []jobs.Run // what syncCaches last showed the controller's run view
}

const testConfig = `
watchDuration: 3m
servicesAndDependantSelectors:
  etcd-main-client:
    podSelectors: [{matchLabels: {app: kubernetes, role: apiserver}}]
  kube-apiserver:
    podSelectors:
      - matchLabels: {app: kubernetes, role: controller-manager}
      - matchLabels: {app: machine-controller-manager}
`

func newHarness(t *testing.T, cfgYAML string, objs ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWith(t, cfgYAML, Options{}, objs...)
}

// newHarnessWith is newHarness with the weeder's options.
func newHarnessWith(t *testing.T, cfgYAML string, opts Options, objs ...runtime.Object) *harness {
	t.Helper()
	cfg := parseConfig(t, cfgYAML)
	client := fake.NewClientset(objs...)
	rec := record.NewFakeRecorder(100)
	log := logrus.New()
	log.SetOutput(io.Discard)
	h := &harness{t: t, client: client, rec: rec, now: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)}
	c, err := New(Deps{
		Shared:  ctrl.Shared{Client: client, Log: log, Template: jobs.Template{Namespace: "depwatch", Image: "localhost/depwatch:dev"}, Recorder: rec, Now: func() time.Time { return h.now }},
		Config:  cfg,
		Metrics: newTestMetrics(),
		Options: opts,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	t.Cleanup(c.queue.ShutDown)
	t.Cleanup(c.batch.queue.ShutDown)
	return h
}

// set puts a slice into the cache and delivers the event as the informer would. The
// namespace and the Service are created in the API first (the coordinator reads them on an
// outage).
func (h *harness) set(s *discoveryv1.EndpointSlice) {
	h.t.Helper()
	ctx := context.Background()
	_, _ = h.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}, metav1.CreateOptions{})
	svc := s.Labels[discoveryv1.LabelServiceName]
	_, _ = h.client.CoreV1().Services(s.Namespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: svc}}, metav1.CreateOptions{})
	if err := h.c.src.GetIndexer().Update(s); err != nil {
		h.t.Fatal(err)
	}
	h.c.onEndpoints(s, false)
	h.drain()
}

func (h *harness) remove(s *discoveryv1.EndpointSlice) {
	h.t.Helper()
	if err := h.c.src.GetIndexer().Delete(s); err != nil {
		h.t.Fatal(err)
	}
	h.c.onEndpoints(s, true)
	h.drain()
}

// syncCaches fills the Job and pod informers' caches from the fake API's store, as running
// informers would have by the time a reconcile reads them (read from the tracker, so the
// client's recorded actions stay the coordinator's own).
func (h *harness) syncCaches() {
	h.t.Helper()
	jobsGVR := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	obj, err := h.client.Tracker().List(jobsGVR, schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, "")
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range h.shown {
		h.c.runs.Forget(r.Namespace, r.Name)
	}
	h.shown = nil
	for i := range obj.(*batchv1.JobList).Items {
		r := jobs.RunOf(&obj.(*batchv1.JobList).Items[i])
		h.shown = append(h.shown, r)
		h.c.runs.Observe(r)
		h.c.onJobAdded(r)
	}
	obj, err = h.client.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "")
	if err != nil {
		h.t.Fatal(err)
	}
	var nss []any
	for i := range obj.(*corev1.NamespaceList).Items {
		nss = append(nss, &obj.(*corev1.NamespaceList).Items[i])
	}
	if h.c.nsInf != nil {
		if err := h.c.nsInf.GetIndexer().Replace(nss, ""); err != nil {
			h.t.Fatal(err)
		}
	}
	obj, err = h.client.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "")
	if err != nil {
		h.t.Fatal(err)
	}
	pods := obj.(*corev1.PodList).Items
	for sel, inf := range h.c.deps.infs {
		s, err := labels.Parse(sel)
		if err != nil {
			h.t.Fatal(err)
		}
		var ps []any
		for i := range pods {
			if s.Matches(labels.Set(pods[i].Labels)) {
				ps = append(ps, podstate.Slim(&pods[i]))
			}
		}
		if err := inf.GetIndexer().Replace(ps, ""); err != nil {
			h.t.Fatal(err)
		}
	}
}

// drain reconciles everything queued, synchronously.
func (h *harness) drain() {
	h.t.Helper()
	for h.c.queue.Len() > 0 {
		if h.c.src != nil {
			h.syncCaches()
		}
		key, _ := h.c.queue.Get()
		if err := h.c.Reconcile(context.Background(), key); err != nil {
			h.t.Errorf("reconcile %s: %v", key, err)
		}
		if h.c.src != nil {
			h.syncCaches() // the informers catch up with what the reconcile created
		}
		h.c.queue.Forget(key)
		h.c.queue.Done(key)
	}
}

func (h *harness) weederJobs() []batchv1.Job {
	h.t.Helper()
	list, err := h.client.BatchV1().Jobs("depwatch").List(context.Background(), metav1.ListOptions{LabelSelector: "depwatch.io/kind=weeder"})
	if err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func down(ns, svc string) *discoveryv1.EndpointSlice {
	return slice(ns, svc, svc+"-abc", ep(ptr.To(false)))
}

func up(ns, svc string) *discoveryv1.EndpointSlice {
	return slice(ns, svc, svc+"-abc", ep(ptr.To(true)))
}

func names(js []batchv1.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.Name)
	}
	return out
}

// value reads a counter or gauge.
func value(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

func sampleCount(o prometheus.Observer) uint64 {
	var d dto.Metric
	if err := o.(prometheus.Metric).Write(&d); err != nil {
		panic(err)
	}
	return d.Histogram.GetSampleCount()
}

func jobEnv(j batchv1.Job) map[string]string {
	env := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

func countWith(events []string, reason string) int {
	n := 0
	for _, e := range events {
		if strings.Contains(e, " "+reason+" ") {
			n++
		}
	}
	return n
}

// parseConfig reads a weeder section the way the coordinator's config file holds it (its
// top-level fields) and validates it; the coordinator's own parser is tested in its package.
func parseConfig(t *testing.T, data string) *Config {
	t.Helper()
	cfg := &Config{}
	if err := yaml.UnmarshalStrict([]byte(data), cfg); err != nil {
		t.Fatalf("weeder config: %v", err)
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatalf("weeder config: %v", errs)
	}
	return cfg
}

func newTestMetrics() *Metrics {
	m := NewMetrics(ctrl.NewJobMetrics())
	m.Init()
	return m
}

// weederSpec is the service's weeder Job spec for an edge from cfg, its dependents its own
// selectors (no dependsOn).
func weederSpec(cfg *Config, key string, e *recordedEdge, armed bool) (jobs.Spec, error) {
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	t := jobs.WeederTarget{Namespace: ns, Service: svc, Selectors: cfg.Selectors(svc), ReadyWhen: cfg.ReadyWhenOf(svc)}
	return jobs.Weeder(cfg.weederSpec(e, armed, t))
}
