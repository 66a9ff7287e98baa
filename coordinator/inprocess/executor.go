// Package inprocess is the in-process executor: where a cluster grants depwatch no Jobs (a
// Gardener seed runs dependency-watchdog's Deployments under RBAC that has none), each run
// the coordinator's controllers launch, a weeder or a probe shard, is the same engine
// (package reaper's, package probe's) called in the coordinator's own process.
//
// To the controllers nothing changes: they start, follow and stop runs through jobs.Executor.
// Here a run is a goroutine and an entry in a map, no Job object: Start reads the engine's
// settings from the built Job's environment, as its pod would, and runs the engine once,
// bounded by the Job's activeDeadlineSeconds. The controllers' run views are told each run's
// start and end; when a run ends, its report goes to the views (Reported), and the run is
// forgotten (no pod, no retry, no history). Stop stops a run as SIGTERM would. The probe
// shards' memberships are values handed straight to the shards' runs. Each run's log lines
// are the coordinator's, with its Job's name in field "job".
//
// One thing a run here does not take from its Job: its client's rate limits (KUBE_API_*),
// which size a Job's pod. A run here makes its requests through the process's clients'
// shared rate limiters (Options.Config, Options.EventsConfig), so the process keeps, runs and
// controller together, to the one budget its flags give it (--kube-api-qps, --kube-api-burst),
// as one client's limiter bounds dependency-watchdog's process.
package inprocess

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/termmsg"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// Options configure the executor.
type Options struct {
	// Config reaches the API server with the process's rate limiter (apilimit.Limit.Shared):
	// every run's clients are built from it as it is, so they share that limiter with the
	// controller's clients and each other.
	Config *rest.Config
	// EventsConfig is Config with the process's Events' rate limiter, shared the same way
	// (nil: Config).
	EventsConfig *rest.Config
	// Discovery is shared by the probe runs' RESTMappers (nil: each run reads its own).
	Discovery discovery.CachedDiscoveryInterface
	// NoEvents: the runs write no Events (the cluster grants this process none outside its
	// own namespace); their log lines say the same.
	NoEvents bool
	Log      logrus.FieldLogger
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
	// Engine carries a run out (tests); nil: the reaper or probe engine, as the Job's
	// container arguments say.
	Engine Engine
}

// Engine runs job's run until it ends or ctx is done (SIGTERM), and returns what its
// container would: the exit code and the termination message (the run's report).
type Engine func(ctx context.Context, job *batchv1.Job, log logrus.FieldLogger) (exitCode int32, message string)

// Executor carries the controllers' runs out in this process (jobs.Executor).
type Executor struct {
	opts    Options
	members *memberships

	mu      sync.Mutex
	ctx     context.Context // Run's; nil until Run starts
	stopped bool            // Run's ctx ended: no run starts any more
	active  map[cache.ObjectName]*active
	views   []view // the controllers' run views, told each run's start, end and report
	running sync.WaitGroup
}

// active is a run going on, its kind, and how to stop it.
type active struct {
	run  jobs.Run
	kind jobs.Kind
	stop context.CancelFunc
}

// view is a controller's run view of one kind's runs in one namespace.
type view struct {
	namespace string
	kind      jobs.Kind
	*jobs.RunView
}

var _ jobs.Executor = (*Executor)(nil)

// New builds the executor; Run makes it carry runs out.
func New(o Options) *Executor {
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Log, o.EventsConfig = cmp.Or[logrus.FieldLogger](o.Log, logrus.New()), cmp.Or(o.EventsConfig, o.Config)
	e := &Executor{opts: o, active: map[cache.ObjectName]*active{},
		members: &memberships{byName: map[string]probe.Membership{}, runs: map[chan probe.Membership]string{}}}
	if o.Engine == nil {
		e.opts.Engine = e.engine
	}
	return e
}

func (*Executor) Kind() jobs.ExecutorKind { return jobs.ExecutorInProcess }

// Run carries runs out until ctx ends, then stops every run still going (as SIGTERM would)
// and waits for them: no run outlives it. Runs started before Run or after its end are
// refused.
func (e *Executor) Run(ctx context.Context) {
	e.mu.Lock()
	e.ctx = ctx
	e.mu.Unlock()
	<-ctx.Done()
	e.mu.Lock()
	e.stopped = true // no running.Go after this: Wait below sees every run
	e.mu.Unlock()
	e.running.Wait()
}

// RunView is told the runs of kind in namespace: those going on now, then each start and end.
func (e *Executor) RunView(namespace string, kind jobs.Kind, index func(jobs.Run) []string, h jobs.RunHandlers) (*jobs.RunView, error) {
	v := view{namespace, kind, jobs.NewRunView(nil, nil, index, h)}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.views = append(e.views, v)
	for _, a := range e.active {
		v.tell(a.kind, a.run)
	}
	return v.RunView, nil
}

// tell shows run, of kind, to the view if it is one of the view's; a run that ended goes from
// it.
func (v view) tell(kind jobs.Kind, run jobs.Run) {
	if run.Namespace != v.namespace || kind != v.kind {
		return
	}
	v.Observe(run)
	if !run.Active() {
		v.Forget(run.Namespace, run.Name)
	}
}

// Start starts job's run; a run of that name going on already is returned as it is.
func (e *Executor) Start(_ context.Context, job *batchv1.Job) (jobs.Run, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctx == nil || e.stopped {
		return jobs.Run{}, errors.New("the in-process executor is not running (starting or stopping): no run can start now")
	}
	key := cache.NewObjectName(job.Namespace, job.Name)
	if a, ok := e.active[key]; ok {
		return a.run, nil
	}
	job = job.DeepCopy()
	job.UID, job.CreationTimestamp = uuid.NewUUID(), metav1.NewTime(e.opts.Now())
	var ctx context.Context
	var stop context.CancelFunc
	if d := job.Spec.ActiveDeadlineSeconds; d != nil {
		ctx, stop = context.WithDeadline(e.ctx, job.CreationTimestamp.Add(time.Duration(*d)*time.Second))
	} else {
		ctx, stop = context.WithCancel(e.ctx)
	}
	a := &active{run: jobs.RunOf(job), kind: jobs.Kind(job.Labels[jobs.LabelKind]), stop: stop}
	e.active[key] = a
	for _, v := range e.views {
		v.tell(a.kind, a.run)
	}
	e.running.Go(func() { e.execute(ctx, job, a) })
	return a.run, nil
}

// Stop stops the run, as deleting a Job with propagation Background does: it gets SIGTERM,
// finishes what it has in hand, and goes. It leaves the views at once.
func (e *Executor) Stop(_ context.Context, run jobs.Run) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := cache.NewObjectName(run.Namespace, run.Name)
	if a, ok := e.active[key]; ok && a.run.UID == run.UID { // else gone already, or another run since
		going := a.run
		going.Going = true
		e.forget(a, going)
		a.stop()
	}
	return nil
}

// forget removes the run a and tells the views it ended as run says; e.mu is held.
func (e *Executor) forget(a *active, run jobs.Run) {
	delete(e.active, cache.NewObjectName(run.Namespace, run.Name))
	for _, v := range e.views {
		v.tell(a.kind, run)
	}
}

// The reasons of a failed run: the Job controller's names where it has the same case.
const (
	reasonFailed           = "RunFailed"
	reasonDeadline         = "DeadlineExceeded"
	reasonPodFailurePolicy = "PodFailurePolicy"
)

// execute carries job's run out once and ends it: its report to the controllers, then its
// end to their views. A run that was stopped (by Stop, or the executor stopping) only
// reports.
func (e *Executor) execute(ctx context.Context, job *batchv1.Job, a *active) {
	log := e.opts.Log.WithFields(logrus.Fields{"job": job.Namespace + "/" + job.Name, "executor": string(jobs.ExecutorInProcess)})
	code, msg := e.opts.Engine(ctx, job, log)
	stopped := ctx.Err() // before the stop below cancels ctx
	e.report(job, a.kind, msg)
	a.stop() // releases the run's context and its deadline's timer
	reason, message := "", ""
	switch {
	case errors.Is(stopped, context.DeadlineExceeded): // however the run ended
		reason, message = reasonDeadline, "Job was active longer than specified deadline"
	case code == 0:
	case stopped != nil:
		return // stopped, or the executor stops
	case code == jobs.ExitBadConfig:
		reason, message = reasonPodFailurePolicy, fmt.Sprintf("the run refused its settings (exit code %d): running it again cannot help", code)
	default:
		reason, message = reasonFailed, fmt.Sprintf("the run failed (exit code %d); an in-process run is not retried", code)
	}
	if reason == "" {
		log.WithField("result", string(batchv1.JobComplete)).Info("The in-process run ended: its Job is Complete.")
	} else {
		log.WithFields(logrus.Fields{"result": string(batchv1.JobFailed), "reason": reason}).Warnf("The in-process run ended: its Job Failed (%s: %s).", reason, message)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active[cache.NewObjectName(job.Namespace, job.Name)] != a {
		return // stopped meanwhile: the views were told
	}
	ended := a.run
	ended.Done, ended.Failed, ended.Ended = true, reason != "", e.opts.Now()
	e.forget(a, ended)
}

// report hands the ended run's report to the controllers' views of its kind, as a Job's
// container's termination message would reach them: at most termmsg.MaxBytes
// bytes, once (taken or not: a run here has no later change).
func (e *Executor) report(job *batchv1.Job, kind jobs.Kind, message string) {
	if len(message) > termmsg.MaxBytes {
		message = message[:termmsg.MaxBytes]
	}
	rep := jobs.Report{Run: job.Namespace + "/" + job.Name, FinishedAt: e.opts.Now(), Message: message}
	e.mu.Lock()
	views := slices.Clone(e.views)
	e.mu.Unlock()
	for _, v := range views {
		if v.namespace == job.Namespace && v.kind == kind {
			v.Report(rep)
		}
	}
}
