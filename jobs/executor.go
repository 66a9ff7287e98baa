package jobs

import (
	"context"
	"fmt"
	"slices"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// ExecutorKind names what carries out the controllers' runs.
type ExecutorKind string

const (
	// ExecutorJob: each run is a batch/v1 Job in the cluster, its pod running `depwatch reap`
	// or `depwatch probe` under the service account of its kind (the default).
	ExecutorJob ExecutorKind = "job"
	// ExecutorInProcess: each run is the same engine (reaper, probe) called in the
	// coordinator's own process, for clusters that grant it no Jobs.
	ExecutorInProcess ExecutorKind = "in-process"
)

// Executor is the one seam between the controllers and what carries out "run this weeder,
// this probe shard". A run is started from the Job Build makes of a Spec (its settings are
// the Job's container's environment, as its pod would read them); the controllers follow the
// runs of a kind through a RunView (which are active, which ended, and how, and each finished
// run's Report), stop them, and keep each probe shard's membership, which its run follows
// (Memberships). The Job executor (InCluster) creates the Jobs through the API server,
// where the Job controller and the kubelet run the pod, and reads the runs from the Jobs'
// and pods' informers; the in-process executor runs the engines in this process and tells the
// views each run's start, end and report itself (package inprocess).
type Executor interface {
	// Kind names the executor.
	Kind() ExecutorKind

	// Start starts the run job describes (built by Build). A run of that name that exists
	// already, a retry of a launch that did succeed (same target, same trigger time), is
	// returned as it is.
	Start(ctx context.Context, job *batchv1.Job) (Run, error)
	// Stop stops run, named by its namespace, name and UID, as SIGTERM stops a pod: it
	// finishes what it has in hand and goes. A run gone already, or one of the same name
	// started since, is left as it is.
	Stop(ctx context.Context, run Run) error

	// RunView follows the runs of kind in namespace, indexed by index, telling h their
	// changes and handing it their reports; the coordinator runs it (RunWithContext) and
	// waits for it (HasSynced).
	RunView(namespace string, kind Kind, index func(Run) []string, h RunHandlers) (*RunView, error)

	// Memberships keeps the probe shards' memberships in namespace, each followed by its
	// shard's running run; left is told the namespaces that leave one.
	Memberships(namespace string, left func(namespaces []string)) Memberships
}

// InCluster is the Job executor: runs are Jobs created through client. What the controllers
// follow in the Jobs' namespace (the runs' Jobs, their pods, the shards' memberships) comes
// from one shared informer factory per namespace: the weeder and the prober share each watch.
func InCluster(client kubernetes.Interface) Executor {
	return &clusterExecutor{client: client, factories: map[string]informers.SharedInformerFactory{}}
}

type clusterExecutor struct {
	client kubernetes.Interface

	mu        sync.Mutex
	factories map[string]informers.SharedInformerFactory
}

// informers is the shared informer factory of namespace's depwatch objects: those with a
// depwatch.io/kind label, kept without their managedFields.
func (e *clusterExecutor) informers(namespace string) informers.SharedInformerFactory {
	e.mu.Lock()
	defer e.mu.Unlock()
	f, ok := e.factories[namespace]
	if !ok {
		f = informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelKind }),
			informers.WithTransform(StripManagedFields))
		e.factories[namespace] = f
	}
	return f
}

// shared is what a controller runs and waits for of informers from a shared factory: the
// factory, started once for all (Start starts only what has not started), and synced when
// the controller's handlers (regs) have been told what the informers held at start.
type shared struct {
	factory informers.SharedInformerFactory
	regs    []cache.ResourceEventHandlerRegistration
}

func (s shared) RunWithContext(ctx context.Context) {
	s.factory.Start(ctx.Done())
	<-ctx.Done()
	s.factory.Shutdown() // waits for the informers' goroutines
}

func (s shared) HasSynced() bool {
	for _, r := range s.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

func (*clusterExecutor) Kind() ExecutorKind { return ExecutorJob }

func (e *clusterExecutor) Start(ctx context.Context, job *batchv1.Job) (Run, error) {
	created, err := e.client.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = e.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
	}
	if err != nil {
		return Run{}, err
	}
	return RunOf(created), nil
}

// Stop deletes the Job, guarded by its UID, with propagation Background: the Job goes at
// once, its pod gets SIGTERM.
func (e *clusterExecutor) Stop(ctx context.Context, run Run) error {
	err := e.client.BatchV1().Jobs(run.Namespace).Delete(ctx, run.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &run.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// RunView reads the runs from the informer of the namespace's Jobs, each change of a Job of
// kind told to the view as its Run, and their reports and starts from their pods' (podRuns).
func (e *clusterExecutor) RunView(namespace string, kind Kind, index func(Run) []string, h RunHandlers) (*RunView, error) {
	f := e.informers(namespace)
	v := NewRunView(nil, nil, index, h)
	podInf := f.Core().V1().Pods().Informer()
	pods := &podRuns{pods: podInf.GetIndexer(), kind: kind, view: v, taken: sets.New[types.UID]()}
	podsReg, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pods.offer,
		UpdateFunc: func(_, obj any) { pods.offer(obj) },
		DeleteFunc: pods.forget,
	})
	if err != nil {
		return nil, fmt.Errorf("following the %s Jobs' pods: %w", kind, err)
	}
	observe := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok && j.Labels[LabelKind] == string(kind) {
			v.Observe(RunOf(j))
		}
	}
	reg, err := f.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if j, ok := obj.(*batchv1.Job); ok {
				v.Forget(j.Namespace, j.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("following the %s Jobs: %w", kind, err)
	}
	src := shared{f, []cache.ResourceEventHandlerRegistration{reg, podsReg}}
	v.src, v.synced, v.notStarted = src, src.HasSynced, pods.NotStarted
	return v, nil
}

// StripManagedFields drops managedFields before objects are cached (an informer's
// transform): no decision reads them, and on a seed they are a large share of every cached
// object.
func StripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// Result of a Launch, also the `result` label of the launch metric.
type Result string

const (
	ResultCreated  Result = "created"  // no active Job for the target; a new one was created
	ResultReplaced Result = "replaced" // active Job(s) deleted, a new one created
	ResultKept     Result = "kept"     // an active Job was left running (KeepActive); nothing created
	ResultError    Result = "error"
)

// Outcome tells what Launch did.
type Outcome struct {
	Result Result
	// Run is the started run (or, with ResultKept, the active one that was kept).
	Run Run
	// Replaced names the runs stopped to make way for Run.
	Replaced []string
}

// Launcher starts runs with de-duplication: at most one active run per target (kind,
// namespace, service). Safe for concurrent use for different targets; the caller serialises
// launches for the same target (the coordinator's workqueue does).
type Launcher struct {
	// Executor carries the runs out: Jobs in the cluster (InCluster) or in-process.
	Executor Executor
	// Template is resolved: Namespace and Image set.
	Template Template
}

// Launch starts the run of s over active, the target's active runs as the caller's RunView
// shows them (a run started a moment ago may be missing from it: the caller must not launch
// for the same target again before its view has caught up). With active runs, s.OnActive
// decides: ReplaceActive stops them (a Job goes at once, its pod gets SIGTERM and the reaper
// in it stops cleanly) and then starts the new one, so the new run's duration starts afresh;
// KeepActive starts nothing.
func (l *Launcher) Launch(ctx context.Context, s Spec, active []Run) (Outcome, error) {
	job, err := Build(l.Template, s)
	if err != nil {
		return Outcome{Result: ResultError}, err
	}
	out := Outcome{Result: ResultCreated}
	if len(active) > 0 {
		if s.OnActive == KeepActive {
			return Outcome{Result: ResultKept, Run: active[0]}, nil
		}
		replaced, err := l.Delete(ctx, active)
		out.Replaced = replaced
		if err != nil {
			return Outcome{Result: ResultError, Replaced: replaced}, fmt.Errorf("replacing the active Job: %w", err)
		}
		out.Result = ResultReplaced
	}
	out.Run, err = l.Executor.Start(ctx, job)
	if err != nil {
		return Outcome{Result: ResultError, Replaced: out.Replaced}, fmt.Errorf("creating Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return out, nil
}

// Delete stops the given runs (Executor.Stop) and returns the names stopped: the coordinator
// stops a service's weeder with it and removes probe Jobs beyond the history limits.
func (l *Launcher) Delete(ctx context.Context, list []Run) ([]string, error) {
	var deleted []string
	for _, a := range list {
		if err := l.Executor.Stop(ctx, a); err != nil {
			return deleted, fmt.Errorf("deleting Job %s/%s: %w", a.Namespace, a.Name, err)
		}
		deleted = append(deleted, a.Name)
	}
	return deleted, nil
}

// Finished is true once the Job has a Complete or Failed condition (or their early
// SuccessCriteriaMet / FailureTarget forms).
func Finished(j *batchv1.Job) bool {
	return slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Status == corev1.ConditionTrue && slices.Contains([]batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed, batchv1.JobSuccessCriteriaMet, batchv1.JobFailureTarget}, c.Type)
	})
}

// Failed is true once the Job has its Failed condition: it ran out of retries or its deadline.
func Failed(j *batchv1.Job) bool { return conditionTrue(j, batchv1.JobFailed) }
