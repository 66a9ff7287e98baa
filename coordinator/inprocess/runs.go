package inprocess

import (
	"context"
	"sync"
	"sync/atomic"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/reaper"
)

// follower is a controller's jobs.Runs: the reports of the runs of one kind in one
// namespace, handed over as each run ends, while it runs.
type follower struct {
	e         *Executor
	namespace string
	kind      jobs.Kind
	report    func(jobs.Report) bool
	synced    atomic.Bool
	calls     sync.Mutex // report is called one run at a time, as an informer calls its handlers
}

// Runs follows the runs of kind in namespace: each report is handed to report once, when its
// run ends (taken or not: a run here has no later change).
func (e *Executor) Runs(namespace string, kind jobs.Kind, report func(jobs.Report) bool) jobs.Runs {
	return &follower{e: e, namespace: namespace, kind: kind, report: report}
}

// RunWithContext hands the reports of the runs that end over until ctx ends.
func (f *follower) RunWithContext(ctx context.Context) {
	f.e.mu.Lock()
	f.e.followers[f] = struct{}{}
	f.e.mu.Unlock()
	f.synced.Store(true)
	<-ctx.Done()
	f.e.mu.Lock()
	delete(f.e.followers, f)
	f.e.mu.Unlock()
}

func (f *follower) HasSynced() bool { return f.synced.Load() }

// NotStarted: a run here starts as its Job is created.
func (*follower) NotStarted(jobs.Run) string { return "" }

// report hands the ended run's report to the controllers that follow its kind, as a Job's
// container's termination message would reach them: at most reaper.MaxTerminationMessage
// bytes.
func (e *Executor) report(job *batchv1.Job, message string) {
	if len(message) > reaper.MaxTerminationMessage {
		message = message[:reaper.MaxTerminationMessage]
	}
	rep := jobs.Report{Run: job.Namespace + "/" + job.Name, FinishedAt: e.now(), Message: message}
	kind := jobs.Kind(job.Labels[jobs.LabelKind])
	e.mu.Lock()
	var to []*follower
	for f := range e.followers {
		if f.kind == kind && f.namespace == job.Namespace {
			to = append(to, f)
		}
	}
	e.mu.Unlock()
	for _, f := range to {
		f.calls.Lock()
		f.report(rep)
		f.calls.Unlock()
	}
}
