package jobs

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	batchv1informers "k8s.io/client-go/informers/batch/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
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
// runs of a kind as Runs (RunView: which are active, which ended, and how), stop them, receive
// each finished run's Report (Runs), and keep each probe shard's membership, which its run
// follows (Memberships). The Job executor (InCluster) creates the Jobs through the API server,
// where the Job controller and the kubelet run the pod, and reads the runs from the Jobs'
// informer; the in-process executor runs the engines in this process and tells the views
// each run's start and end itself (package inprocess).
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
	// changes; the coordinator runs it (RunWithContext) and waits for it (HasSynced).
	RunView(namespace string, kind Kind, index func(Run) []string, h RunHandlers) (*RunView, error)

	// Memberships keeps the probe shards' memberships in namespace, each followed by its
	// shard's running run; left is told the namespaces that leave one.
	Memberships(namespace string, left func(namespaces []string)) Memberships

	// Runs follows the runs of kind in namespace: report is handed each finished run's
	// Report, one call at a time, until it returns true (taken: it is not offered again);
	// false (not leading, say) leaves it to a later change of the run, if any.
	Runs(namespace string, kind Kind, report func(Report) (taken bool)) Runs
}

// InCluster is the Job executor: runs are Jobs created through client.
func InCluster(client kubernetes.Interface) Executor { return clusterExecutor{client} }

type clusterExecutor struct{ client kubernetes.Interface }

func (clusterExecutor) Kind() ExecutorKind { return ExecutorJob }

func (e clusterExecutor) Start(ctx context.Context, job *batchv1.Job) (Run, error) {
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
func (e clusterExecutor) Stop(ctx context.Context, run Run) error {
	err := e.client.BatchV1().Jobs(run.Namespace).Delete(ctx, run.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &run.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// RunView reads the runs from the informer of the kind's Jobs, each Job's change told to the view
// as its Run.
func (e clusterExecutor) RunView(namespace string, kind Kind, index func(Run) []string, h RunHandlers) (*RunView, error) {
	inf := cached(batchv1informers.NewFilteredJobInformer(e.client, namespace, 0, namespaced(), byLabels(labels.Set{LabelKind: string(kind)}.String())))
	v := NewRunView(inf, nil, index, h)
	observe := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok {
			v.Observe(RunOf(j))
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
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
	v.synced = reg.HasSynced
	return v, nil
}

// pods is the Job pods' cache behind Runs.
func (e clusterExecutor) pods(namespace, selector string) cache.SharedIndexInformer {
	return cached(corev1informers.NewFilteredPodInformer(e.client, namespace, 0, namespaced(), byLabels(selector)))
}

// namespaced is a new cache's indexers (each its own: AddIndexers adds to them).
func namespaced() cache.Indexers {
	return cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
}

func byLabels(selector string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.LabelSelector = selector }
}

// cached is a cache of client-go's filtered informer inf, its objects kept without their
// managedFields, which no controller reads.
func cached(inf cache.SharedIndexInformer) cache.SharedIndexInformer {
	_ = inf.SetTransform(StripManagedFields)
	return inf
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
