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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
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

// podRuns follows a kind's Job pods for a RunView: a pod's result is offered on each of its
// changes until the controller takes it (it declines while it does not lead), and then never
// again; a deleted pod is forgotten. taken needs no lock: an informer calls one registration's
// handlers one at a time.
type podRuns struct {
	pods  cache.Indexer // the Jobs' pods of every kind
	kind  Kind
	view  *RunView // told each report (Report)
	taken sets.Set[types.UID]
}

// offer hands a terminated pod's result to the controller, unless it took it before.
func (r *podRuns) offer(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels[LabelKind] != string(r.kind) || r.taken.Has(pod.UID) {
		return
	}
	if res, done := ReportOf(pod, r.kind); done && r.view.Report(res) {
		r.taken.Insert(pod.UID)
	}
}

func (r *podRuns) forget(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		r.taken.Delete(pod.UID)
	}
}

// NotStarted is why the Job has no running (or finished) pod: none was created, or each
// stays Pending (no node fits, an image cannot be pulled).
func (r *podRuns) NotStarted(j Run) string {
	var pending []string
	for _, o := range r.pods.List() {
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
// started, what it was launched for (Facts, Armed), and how far it has come, whichever
// executor carries it out.
type Run struct {
	Namespace, Name string
	UID             types.UID
	Created         time.Time
	Facts           Facts
	// Armed: a weeder run waiting for its service's return (Armed of its Job).
	Armed bool
	// Done: the run has ended or is ending (Finished of its Job); Failed: it failed (its
	// Failed condition); Going: it is being stopped (its Job is being deleted).
	Done, Failed, Going bool
	// Ended is when a Complete or Failed run ended; zero before.
	Ended time.Time
}

// Active: the run counts as running for what it covers: not done, not going. De-duplication,
// the weeder's cap and the prober's shards count runs by it.
func (r Run) Active() bool { return !r.Done && !r.Going }

// RunOf reads the Run of job.
func RunOf(job *batchv1.Job) Run {
	r := Run{Namespace: job.Namespace, Name: job.Name, UID: job.UID, Created: job.CreationTimestamp.Time, Facts: ReadFacts(job), Armed: Armed(job),
		Done: Finished(job), Failed: Failed(job), Going: job.DeletionTimestamp != nil}
	if conditionTrue(job, batchv1.JobComplete) || r.Failed {
		r.Ended = finishedAt(job)
	}
	return r
}

// RunHandlers are told the changes of a RunView's runs, one at a time, by the view's own
// goroutine (a handler may take the controller's locks).
type RunHandlers struct {
	// Added: the view shows a run (one just started, or found at start).
	Added func(Run)
	// Stopped: a run the view showed active is no longer (it finished, or is going or gone),
	// once per run: a place under a cap of active runs is free.
	Stopped func(Run)
	// Failed: a run has just failed, once per run; a resync or a restart, which see no
	// change, do not tell it again.
	Failed func(Run)
	// Reported is handed each finished run's Report (a Job's: its pod's termination
	// message), one at a time, by the executor, until it returns true (taken: it is not
	// offered again); false (not leading, say) leaves it to a later change of the run, if any.
	Reported func(Report) (taken bool)
}

// RunView is what a controller follows of one kind's runs (Executor.RunView): the runs, looked
// up by an index the controller gives (what a run covers, say), and their changes
// (RunHandlers). The executor tells the view each run's state as it changes (Observe, Forget);
// the coordinator runs it (RunWithContext) and waits for it (HasSynced).
type RunView struct {
	src        Follower    // what feeds the view (the Jobs' informers), or nil: the executor itself
	synced     func() bool // src's handlers have been told what src held at start
	notStarted func(Run) string
	runs       cache.Indexer
	h          RunHandlers

	mu    sync.Mutex
	queue []func()
	wake  chan struct{}

	reports sync.Mutex // Reported is called one report at a time
}

// runIndex indexes a RunView's runs by the controller's keys; targetIndex by their target.
const (
	runIndex    = "depwatch-run-index"
	targetIndex = "depwatch-run-target"
)

// NewRunView is a view of runs indexed by index, telling h, fed by an executor: src (nil: none)
// is run with the view, and synced says when src has fed what it held at start (nil: at once).
func NewRunView(src Follower, synced func() bool, index func(Run) []string, h RunHandlers) *RunView {
	if synced == nil {
		synced = func() bool { return true }
	}
	key := func(obj any) (string, error) {
		r := obj.(*Run)
		return cache.NewObjectName(r.Namespace, r.Name).String(), nil
	}
	return &RunView{src: src, synced: synced, h: h, wake: make(chan struct{}, 1), runs: cache.NewIndexer(key, cache.Indexers{
		runIndex:    func(obj any) ([]string, error) { return index(*obj.(*Run)), nil },
		targetIndex: func(obj any) ([]string, error) { return []string{obj.(*Run).Facts.Target}, nil },
	})}
}

// Observe records run as it is now (added or changed), and queues what changed for the
// handlers.
func (v *RunView) Observe(run Run) {
	v.mu.Lock()
	defer v.mu.Unlock()
	old, had := v.get(run.Namespace, run.Name)
	if had && old.UID != run.UID { // a run of the same name, started since: the old one is gone
		v.forget(old)
		had = false
	}
	_ = v.runs.Add(&run)
	if !had { // one found ended already (at a restart) was told before, by the process that saw it end
		v.tell(v.h.Added, run)
		return
	}
	v.tell(v.h.Stopped, run, old.Active() && !run.Active())
	v.tell(v.h.Failed, run, !old.Failed && run.Failed)
}

// Forget removes the run named; one still active is told Stopped.
func (v *RunView) Forget(namespace, name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, had := v.get(namespace, name); had {
		v.forget(old)
	}
}

func (v *RunView) forget(old Run) {
	_ = v.runs.Delete(&old)
	v.tell(v.h.Stopped, old, old.Active())
}

func (v *RunView) get(namespace, name string) (Run, bool) {
	obj, ok, _ := v.runs.GetByKey(cache.NewObjectName(namespace, name).String())
	if !ok {
		return Run{}, false
	}
	return *obj.(*Run), true
}

// tell queues h(run) when every condition holds; v.mu is held, so the handlers are told in
// the order the changes were made.
func (v *RunView) tell(h func(Run), run Run, when ...bool) {
	for _, ok := range when {
		if !ok {
			return
		}
	}
	if h == nil {
		return
	}
	v.queue = append(v.queue, func() { h(run) })
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

// RunWithContext runs what feeds the view and tells the handlers each change, until ctx ends.
func (v *RunView) RunWithContext(ctx context.Context) {
	var fed sync.WaitGroup
	if v.src != nil {
		fed.Go(func() { v.src.RunWithContext(ctx) })
	}
	defer fed.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-v.wake:
		}
		for {
			v.mu.Lock()
			if len(v.queue) == 0 {
				v.mu.Unlock()
				break
			}
			next := v.queue[0]
			v.queue = v.queue[1:]
			v.mu.Unlock()
			next()
		}
	}
}

// HasSynced: the view holds the runs that were there when it started.
func (v *RunView) HasSynced() bool { return v.synced() }

// NotStarted says why run has not started yet; "" once it has (or has ended), and for a run
// that starts as it is started (in-process).
func (v *RunView) NotStarted(run Run) string {
	if v.notStarted == nil {
		return ""
	}
	return v.notStarted(run)
}

// Active lists the active runs under key of the view's index, by name.
func (v *RunView) Active(key string) []Run { return v.list(runIndex, key, Run.Active) }

// ForTarget lists the runs for target (a Spec's Target) that match, by name.
func (v *RunView) ForTarget(target string, match func(Run) bool) []Run {
	return v.list(targetIndex, target, match)
}

// AllActive lists every active run, by name.
func (v *RunView) AllActive() []Run { return v.list("", "", Run.Active) }

// Count is the number of active runs.
func (v *RunView) Count() int { return len(v.AllActive()) }

// Report hands a finished run's report to the controller (RunHandlers.Reported), one at a
// time, and says whether it took it; the executors call it. Without a handler nothing takes
// it.
func (v *RunView) Report(rep Report) (taken bool) {
	if v.h.Reported == nil {
		return false
	}
	v.reports.Lock()
	defer v.reports.Unlock()
	return v.h.Reported(rep)
}

// Has: the view shows the run (it has caught up with its start), active or not.
func (v *RunView) Has(namespace, name string) bool {
	_, ok := v.get(namespace, name)
	return ok
}

func (v *RunView) list(index, key string, match func(Run) bool) []Run {
	objs := v.runs.List()
	if index != "" {
		objs, _ = v.runs.ByIndex(index, key)
	}
	var out []Run
	for _, o := range objs {
		if r := *o.(*Run); match(r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Run) int { return strings.Compare(a.Name, b.Name) })
	return out
}
