// Package inprocess is the in-process executor: where a cluster grants depwatch no Jobs (a
// Gardener seed runs dependency-watchdog's Deployments under RBAC that has none), each run
// the coordinator's controllers launch, a weeder or a probe shard, is the same engine
// (package reaper's, package probe's) called in the coordinator's own process.
//
// To the controllers nothing changes: they still launch, list, watch and delete Job objects
// through jobs.Executor. This package keeps those objects itself, and the probe shards'
// memberships as values handed straight to the shards' runs: a created Job starts a goroutine that reads the engine's settings from
// the Job's environment, as its pod would, and runs it once, bounded by the Job's
// activeDeadlineSeconds. When the run ends, its report goes to the controllers (Runs), the
// Job gets its Complete or Failed condition, and the Job goes: nothing here keeps a finished
// run (no pod, no retry, no history). Deleting the Job stops its run as SIGTERM would. Each
// run's log lines are the coordinator's, with the Job's name in field "job".
//
// One thing a run here does not take from its Job: its client's rate limits (KUBE_API_*),
// which size a Job's pod. A run here makes its requests through the process's clients'
// shared rate limiters (Options.Config, Options.EventsConfig), so the process keeps, runs and
// controller together, to the one budget its flags give it (--kube-api-qps, --kube-api-burst),
// as one client's limiter bounds dependency-watchdog's process.
package inprocess

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/depwatch/depwatch/jobs"
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
	objects *objects
	members *memberships
	log     logrus.FieldLogger
	now     func() time.Time

	mu        sync.Mutex
	ctx       context.Context // Run's; nil until Run starts
	stopped   bool            // Run's ctx ended: no run starts any more
	runs      map[types.UID]context.CancelFunc
	followers map[*follower]struct{} // the controllers' followers of the runs' reports, while they run
	running   sync.WaitGroup
}

var _ jobs.Executor = (*Executor)(nil)

// New builds the executor; Run makes it carry runs out.
func New(o Options) *Executor {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = logrus.New()
	}
	if o.EventsConfig == nil {
		o.EventsConfig = o.Config
	}
	e := &Executor{opts: o, log: o.Log, now: o.Now, runs: map[types.UID]context.CancelFunc{}, followers: map[*follower]struct{}{}}
	if o.Engine == nil {
		e.opts.Engine = e.engine
	}
	e.members = newMemberships()
	e.objects = newObjects(func() metav1.Time { return metav1.NewTime(e.now()) })
	return e
}

func (*Executor) Kind() jobs.ExecutorKind { return jobs.ExecutorInProcess }

// Run carries runs out until ctx ends, then stops every run still going (as SIGTERM would)
// and waits for them: no run outlives it. Jobs created before Run or after its end are
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

// Start keeps job and starts its run; a Job of that name kept already is returned as it is.
func (e *Executor) Start(_ context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctx == nil || e.stopped {
		return nil, errors.New("the in-process executor is not running (starting or stopping): no run can start now")
	}
	obj, err := e.objects.create(job)
	if apierrors.IsAlreadyExists(err) {
		if obj, err = e.objects.get(job.Namespace, job.Name); err == nil {
			return obj.(*batchv1.Job), nil
		}
	}
	if err != nil {
		return nil, err
	}
	created := obj.(*batchv1.Job)
	ctx, stop := context.WithCancel(e.ctx)
	if d := created.Spec.ActiveDeadlineSeconds; d != nil {
		ctx, stop = withDeadline(ctx, stop, created.CreationTimestamp.Add(time.Duration(*d)*time.Second))
	}
	e.runs[created.UID] = stop
	e.running.Go(func() { e.execute(ctx, created) })
	return created.DeepCopy(), nil
}

// withDeadline adds a deadline to ctx; the returned stop cancels both.
func withDeadline(ctx context.Context, stop context.CancelFunc, at time.Time) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithDeadline(ctx, at)
	return dctx, func() { cancel(); stop() }
}

// Stop removes the Job and stops its run, as deleting a Job with propagation Background
// does: its pod gets SIGTERM, finishes what it has in hand, and goes.
func (e *Executor) Stop(_ context.Context, job *batchv1.Job) error {
	if _, err := e.objects.remove(job.Namespace, job.Name, job.UID); err == nil { // else gone already, or another run since
		e.mu.Lock()
		if stop, running := e.runs[job.UID]; running {
			stop()
		}
		e.mu.Unlock()
	}
	return nil
}

func (e *Executor) Jobs(namespace, selector string) jobs.Objects {
	return e.objects.view(namespace, selector)
}

// The reasons of a failed run's Job: the Job controller's names where it has the same case.
const (
	reasonFailed           = "RunFailed"
	reasonDeadline         = "DeadlineExceeded"
	reasonPodFailurePolicy = "PodFailurePolicy"
)

// execute carries job's run out once and ends it: its report to the controllers, then the
// Job's final condition, then the Job goes. A run that was stopped (its Job deleted, or the
// executor stopping) only reports.
func (e *Executor) execute(ctx context.Context, job *batchv1.Job) {
	log := e.log.WithFields(logrus.Fields{"job": job.Namespace + "/" + job.Name, "executor": string(jobs.ExecutorInProcess)})
	code, msg := e.opts.Engine(ctx, job, log)
	stopped := ctx.Err() // before the stop below cancels ctx
	e.report(job, msg)
	e.mu.Lock()
	e.runs[job.UID]() // releases the run's context and its deadline's timer
	delete(e.runs, job.UID)
	e.mu.Unlock()
	switch {
	case errors.Is(stopped, context.DeadlineExceeded): // however the run ended
		e.endJob(job, batchv1.JobFailed, reasonDeadline, "Job was active longer than specified deadline")
	case code == 0:
		e.endJob(job, batchv1.JobComplete, "", "")
	case stopped != nil:
		return // deleted, or the executor stops
	case code == jobs.ExitBadConfig:
		e.endJob(job, batchv1.JobFailed, reasonPodFailurePolicy, fmt.Sprintf("the run refused its settings (exit code %d): running it again cannot help", code))
	default:
		e.endJob(job, batchv1.JobFailed, reasonFailed, fmt.Sprintf("the run failed (exit code %d); an in-process run is not retried", code))
	}
	// Nothing reads a finished run here but the controllers, which were told: the Job goes.
	_, _ = e.objects.remove(job.Namespace, job.Name, job.UID)
}

// endJob gives the Job its final condition, which is what the controllers read of a run's
// end (a Job already gone is left gone), and says so, as `kubectl get job` would show it.
func (e *Executor) endJob(job *batchv1.Job, cond batchv1.JobConditionType, reason, message string) {
	log := e.log.WithFields(logrus.Fields{"job": job.Namespace + "/" + job.Name, "executor": string(jobs.ExecutorInProcess), "result": string(cond)})
	if cond == batchv1.JobComplete {
		log.Info("The in-process run ended: its Job is Complete.")
	} else {
		log.WithField("reason", reason).Warnf("The in-process run ended: its Job Failed (%s: %s).", reason, message)
	}
	now := metav1.NewTime(e.now())
	e.objects.mutate(job.Namespace, job.Name, func(o runtime.Object) {
		j := o.(*batchv1.Job)
		if j.UID != job.UID {
			return
		}
		j.Status.Conditions = append(j.Status.Conditions,
			batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: now, LastTransitionTime: now})
	})
}
