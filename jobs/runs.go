package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// NotStarted says why run has not started yet; "" once it has (or has ended).
	NotStarted(run Run) string
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
func (r *podRuns) NotStarted(j Run) string {
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

// Run is what a controller reads of one run: who it is (Stop's reference), when it was
// started, and what it was launched for (Facts, Armed), whichever executor carries it out.
type Run struct {
	Namespace, Name string
	UID             types.UID
	Created         time.Time
	Facts           Facts
	// Armed: a weeder run waiting for its service's return (Armed of its Job).
	Armed bool
}

// RunOf reads the Run of job.
func RunOf(job *batchv1.Job) Run {
	return Run{Namespace: job.Namespace, Name: job.Name, UID: job.UID, Created: job.CreationTimestamp.Time, Facts: ReadFacts(job), Armed: Armed(job)}
}

// Ref is the run as Executor.Stop and Launcher.Delete name it: namespace, name and UID.
func (r Run) Ref() batchv1.Job {
	return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name, UID: r.UID}}
}

// RunHandlers are told the changes of a RunView's runs, from the executor's events.
type RunHandlers struct {
	// Added: the view shows a run (one just started, or found at start).
	Added func(Run)
	// Stopped: a run the view showed active is no longer (it finished, or is going or gone),
	// once per run: a place under a cap of active runs is free.
	Stopped func(Run)
	// Failed: a run has just failed (its Failed condition appeared), once per run; a
	// resync or a restart, which see no change, do not tell it again.
	Failed func(Run)
}

// RunView is what a controller follows of one kind's runs: the active ones, looked up by an
// index the controller gives (what a run covers, say), and their changes (RunHandlers). The
// coordinator runs it (RunWithContext) and waits for it (HasSynced).
type RunView struct {
	Follower
	objs Objects
}

// runIndex indexes a RunView's runs by the controller's keys.
const runIndex = "depwatch-run-index"

// NewRunView follows the runs objs holds (Executor.Jobs), indexed by index, telling h.
func NewRunView(objs Objects, index func(Run) []string, h RunHandlers) (*RunView, error) {
	if err := objs.AddIndexers(cache.Indexers{runIndex: func(obj any) ([]string, error) {
		if j, ok := obj.(*batchv1.Job); ok {
			return index(RunOf(j)), nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	_, err := objs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if j, ok := obj.(*batchv1.Job); ok && h.Added != nil {
				h.Added(RunOf(j))
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*batchv1.Job)
			n, ok2 := cur.(*batchv1.Job)
			if !ok1 || !ok2 {
				return
			}
			if h.Stopped != nil && Active(o) && !Active(n) {
				h.Stopped(RunOf(n))
			}
			if h.Failed != nil && !Failed(o) && Failed(n) {
				h.Failed(RunOf(n))
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if j, ok := obj.(*batchv1.Job); ok && h.Stopped != nil && Active(j) {
				h.Stopped(RunOf(j))
			}
		},
	})
	if err != nil {
		return nil, err
	}
	return &RunView{Follower: objs, objs: objs}, nil
}

// Active lists the active runs (not finished, not going) under key of the view's index, by name.
func (v *RunView) Active(key string) []Run {
	objs, _ := v.objs.GetIndexer().ByIndex(runIndex, key)
	var out []Run
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok && Active(j) {
			out = append(out, RunOf(j))
		}
	}
	slices.SortFunc(out, func(a, b Run) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// AllActive lists every active run, by name.
func (v *RunView) AllActive() []Run {
	var out []Run
	for _, o := range v.objs.GetStore().List() {
		if j, ok := o.(*batchv1.Job); ok && Active(j) {
			out = append(out, RunOf(j))
		}
	}
	slices.SortFunc(out, func(a, b Run) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Count is the number of active runs.
func (v *RunView) Count() int {
	n := 0
	for _, o := range v.objs.GetStore().List() {
		if j, ok := o.(*batchv1.Job); ok && Active(j) {
			n++
		}
	}
	return n
}

// Has: the view shows the run (it has caught up with its start), active or not.
func (v *RunView) Has(namespace, name string) bool {
	_, ok, _ := v.objs.GetIndexer().GetByKey(cache.NewObjectName(namespace, name).String())
	return ok
}
