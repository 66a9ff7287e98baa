package inprocess

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// fakeEngine is a run that ends when the test says, or when it is stopped.
type fakeEngine struct {
	mu      sync.Mutex
	started map[string]chan struct{} // job name → closed when an attempt starts
	results map[string]chan result   // job name → the attempt's outcome
	stopped map[string]bool          // job name → an attempt saw its context end
	calls   map[string]int
}

type result struct {
	code int32
	msg  string
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{started: map[string]chan struct{}{}, results: map[string]chan result{}, stopped: map[string]bool{}, calls: map[string]int{}}
}

func (f *fakeEngine) chans(name string) (chan struct{}, chan result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started[name] == nil {
		f.started[name] = make(chan struct{})
		f.results[name] = make(chan result, 10)
	}
	return f.started[name], f.results[name]
}

func (f *fakeEngine) run(ctx context.Context, job *batchv1.Job, _ logrus.FieldLogger) (int32, string) {
	started, results := f.chans(job.Name)
	f.mu.Lock()
	f.calls[job.Name]++
	if f.calls[job.Name] == 1 {
		close(started)
	}
	f.mu.Unlock()
	select {
	case r := <-results:
		return r.code, r.msg
	case <-ctx.Done():
		f.mu.Lock()
		f.stopped[job.Name] = true
		f.mu.Unlock()
		return 0, "stopped"
	}
}

func (f *fakeEngine) called(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeEngine) wasStopped(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stopped[name]
}

// rig is an executor running with a fake engine, a Launcher on it, run views of its weeder
// and probe runs and a follower of its weeder runs' reports, as the controllers build them,
// and the executor's log lines.
type rig struct {
	t        *testing.T
	e        *Executor
	engine   *fakeEngine
	launcher *jobs.Launcher
	views    map[jobs.Kind]*jobs.RunView
	reports  chan jobs.Report
	logged   *logtest.Hook

	mu    sync.Mutex
	ended map[string]jobs.Run // run name → the run as its view's Stopped handler was told it
}

func newRig(t *testing.T, tpl jobs.Template) *rig {
	t.Helper()
	log, logged := logtest.NewNullLogger()
	fe := newFakeEngine()
	e := New(Options{Log: log, Engine: fe.run})
	if tpl.Namespace == "" {
		tpl.Namespace = "garden"
	}
	tpl.Image = "in-process"
	r := &rig{t: t, e: e, engine: fe, launcher: &jobs.Launcher{Executor: e, Template: tpl}, reports: make(chan jobs.Report, 10),
		logged: logged, views: map[jobs.Kind]*jobs.RunView{}, ended: map[string]jobs.Run{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, kind := range []jobs.Kind{jobs.KindWeeder, jobs.KindProbe} {
		v, err := e.RunView(tpl.Namespace, kind, func(run jobs.Run) []string { return []string{run.Facts.Target} }, jobs.RunHandlers{
			Stopped:  func(run jobs.Run) { r.mu.Lock(); r.ended[run.Name] = run; r.mu.Unlock() },
			Reported: func(rep jobs.Report) bool { r.reports <- rep; return true },
		})
		if err != nil {
			t.Fatal(err)
		}
		r.views[kind] = v
		wg.Go(func() { v.RunWithContext(ctx) })
	}
	wg.Go(func() { e.Run(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), r.views[jobs.KindWeeder].HasSynced) {
		t.Fatal("caches did not sync")
	}
	waitFor(t, "the executor to run", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.ctx != nil
	})
	return r
}

// launch launches s over its target's active runs, as the controllers do.
func (r *rig) launch(s jobs.Spec) (jobs.Outcome, error) {
	return r.launcher.Launch(context.Background(), s, r.views[s.Kind].Active(s.Target()))
}

// endedRun is the run as its view told it stopped (false: not yet).
func (r *rig) endedRun(name string) (jobs.Run, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.ended[name]
	return run, ok
}

// warned: the executor logged a warning containing what.
func (r *rig) warned(what string) bool {
	for _, e := range r.logged.AllEntries() {
		if e.Level == logrus.WarnLevel && strings.Contains(e.Message, what) {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a hang catcher: each step takes milliseconds
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// report is the next run's report (a hang catcher fails the test).
func (r *rig) report() jobs.Report {
	r.t.Helper()
	select {
	case rep := <-r.reports:
		return rep
	case <-time.After(10 * time.Second):
		r.t.Fatal("no report arrived")
	}
	return jobs.Report{}
}

func weederSpec(t *testing.T, svc string, at time.Time) jobs.Spec {
	t.Helper()
	s, err := jobs.Weeder(jobs.WeederSpec{Namespace: "shoot--a", Service: svc, WatchDuration: 5 * time.Minute, TriggerTime: at,
		Selectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"role": "apiserver"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestARunShowsActiveThenCompletes: a launched weeder is a run the view shows active until it
// ends; then its report arrives once, and the view tells it stopped, not failed, and lets it go.
func TestARunShowsActiveThenCompletes(t *testing.T) {
	r := newRig(t, jobs.Template{})
	spec := weederSpec(t, "etcd-main-client", time.Now())
	out, err := r.launch(spec)
	if err != nil || out.Result != jobs.ResultCreated {
		t.Fatalf("launch: %v %v", out.Result, err)
	}
	if out.Run.Name != spec.Name() || out.Run.UID == "" || out.Run.Created.IsZero() || out.Run.Facts.Target != "shoot--a/etcd-main-client" {
		t.Errorf("started %+v; want the Job's name %s, a UID, a start time and the facts", out.Run, spec.Name())
	}
	started, results := r.engine.chans(out.Run.Name)
	<-started
	// De-duplication by target sees the running one.
	if active := r.views[jobs.KindWeeder].Active(spec.Target()); len(active) != 1 || active[0].UID != out.Run.UID {
		t.Fatalf("active %+v", active)
	}

	results <- result{0, "reaped=1 deferred=0"}
	if rep := r.report(); rep.Message != "reaped=1 deferred=0" || rep.Run != "garden/"+out.Run.Name || rep.FinishedAt.IsZero() {
		t.Errorf("report %+v", rep)
	}
	waitFor(t, "the run told ended, then gone", func() bool {
		run, ok := r.endedRun(out.Run.Name)
		return ok && run.Done && !run.Failed && !r.views[jobs.KindWeeder].Has("garden", out.Run.Name)
	})
	if active := r.views[jobs.KindWeeder].Active(spec.Target()); len(active) != 0 {
		t.Errorf("a finished run still counts as active: %v", active)
	}
	if n := len(r.reports); n != 0 {
		t.Errorf("%d more reports of one run", n)
	}
}

// TestStoppingARunEndsItAsSIGTERMWould: stopping a weeder (Launcher.Delete) ends its run as
// SIGTERM would; the view lets it go at once, and what the run reported as it stopped arrives.
func TestStoppingARunEndsItAsSIGTERMWould(t *testing.T) {
	r := newRig(t, jobs.Template{})
	out, err := r.launch(weederSpec(t, "kube-apiserver", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	started, _ := r.engine.chans(out.Run.Name)
	<-started
	deleted, err := r.launcher.Delete(context.Background(), []jobs.Run{out.Run})
	if err != nil || len(deleted) != 1 {
		t.Fatalf("deleted %v, %v", deleted, err)
	}
	if r.views[jobs.KindWeeder].Has("garden", out.Run.Name) {
		t.Error("the view still shows the stopped run")
	}
	if rep := r.report(); rep.Message != "stopped" {
		t.Errorf("report %+v", rep)
	}
	waitFor(t, "the run stopped, told going", func() bool {
		run, ok := r.endedRun(out.Run.Name)
		return r.engine.wasStopped(out.Run.Name) && ok && run.Going
	})
	// A run gone already is left gone.
	if err := r.e.Stop(context.Background(), out.Run); err != nil {
		t.Errorf("stopping again: %v", err)
	}
}

// TestAReplacedWeederStopsTheOldRunAndStartsTheNew: a new edge replaces the unarmed weeder
// (ReplaceActive): the old run is stopped and a new one starts.
func TestAReplacedWeederStopsTheOldRunAndStartsTheNew(t *testing.T) {
	r := newRig(t, jobs.Template{})
	t0 := time.Now()
	first, err := r.launch(weederSpec(t, "etcd-main-client", t0))
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := r.engine.chans(first.Run.Name)
	<-s1
	second, err := r.launch(weederSpec(t, "etcd-main-client", t0.Add(time.Second)))
	if err != nil || second.Result != jobs.ResultReplaced || len(second.Replaced) != 1 || second.Replaced[0] != first.Run.Name {
		t.Fatalf("second launch %v replaced %v: %v", second.Result, second.Replaced, err)
	}
	s2, _ := r.engine.chans(second.Run.Name)
	<-s2
	waitFor(t, "the first run stopped", func() bool { return r.engine.wasStopped(first.Run.Name) })
}

// TestAFailedRunIsNotRetried: a run that fails (exit 1) or refuses its settings (exit 2)
// runs once; the view tells it failed, and the warning says which.
func TestAFailedRunIsNotRetried(t *testing.T) {
	r := newRig(t, jobs.Template{})
	for _, tc := range []struct {
		svc    string
		code   int32
		reason string
	}{{"etcd-main-client", 1, reasonFailed}, {"kube-apiserver", jobs.ExitBadConfig, reasonPodFailurePolicy}} {
		out, err := r.launch(weederSpec(t, tc.svc, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		_, results := r.engine.chans(out.Run.Name)
		results <- result{tc.code, "failed"}
		waitFor(t, "the run told failed", func() bool {
			run, ok := r.endedRun(out.Run.Name)
			return ok && run.Failed && r.warned("its Job Failed ("+tc.reason+":")
		})
		if n := r.engine.called(out.Run.Name); n != 1 {
			t.Errorf("exit %d: %d runs, want 1", tc.code, n)
		}
		r.report()
	}
}

// TestARunEndsAtItsJobsDeadline: activeDeadlineSeconds bounds a run as it bounds a Job.
func TestARunEndsAtItsJobsDeadline(t *testing.T) {
	r := newRig(t, jobs.Template{})
	job, err := jobs.Build(r.launcher.Template, weederSpec(t, "etcd-main-client", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	job.Spec.ActiveDeadlineSeconds = ptr.To(int64(1))
	if _, err := r.e.Start(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run failed at its deadline", func() bool {
		run, ok := r.endedRun(job.Name)
		return ok && run.Failed && r.warned("its Job Failed ("+reasonDeadline+":")
	})
	if !r.engine.wasStopped(job.Name) {
		t.Error("the run was not told to stop at the deadline")
	}
}

// TestAProbeShardIsKeptAndItsRunFollowsItsMembership: a probe shard's second launch while
// its run goes on creates nothing (KeepActive, found by the de-duplication); the run reads
// its membership ConfigMap from the executor, each change as it is made.
func TestAProbeShardIsKeptAndItsRunFollowsItsMembership(t *testing.T) {
	r := newRig(t, jobs.Template{})
	ps := jobs.ProbeSpec{
		JobSettings: probe.JobSettings{
			Namespaces: []string{"shoot--a"}, Concurrency: 5,
			KubeconfigSecretName: "shoot-access-dependency-watchdog-probe",
			ProbeTimeout:         30 * time.Second, NodeMonitorGrace: 40 * time.Second,
			NodeLeaseFailureFraction: 0.6, LeaseExpiryBufferFraction: 0.75,
			DependentResources: `[{"ref":{"kind":"Deployment","name":"kube-controller-manager","apiVersion":"apps/v1"}}]`,
			RunDuration:        2 * time.Minute, Interval: 30 * time.Second,
		},
		Shard: "shard-0", MembershipIn: "garden", TriggerTime: time.Now(),
	}
	spec, err := jobs.Probe(ps)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	members := r.e.Memberships("garden", func(ns []string) { left = append(left, ns...) })
	if _, err := members.Set(context.Background(), "shard-0", probe.Membership{Namespaces: []string{"shoot--a"}}); err != nil {
		t.Fatal(err)
	}
	first, err := r.launch(spec)
	if err != nil || first.Result != jobs.ResultCreated {
		t.Fatalf("first %v %v", first.Result, err)
	}
	ps.TriggerTime = ps.TriggerTime.Add(time.Second)
	again, _ := jobs.Probe(ps)
	second, err := r.launch(again)
	if err != nil || second.Result != jobs.ResultKept || second.Run.Name != first.Run.Name {
		t.Fatalf("second %v (%v): want the running one kept", second.Result, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan probe.Membership, 10)
	go func() {
		_ = r.e.followMembership(ctx, "garden", jobs.MembershipName("shard-0"), func(m probe.Membership) { got <- m }, logrus.New())
	}()
	if m := <-got; strings.Join(m.Namespaces, ",") != "shoot--a" {
		t.Errorf("first membership %v", m.Namespaces)
	}
	if _, err := members.Set(context.Background(), "shard-0", probe.Membership{Namespaces: []string{"shoot--a", "shoot--b"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if strings.Join(m.Namespaces, ",") != "shoot--a,shoot--b" {
			t.Errorf("followed membership %v", m.Namespaces)
		}
	case <-time.After(10 * time.Second): // a hang catcher
		t.Fatal("the change did not reach the run")
	}

	// The controller is told who left a membership.
	if changed, err := members.Set(context.Background(), "shard-0", probe.Membership{Namespaces: []string{"shoot--b"}}); !changed || err != nil {
		t.Fatalf("set: changed %v, %v", changed, err)
	}
	if m, _ := members.Get("shard-0"); strings.Join(m.Namespaces, ",") != "shoot--b" || strings.Join(left, ",") != "shoot--a" {
		t.Errorf("membership %v, left %v: want shoot--b, shoot--a left", m.Namespaces, left)
	}
	if changed, _ := members.Set(context.Background(), "shard-0", probe.Membership{Namespaces: []string{"shoot--b"}}); changed {
		t.Error("setting the same membership again changed it")
	}
}

// TestNoRunStartsBeforeRunOrAfterIt: the executor refuses runs while it is not running, so a
// run never outlives its owner.
func TestNoRunStartsBeforeRunOrAfterIt(t *testing.T) {
	e := New(Options{Log: logrus.New(), Engine: newFakeEngine().run})
	tpl := jobs.Template{Namespace: "garden", Image: "in-process"}
	job, err := jobs.Build(tpl, weederSpec(t, "etcd-main-client", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(context.Background(), job); err == nil {
		t.Error("a Job was accepted before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	waitFor(t, "Run to start", func() bool { e.mu.Lock(); defer e.mu.Unlock(); return e.ctx != nil })
	first, err := e.Start(context.Background(), job)
	if err != nil {
		t.Fatalf("while running: %v", err)
	}
	// A retry of that launch (same name) is the run started, not a second one.
	if again, err := e.Start(context.Background(), job); err != nil || again.UID != first.UID {
		t.Errorf("started again: %v, %+v; want the run of uid %s", err, again, first.UID)
	}
	cancel()
	<-done // the run, blocked in the fake engine until its context ends, was waited for
	job.Name += "-later"
	if _, err := e.Start(context.Background(), job); err == nil {
		t.Error("a Job was accepted after Run ended")
	}
}

// TestTheEngineRefusesInvalidSettingsWithExitTwo: the default engine reads the Job's
// environment as the pod would; invalid settings are exit 2 with the subcommand's refusal as
// the termination message, and nothing is called.
func TestTheEngineRefusesInvalidSettingsWithExitTwo(t *testing.T) {
	e := New(Options{Log: logrus.New()})
	job := &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "weeder", Args: []string{"reap"}, Env: []corev1.EnvVar{{Name: "WATCH", Value: "true"}, {Name: "RUN_DURATION", Value: "soon"}},
	}}}}}}
	code, msg := e.opts.Engine(context.Background(), job, logrus.New())
	if code != jobs.ExitBadConfig || !strings.Contains(msg, "RUN_DURATION") || !strings.HasPrefix(msg, "depwatch reap: invalid configuration") {
		t.Errorf("exit %d, message %q", code, msg)
	}
}
