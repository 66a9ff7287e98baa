package jobs

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// this probe shard". To the controllers a run is a Job object either way, built by Build
// from a Spec, with the same name, labels and annotations (Facts): they start it, follow it
// (is it still running, has it failed), stop it, receive each finished run's Report (Runs),
// and keep each probe shard's membership, which its run follows (Memberships). The Job
// executor (InCluster) does this with the API server, where the Job controller and the
// kubelet run the pod, and the controllers follow informers; the in-process executor runs
// the engines in this process and hands the controllers its own objects as they change, and
// each run's result when it ends (package inprocess).
type Executor interface {
	// Kind names the executor.
	Kind() ExecutorKind

	// Start starts the run job describes (built by Build). A run of that name that exists
	// already, a retry of a launch that did succeed (same target, same trigger time), is
	// returned as it is.
	Start(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error)
	// Stop stops job's run, named by its namespace, name and UID, as SIGTERM stops a pod: it
	// finishes what it has in hand and goes. A run gone already, or one of the same name
	// started since, is left as it is.
	Stop(ctx context.Context, job *batchv1.Job) error

	// Jobs is what the controllers follow of the runs: the Jobs in namespace matching the
	// label selector, as a cache that the coordinator runs (RunWithContext) and waits for
	// (HasSynced).
	Jobs(namespace, selector string) Objects

	// Memberships keeps the probe shards' memberships in namespace, each followed by its
	// shard's running run; left is told the namespaces that leave one.
	Memberships(namespace string, left func(namespaces []string)) Memberships

	// Runs follows the runs of kind in namespace: report is handed each finished run's
	// Report, one call at a time, until it returns true (taken: it is not offered again);
	// false (not leading, say) leaves it to a later change of the run, if any.
	Runs(namespace string, kind Kind, report func(Report) (taken bool)) Runs
}

// Objects is a cache of objects of one type and the events that change it, as an informer
// gives them (cache.SharedIndexInformer is one). Its indexer has cache.NamespaceIndex.
type Objects interface {
	Follower
	AddIndexers(cache.Indexers) error
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	GetIndexer() cache.Indexer
	GetStore() cache.Store
}

// InCluster is the Job executor: runs are Jobs created through client.
func InCluster(client kubernetes.Interface) Executor { return clusterExecutor{client} }

type clusterExecutor struct{ client kubernetes.Interface }

func (clusterExecutor) Kind() ExecutorKind { return ExecutorJob }

func (e clusterExecutor) Start(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	created, err := e.client.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return e.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
	}
	return created, err
}

// Stop deletes the Job, guarded by its UID, with propagation Background: the Job goes at
// once, its pod gets SIGTERM.
func (e clusterExecutor) Stop(ctx context.Context, job *batchv1.Job) error {
	err := e.client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &job.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (e clusterExecutor) Jobs(namespace, selector string) Objects {
	return cached(batchv1informers.NewFilteredJobInformer(e.client, namespace, 0, namespaced(), byLabels(selector)))
}

// pods is the Job pods' cache behind Runs.
func (e clusterExecutor) pods(namespace, selector string) Objects {
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
func cached(inf cache.SharedIndexInformer) Objects {
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
