package jobs

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	batchv1listers "k8s.io/client-go/listers/batch/v1"
)

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

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
	// Job is the created Job (or, with ResultKept, the active one that was kept).
	Job *batchv1.Job
	// Replaced names the Jobs deleted to make way for Job.
	Replaced []string
}

// Launcher creates Jobs with de-duplication: at most one active Job per target (kind,
// namespace, service). Safe for concurrent use for different targets; the caller serialises
// launches for the same target (the coordinator's workqueue does).
type Launcher struct {
	// Executor carries the runs out: Jobs in the cluster (InCluster) or in-process.
	Executor Executor
	// Template is resolved: Namespace and Image set.
	Template Template
	// Cache is the executor's Jobs of the launches' kind (Executor.Jobs), where Active looks
	// for a target's active Job. A Job created a moment ago may be missing from it; the
	// caller must not launch for the same target again before its cache has caught up.
	Cache batchv1listers.JobLister
}

// Active lists the Jobs of the spec's target that have not finished and are not being deleted.
func (l *Launcher) Active(s Spec) ([]batchv1.Job, error) {
	sel := labels.Set{LabelKind: string(s.Kind), LabelNamespace: LabelValue(s.Namespace)}
	if s.Service != "" {
		sel[LabelService] = LabelValue(s.Service)
	}
	if l.Cache == nil { // a launcher made for LaunchOver only: it has no view of the active Jobs
		return nil, fmt.Errorf("looking for active %s Jobs for %s: this launcher has no Job cache", s.Kind, s.Target())
	}
	items, err := l.Cache.Jobs(l.Template.Namespace).List(sel.AsSelector())
	if err != nil {
		return nil, fmt.Errorf("listing %s Jobs for %s from the cache: %w", s.Kind, s.Target(), err)
	}
	var active []batchv1.Job
	for _, j := range items {
		if !Active(j) {
			continue
		}
		// Labels may be shortened with a hash; the facts have the exact target.
		if t := ReadFacts(j).Target; t != "" && t != s.Target() {
			continue
		}
		active = append(active, *j)
	}
	return active, nil
}

// Launch creates the Job for s. If a Job for the same target is active, s.OnActive decides:
// ReplaceActive deletes it (propagation Background: the Job goes at once, its pod gets
// SIGTERM and the reaper in it stops cleanly) and then creates the new one, so the new run's
// duration starts afresh; KeepActive creates nothing.
func (l *Launcher) Launch(ctx context.Context, s Spec) (Outcome, error) {
	active, err := l.Active(s)
	if err != nil {
		return Outcome{Result: ResultError}, err
	}
	return l.LaunchOver(ctx, s, active)
}

// LaunchOver is Launch for a caller that has just listed the target's active Jobs itself
// (Active), so they are not listed twice.
func (l *Launcher) LaunchOver(ctx context.Context, s Spec, active []batchv1.Job) (Outcome, error) {
	job, err := Build(l.Template, s)
	if err != nil {
		return Outcome{Result: ResultError}, err
	}
	out := Outcome{Result: ResultCreated}
	if len(active) > 0 {
		if s.OnActive == KeepActive {
			return Outcome{Result: ResultKept, Job: &active[0]}, nil
		}
		replaced, err := l.Delete(ctx, active)
		out.Replaced = replaced
		if err != nil {
			return Outcome{Result: ResultError, Replaced: replaced}, fmt.Errorf("replacing the active Job: %w", err)
		}
		out.Result = ResultReplaced
	}
	created, err := l.Executor.Start(ctx, job)
	if err != nil {
		return Outcome{Result: ResultError, Replaced: out.Replaced}, fmt.Errorf("creating Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	out.Job = created
	return out, nil
}

// Delete stops the given Jobs' runs (Executor.Stop) and returns the names stopped: the
// coordinator stops a service's weeder with it (the active ones, from Active) and removes
// probe Jobs beyond the history limits.
func (l *Launcher) Delete(ctx context.Context, list []batchv1.Job) ([]string, error) {
	var deleted []string
	for _, a := range list {
		if err := l.Executor.Stop(ctx, &a); err != nil {
			return deleted, fmt.Errorf("deleting Job %s/%s: %w", a.Namespace, a.Name, err)
		}
		deleted = append(deleted, a.Name)
	}
	return deleted, nil
}

// Finished is true once the Job has a Complete or Failed condition (or their early
// SuccessCriteriaMet / FailureTarget forms).
func Finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobFailed, batchv1.JobSuccessCriteriaMet, batchv1.JobFailureTarget:
			return true
		}
	}
	return false
}

// Active is true while the Job counts as running for its target: it is not being deleted
// and has not finished. De-duplication, the weeder's cap and the prober's shards all count
// Jobs by it.
func Active(j *batchv1.Job) bool { return j.DeletionTimestamp == nil && !Finished(j) }

// Failed is true once the Job has its Failed condition: it ran out of retries or its deadline.
func Failed(j *batchv1.Job) bool { return conditionTrue(j, batchv1.JobFailed) }
