package jobs

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

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
