package jobs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Report is what a finished run reported.
type Report struct {
	// Run names what ran, for log lines: a Job's pod (<namespace>/<name>), or an in-process
	// run's Job.
	Run string
	// FinishedAt is when the run ended.
	FinishedAt time.Time
	// Message is the run's report: what a Job's container writes as its termination message
	// (reaper.TerminationMessage, probe.EncodeReport).
	Message string
}

// Runs is what a controller follows of one kind's runs besides their Jobs: each finished
// run's Report, handed to the function given to Executor.Runs, and why an active run has not
// started. The coordinator runs it (RunWithContext) and waits for it (HasSynced).
type Runs interface {
	Follower
	// NotStarted says why job's run has not started yet; "" once it has (or has ended).
	NotStarted(job *batchv1.Job) string
}

// Follower is a cache the coordinator runs and waits for before its controllers act.
type Follower interface {
	RunWithContext(ctx context.Context)
	HasSynced() bool
}

// ReportOf is the Report of a Job's pod whose container (named after its kind) has
// terminated; false while it has not.
func ReportOf(pod *corev1.Pod, kind Kind) (Report, bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == string(kind) && t != nil {
			return Report{Run: pod.Namespace + "/" + pod.Name, FinishedAt: t.FinishedAt.Time, Message: t.Message}, true
		}
	}
	return Report{}, false
}

// podRuns follows a kind's Job pods: a pod's result is offered on each of its changes until
// the controller takes it (it declines while it does not lead), and then never again; a
// deleted pod is forgotten.
type podRuns struct {
	Objects
	kind   Kind
	report func(Report) bool

	mu    sync.Mutex
	taken map[types.UID]bool
}

func (e clusterExecutor) Runs(namespace string, kind Kind, report func(Report) bool) Runs {
	r := &podRuns{Objects: e.pods(namespace, labels.Set{LabelKind: string(kind)}.String()), kind: kind, report: report, taken: map[types.UID]bool{}}
	_, _ = r.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.offer,
		UpdateFunc: func(_, obj any) { r.offer(obj) },
		DeleteFunc: r.forget,
	})
	return r
}

// offer hands a terminated pod's result to the controller, unless it took it before. The
// controller is called outside the lock: an informer calls its handlers one at a time.
func (r *podRuns) offer(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	res, done := ReportOf(pod, r.kind)
	r.mu.Lock()
	taken := r.taken[pod.UID]
	r.mu.Unlock()
	if !done || taken || !r.report(res) {
		return
	}
	r.mu.Lock()
	r.taken[pod.UID] = true
	r.mu.Unlock()
}

func (r *podRuns) forget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		r.mu.Lock()
		delete(r.taken, pod.UID)
		r.mu.Unlock()
	}
}

// NotStarted is why the Job has no running (or finished) pod: none was created, or each
// stays Pending (no node fits, an image cannot be pulled).
func (r *podRuns) NotStarted(j *batchv1.Job) string {
	var pending []string
	for _, o := range r.GetIndexer().List() {
		pod, ok := o.(*corev1.Pod)
		if !ok || pod.Labels[batchv1.JobNameLabel] != j.Name {
			continue
		}
		if pod.Status.Phase != corev1.PodPending {
			return ""
		}
		why := "pod " + pod.Name + " Pending"
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				why += fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
			}
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				if w.Reason == "ContainerCreating" || w.Reason == "PodInitializing" {
					continue
				}
				why += fmt.Sprintf(" (%s: %s)", w.Reason, w.Message)
			}
		}
		pending = append(pending, why)
	}
	if len(pending) == 0 {
		return "no pod was created (a ResourceQuota or an admission webhook refusing it? see the Job's Events)"
	}
	return strings.Join(pending, "; ")
}
