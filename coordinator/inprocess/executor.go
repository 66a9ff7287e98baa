// Package inprocess is the in-process executor: where a cluster grants depwatch no Jobs (a
// Gardener seed runs dependency-watchdog's Deployments under RBAC that has none), each run
// the coordinator's controllers launch, a weeder or a probe shard, is the same engine
// (package reaper's, package probe's) called in the coordinator's own process.
//
// To the controllers nothing changes: they still launch, list, watch and delete Job objects
// through jobs.Executor. This package keeps those objects (and each run's pod, and the probe
// shards' membership ConfigMaps) itself and plays the Job controller and the kubelet for
// them: a created Job starts a goroutine that reads the engine's settings from the Job's
// environment, as its pod would, and runs it, bounded by the Job's activeDeadlineSeconds;
// the run's pod is Running meanwhile and ends Succeeded or Failed with the run's termination message (the probe's report, the reaper's
// summary); the Job then gets its Complete or Failed condition, retries up to its
// backoffLimit (none after exit code 2, as its podFailurePolicy says), and goes
// ttlSecondsAfterFinished after it finished. Deleting the Job stops its run as SIGTERM would.
// Each run's log lines are the coordinator's, with the Job's name in field "job".
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
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/reaper"
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
	// Engine runs one attempt of a run (tests); nil: the reaper or probe engine, as the
	// Job's container arguments say.
	Engine Engine
}

// Engine runs one attempt of job's run until it ends or ctx is done (SIGTERM), and returns
// what its container would: the exit code and the termination message.
type Engine func(ctx context.Context, job *batchv1.Job, log logrus.FieldLogger) (exitCode int32, message string)

// Executor carries the controllers' runs out in this process (jobs.Executor).
type Executor struct {
	opts    Options
	objects *objects
	log     logrus.FieldLogger
	now     func() time.Time

	mu      sync.Mutex
	ctx     context.Context // Run's; nil until Run starts
	stopped bool            // Run's ctx ended: no run starts any more
	runs    map[types.UID]*run
	running sync.WaitGroup
}

var _ jobs.Executor = (*Executor)(nil)

// run is one Job's run: its goroutine and how to stop it.
type run struct {
	stop    context.CancelFunc
	deleted bool // the Job was deleted: its pods go when the run ends
}

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
	e := &Executor{opts: o, log: o.Log, now: o.Now, runs: map[types.UID]*run{}}
	if o.Engine == nil {
		e.opts.Engine = e.engine
	}
	e.objects = newObjects(func() metav1.Time { return metav1.NewTime(e.now()) })
	return e
}

func (*Executor) Kind() jobs.ExecutorKind { return jobs.ExecutorInProcess }

// sweepInterval is how often finished Jobs past their ttlSecondsAfterFinished are removed.
const sweepInterval = 30 * time.Second

// Run carries runs out until ctx ends, then stops every run still going (as SIGTERM would)
// and waits for them: no run outlives it. Jobs created before Run or after its end are
// refused.
func (e *Executor) Run(ctx context.Context) {
	e.mu.Lock()
	e.ctx = ctx
	e.mu.Unlock()
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			e.mu.Lock()
			e.stopped = true // no running.Go after this: Wait below sees every run
			e.mu.Unlock()
			e.running.Wait()
			return
		case <-t.C:
			e.sweep()
		}
	}
}

// CreateJob keeps job and starts its run.
func (e *Executor) CreateJob(_ context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctx == nil || e.stopped {
		return nil, errors.New("the in-process executor is not running (starting or stopping): no run can start now")
	}
	obj, err := e.objects.create(kindJob, job)
	if err != nil {
		return nil, err
	}
	created := obj.(*batchv1.Job)
	ctx, stop := context.WithCancel(e.ctx)
	if d := created.Spec.ActiveDeadlineSeconds; d != nil {
		ctx, stop = withDeadline(ctx, stop, created.CreationTimestamp.Add(time.Duration(*d)*time.Second))
	}
	r := &run{stop: stop}
	e.runs[created.UID] = r
	e.running.Go(func() { e.execute(ctx, created, r) })
	return created.DeepCopy(), nil
}

// withDeadline adds a deadline to ctx; the returned stop cancels both.
func withDeadline(ctx context.Context, stop context.CancelFunc, at time.Time) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithDeadline(ctx, at)
	return dctx, func() { cancel(); stop() }
}

func (e *Executor) GetJob(_ context.Context, namespace, name string) (*batchv1.Job, error) {
	obj, err := e.objects.get(kindJob, namespace, name)
	if err != nil {
		return nil, err
	}
	return obj.(*batchv1.Job), nil
}

func (e *Executor) ListJobs(_ context.Context, namespace string, selector labels.Selector) ([]batchv1.Job, error) {
	objs := e.objects.list(kindJob, namespace, selector)
	out := make([]batchv1.Job, 0, len(objs))
	for _, o := range objs {
		out = append(out, *o.(*batchv1.Job))
	}
	return out, nil
}

// DeleteJob removes the Job and stops its run, as deleting a Job with propagation Background
// does: its pod gets SIGTERM, finishes what it has in hand, and goes.
func (e *Executor) DeleteJob(_ context.Context, namespace, name string, uid types.UID) error {
	obj, err := e.objects.remove(kindJob, namespace, name, uid)
	if err != nil {
		return err
	}
	j := obj.(*batchv1.Job)
	e.mu.Lock()
	r, running := e.runs[j.UID]
	if running {
		r.deleted = true
		r.stop()
	}
	e.mu.Unlock()
	if !running {
		e.removePods(j)
	}
	return nil
}

func (e *Executor) CreateConfigMap(_ context.Context, cm *corev1.ConfigMap) error {
	_, err := e.objects.create(kindConfigMap, cm)
	return err
}

func (e *Executor) UpdateConfigMap(_ context.Context, cm *corev1.ConfigMap) error {
	return e.objects.update(kindConfigMap, cm)
}

func (e *Executor) DeleteConfigMap(_ context.Context, namespace, name string) error {
	_, err := e.objects.remove(kindConfigMap, namespace, name, "")
	return err
}

func (e *Executor) Jobs(namespace, selector string) jobs.Objects {
	return e.objects.view(kindJob, namespace, selector)
}

func (e *Executor) Pods(namespace, selector string) jobs.Objects {
	return e.objects.view(kindPod, namespace, selector)
}

func (e *Executor) ConfigMaps(namespace, selector string) jobs.Objects {
	return e.objects.view(kindConfigMap, namespace, selector)
}

// Job failure reasons, the Job controller's.
const (
	reasonBackoffLimit     = "BackoffLimitExceeded"
	reasonDeadline         = "DeadlineExceeded"
	reasonPodFailurePolicy = "PodFailurePolicy"
)

// retryBackoff is the Job controller's pod back-off: 10 s, doubling, at most 6 minutes.
func retryBackoff(failures int) time.Duration {
	return min(10*time.Second<<min(failures-1, 6), 6*time.Minute)
}

// execute is the Job controller and the kubelet for one Job: attempts (a pod each) until one
// succeeds, the back-off limit or the deadline is reached, the run's exit code says retrying
// cannot help, or the Job is deleted or the executor stops.
func (e *Executor) execute(ctx context.Context, job *batchv1.Job, r *run) {
	defer e.finished(job, r)
	log := e.log.WithFields(logrus.Fields{"job": job.Namespace + "/" + job.Name, "executor": string(jobs.ExecutorInProcess)})
	e.markStarted(job)
	limit := int(ptr.Deref(job.Spec.BackoffLimit, jobs.DefaultBackoffLimit))
	for failures := 0; ; {
		pod := e.startPod(job)
		code, msg := e.opts.Engine(ctx, job, log)
		e.endPod(pod, code, msg)
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded): // however the run ended
			e.endJob(job, batchv1.JobFailed, reasonDeadline, "Job was active longer than specified deadline")
			return
		case code == 0:
			e.endJob(job, batchv1.JobComplete, "", "")
			return
		case ctx.Err() != nil:
			return // deleted, or the executor stops
		case code == jobs.ExitBadConfig:
			e.endJob(job, batchv1.JobFailed, reasonPodFailurePolicy, fmt.Sprintf("Container %s for pod %s/%s failed with exit code %d matching FailJob rule at index 0", pod.Spec.Containers[0].Name, pod.Namespace, pod.Name, code))
			return
		}
		failures++
		if failures > limit {
			e.endJob(job, batchv1.JobFailed, reasonBackoffLimit, "Job has reached the specified backoff limit")
			return
		}
		log.WithFields(logrus.Fields{"exitCode": code, "failures": failures, "backoffLimit": limit, "action": "retry", "reason": "run failed"}).
			Warnf("The in-process run failed (exit code %d): it runs again after %s, as the Job controller would start a new pod.", code, retryBackoff(failures))
		t := time.NewTimer(retryBackoff(failures))
		select {
		case <-ctx.Done():
			t.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				e.endJob(job, batchv1.JobFailed, reasonDeadline, "Job was active longer than specified deadline")
			}
			return
		case <-t.C:
		}
	}
}

// finished forgets the run; a deleted Job's pods go now that its run has stopped.
func (e *Executor) finished(job *batchv1.Job, r *run) {
	r.stop()
	e.mu.Lock()
	delete(e.runs, job.UID)
	deleted := r.deleted
	e.mu.Unlock()
	if deleted {
		e.removePods(job)
	}
}

// markStarted records the Job's start, as the Job controller does once its pod exists.
func (e *Executor) markStarted(job *batchv1.Job) {
	now := metav1.NewTime(e.now())
	e.objects.mutate(kindJob, job.Namespace, job.Name, func(o runtime.Object) {
		j := o.(*batchv1.Job)
		j.Status.StartTime = &now
		j.Status.Active = 1
	})
}

// endJob gives the Job its final condition (a Job already gone is left gone) and says so,
// as `kubectl get job` would show it.
func (e *Executor) endJob(job *batchv1.Job, cond batchv1.JobConditionType, reason, message string) {
	log := e.log.WithFields(logrus.Fields{"job": job.Namespace + "/" + job.Name, "executor": string(jobs.ExecutorInProcess), "result": string(cond)})
	if cond == batchv1.JobComplete {
		log.Info("The in-process run ended: its Job is Complete.")
	} else {
		log.WithField("reason", reason).Warnf("The in-process run ended: its Job Failed (%s: %s).", reason, message)
	}
	now := metav1.NewTime(e.now())
	e.objects.mutate(kindJob, job.Namespace, job.Name, func(o runtime.Object) {
		j := o.(*batchv1.Job)
		if j.UID != job.UID {
			return
		}
		j.Status.Active = 0
		if cond == batchv1.JobComplete {
			j.Status.Succeeded++
			j.Status.CompletionTime = &now
			j.Status.Conditions = append(j.Status.Conditions,
				batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
				batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now})
			return
		}
		j.Status.Conditions = append(j.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: now, LastTransitionTime: now},
			batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: now, LastTransitionTime: now})
	})
}

// startPod records a Running pod for one attempt of the Job's run, named and labelled as the
// Job controller names and labels its pods.
func (e *Executor) startPod(job *batchv1.Job) *corev1.Pod {
	now := metav1.NewTime(e.now())
	tpl := job.Spec.Template.DeepCopy()
	lbl := map[string]string{}
	for k, v := range tpl.Labels {
		lbl[k] = v
	}
	lbl[batchv1.JobNameLabel] = job.Name
	lbl[batchv1.ControllerUidLabel] = string(job.UID)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: job.Name + "-" + suffix(), Namespace: job.Namespace, Labels: lbl, Annotations: tpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		// The spec only names the containers: no kubelet reads it, and the run's settings are
		// the Job's (its copy here would double what the executor and the controllers hold).
		Spec: corev1.PodSpec{RestartPolicy: tpl.Spec.RestartPolicy, ServiceAccountName: tpl.Spec.ServiceAccountName},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, StartTime: &now,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, c := range tpl.Spec.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	obj, err := e.objects.create(kindPod, pod)
	if err != nil { // a name taken: another suffix
		pod.Name = job.Name + "-" + suffix()
		if obj, err = e.objects.create(kindPod, pod); err != nil {
			return pod
		}
	}
	return obj.(*corev1.Pod)
}

// endPod records the attempt's end: phase Succeeded or Failed, the container terminated with
// its exit code and termination message.
func (e *Executor) endPod(pod *corev1.Pod, code int32, message string) {
	if len(message) > reaper.MaxTerminationMessage {
		message = message[:reaper.MaxTerminationMessage]
	}
	now := metav1.NewTime(e.now())
	e.objects.mutate(kindPod, pod.Namespace, pod.Name, func(o runtime.Object) {
		p := o.(*corev1.Pod)
		p.Status.Phase = corev1.PodSucceeded
		reason := "Completed"
		if code != 0 {
			p.Status.Phase, reason = corev1.PodFailed, "Error"
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		for i := range p.Status.ContainerStatuses {
			cs := &p.Status.ContainerStatuses[i]
			started := now
			if cs.State.Running != nil {
				started = cs.State.Running.StartedAt
			}
			cs.Ready, cs.Started = false, ptr.To(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, Message: message, StartedAt: started, FinishedAt: now}}
		}
	})
}

// removePods removes the Job's pods (its run has ended).
func (e *Executor) removePods(job *batchv1.Job) {
	pods := e.objects.list(kindPod, job.Namespace, labels.SelectorFromSet(labels.Set{batchv1.ControllerUidLabel: string(job.UID)}))
	for _, o := range pods {
		p := o.(*corev1.Pod)
		_, _ = e.objects.remove(kindPod, p.Namespace, p.Name, p.UID)
	}
}

// sweep removes the finished Jobs whose ttlSecondsAfterFinished has passed, with their pods,
// as the TTL-after-finished controller does.
func (e *Executor) sweep() {
	objs := e.objects.list(kindJob, "", labels.Everything())
	now := e.now()
	for _, o := range objs {
		j := o.(*batchv1.Job)
		at, done := finishedAt(j)
		if !done || j.Spec.TTLSecondsAfterFinished == nil || now.Before(at.Add(time.Duration(*j.Spec.TTLSecondsAfterFinished)*time.Second)) {
			continue
		}
		if _, err := e.objects.remove(kindJob, j.Namespace, j.Name, j.UID); err == nil {
			e.removePods(j)
		}
	}
}

func finishedAt(j *batchv1.Job) (time.Time, bool) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

const suffixChars = "bcdfghjklmnpqrstvwxz2456789" // the Job controller's pod name alphabet

func suffix() string {
	b := make([]byte, 5)
	for i := range b {
		b[i] = suffixChars[rand.IntN(len(suffixChars))]
	}
	return string(b)
}
