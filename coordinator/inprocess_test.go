package coordinator

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/coordinator/inprocess"
	"github.com/depwatch/depwatch/coordinator/metrics"
	"github.com/depwatch/depwatch/coordinator/rights"
	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/reaper"
)

// runsSeen is a stand-in engine for the in-process executor: it records each run's Job and
// the reaper settings its environment gives, and runs until stopped.
type runsSeen struct {
	mu      sync.Mutex
	jobs    []string
	opts    []reaper.Options
	stopped int
}

func (r *runsSeen) engine(ctx context.Context, job *batchv1.Job, _ logrus.FieldLogger) (int32, string) {
	env := map[string]string{}
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	opts, err := reaper.LoadOptions(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	r.mu.Lock()
	r.jobs = append(r.jobs, job.Name)
	if err == nil {
		r.opts = append(r.opts, opts)
	}
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	r.stopped++
	r.mu.Unlock()
	return 0, "stopped"
}

func (r *runsSeen) seen() ([]string, []reaper.Options, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.jobs...), append([]reaper.Options(nil), r.opts...), r.stopped
}

// TestDWDWeederRunsInProcessUnderGardenletsRights: dependency-watchdog's weeder command on
// gardenlet's ConfigMap, with gardenlet's rights (no Jobs, namespaces, Services or Events
// outside garden) and the in-process executor: an outage arms the service's weeder as a run
// in this process, from the Job the controller launched (its environment is a weeder's: the
// service's gate, CrashLoopBackOff); the return keeps it; the cluster is asked nothing about
// Jobs, namespaces, Services or Events outside garden; stopping the coordinator stops the run.
func TestDWDWeederRunsInProcessUnderGardenletsRights(t *testing.T) {
	cfg, err := config.Parse([]byte(gardenletWeederConfigMap))
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(up("shoot--a", "etcd-main-client"))
	log := logrus.New()
	log.SetOutput(io.Discard)
	runs := &runsSeen{}
	exec := inprocess.New(inprocess.Options{Log: log, NoEvents: true, Engine: runs.engine})
	granted := rights.Rights{Slices: true, DeletePods: true} // gardenlet's weeder ClusterRole
	opts, _, err := ParseDWDFlags(roles.Weeder, []string{"--config-file=x", "--enable-leader-election=true",
		"--leader-election-namespace=garden", "--metrics-bind-addr=0", "--health-bind-addr=0"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 2*time.Second, time.Second, 200*time.Millisecond
	m := metrics.New("test")
	m.SetExecutor(exec.Kind())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Deps{
			Shared:   ctrl.Shared{Client: client, Log: log, Template: roles.InProcessTemplate(roles.Coordinator, cfg.JobTemplate, func(string) (string, bool) { return "garden", true }), Executor: exec},
			Config:   cfg,
			Options:  opts,
			Metrics:  m,
			Rights:   &granted,
			Identity: "dwd-1",
		})
	}()
	waitFor(t, "the dwd-weeder-leader-election Lease", func() bool {
		l, err := client.CoordinationV1().Leases("garden").Get(ctx, roles.WeederLeaseName, metav1.GetOptions{})
		return err == nil && ptr.Deref(l.Spec.HolderIdentity, "") == "dwd-1"
	})
	time.Sleep(300 * time.Millisecond) // the first sighting (Ready) is reconciled
	if _, err := client.DiscoveryV1().EndpointSlices("shoot--a").Update(ctx, down("shoot--a", "etcd-main-client"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an armed weeder run in this process", func() bool { j, _, _ := runs.seen(); return len(j) == 1 })
	_, o, _ := runs.seen()
	if len(o) != 1 || o[0].StartWhenReady == nil || o[0].StartWhenReady.Name != "etcd-main-client" || !o[0].Watch {
		t.Fatalf("the run's settings are not an armed weeder's: %+v", o)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("shoot--a").Update(ctx, up("shoot--a", "etcd-main-client"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the return is reconciled: the armed run is kept
	if j, _, _ := runs.seen(); len(j) != 1 {
		t.Errorf("runs %v: the armed run should handle the return alone", j)
	}
	for _, a := range client.Actions() {
		res := a.GetResource().Resource
		switch {
		case res == "jobs", res == "namespaces", res == "services", res == "events" && a.GetNamespace() != "garden":
			t.Errorf("asked the API server to %s %s in %q, which gardenlet's weeder RBAC does not grant", a.GetVerb(), res, a.GetNamespace())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second): // a hang catcher
		t.Fatal("Run did not return after cancel")
	}
	if _, _, stopped := runs.seen(); stopped != 1 {
		t.Errorf("%d runs stopped with the coordinator, want 1", stopped)
	}
}

// TestDWDProberReadsItsInProcessRunsReports: dependency-watchdog's prober command on a
// prober ConfigMap, in-process: a shoot namespace gets a probe shard's run in this process,
// whose environment is a probe's; when the run ends, its report (the pod's termination
// message) feeds the metrics as a probe Job's would: the decisions, the namespace's last
// probe, its meltdown state.
func TestDWDProberReadsItsInProcessRunsReports(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "dep-config.yaml")
	cfgText := strings.Replace(gardenletProberConfigMap, "probeInterval: 30s", "probeInterval: 1s\ninitialDelay: 1s", 1)
	if err := os.WriteFile(file, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, _, err := ParseDWDFlags(roles.Prober, []string{"--config-file=" + file, "--metrics-bind-addr=0", "--health-bind-addr=0"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := opts.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shoot--a", Labels: map[string]string{"gardener.cloud/role": "shoot"}}})
	log := logrus.New()
	log.SetOutput(io.Discard)
	var mu sync.Mutex
	var probed []string
	engine := func(ctx context.Context, job *batchv1.Job, _ logrus.FieldLogger) (int32, string) {
		env := map[string]string{}
		for _, e := range job.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		o, err := probe.LoadOptions(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			return 2, err.Error()
		}
		mu.Lock()
		probed = append(probed, strings.Join(o.Namespaces, ","))
		mu.Unlock()
		return 0, probe.EncodeReport(probe.Report{End: time.Now(), Results: map[string]int{"scale-down": 1},
			Namespaces: map[string]probe.NamespaceResult{"shoot--a": {Last: probe.ResultScaleDown}}})
	}
	exec := inprocess.New(inprocess.Options{Log: log, NoEvents: true, Engine: engine})
	m := metrics.New("test")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Deps{
			Shared:  ctrl.Shared{Client: client, Log: log, Template: roles.InProcessTemplate(roles.Coordinator, cfg.JobTemplate, func(string) (string, bool) { return "garden", true }), Executor: exec},
			Config:  cfg,
			Options: opts,
			Metrics: m,
			Rights:  &rights.Rights{Namespaces: true, ReadSecrets: true, ScaleWorkloads: true},
		})
	}()
	waitFor(t, "the shard's run to report", func() bool {
		return sample(m.Prober.ProbeDecisions.WithLabelValues("scale-down")) >= 1 &&
			sample(m.Prober.ProbeMeltdown.WithLabelValues("shoot--a")) == 1 &&
			sample(m.Prober.ProbeLastProbe.WithLabelValues("shoot--a")) > 0
	})
	mu.Lock()
	if len(probed) == 0 || probed[0] != "shoot--a" {
		t.Errorf("runs probed %v, want the shard with shoot--a", probed)
	}
	mu.Unlock()
	for _, a := range client.Actions() {
		switch r := a.GetResource().Resource; r {
		case "jobs", "pods", "configmaps":
			t.Errorf("asked the API server to %s %s: the runs are in-process", a.GetVerb(), r)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second): // a hang catcher
		t.Fatal("Run did not return after cancel")
	}
}

// sample reads a counter's or gauge's value.
func sample(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return -1
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}
