package jobs

import (
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/depwatch/depwatch/reaper"
)

// AnnotationArmed marks an armed weeder Job: "true" when it was launched as its service went
// down, to wait for its return (depwatch's coordinator writes it with AnnotationArmedAt). A
// weeder Job written by hand says so with this annotation (examples/weeder-job.yaml).
const AnnotationArmed = "depwatch.io/armed"

// managedBy is LabelManagedBy of every Job the coordinator makes.
const managedBy = "depwatch-coordinator"

// Facts are what the coordinator reads back from a Job it made: why and when it was
// launched, what it acts for, whether it is armed. Build writes them as annotations
// (Facts.annotations) and ReadFacts reads them back; nothing else writes or parses them.
type Facts struct {
	// Target is <namespace>/<service>, <namespace> or a batch's name (AnnotationTarget).
	Target string
	// Targets are a batch weeder's services, <namespace>/<service> (AnnotationTargets).
	Targets []string
	// Namespaces a probe Job of a shard probes, in order (AnnotationNamespaces).
	Namespaces []string
	// Membership is the ConfigMap whose membership a shard's Job follows (AnnotationMembership).
	Membership  string
	Trigger     string    // AnnotationTrigger; "" = not said
	TriggerTime time.Time // AnnotationTriggerTime
	// Armed (AnnotationArmed, AnnotationArmedAt): launched when the outage began, at ArmedAt.
	Armed   bool
	ArmedAt time.Time
}

// facts are the Facts Build writes for s.
func (s Spec) facts() Facts {
	f := Facts{Target: s.Target(), Targets: s.Batch, Namespaces: s.Namespaces, Membership: s.Membership, Trigger: s.Trigger, TriggerTime: s.TriggerTime, Armed: s.Armed}
	if s.Armed {
		f.ArmedAt = s.TriggerTime // the outage began when the coordinator saw it
	}
	return f
}

// factKeys are the annotations Facts are written to.
var factKeys = []string{AnnotationTarget, AnnotationTargets, AnnotationNamespaces, AnnotationMembership, AnnotationTrigger,
	AnnotationTriggerTime, AnnotationArmed, AnnotationArmedAt}

func (f Facts) annotations() map[string]string {
	a := map[string]string{
		AnnotationTriggerTime: formatTime(f.TriggerTime),
		AnnotationTarget:      f.Target,
	}
	for k, v := range map[string]string{AnnotationTargets: strings.Join(f.Targets, ","), AnnotationNamespaces: strings.Join(f.Namespaces, ","),
		AnnotationMembership: f.Membership, AnnotationTrigger: f.Trigger} {
		if v != "" { // written only when said
			a[k] = v
		}
	}
	if f.Armed {
		a[AnnotationArmed] = "true"
		a[AnnotationArmedAt] = formatTime(f.ArmedAt)
	}
	return a
}

// ReadFacts reads back the Facts Build wrote into j; what is missing or unreadable is left
// zero. It is the one reader of a Job's target: a Job made by hand is covered only if it
// carries AnnotationTarget too (examples/weeder-job.yaml).
func ReadFacts(j *batchv1.Job) Facts {
	a := j.Annotations
	list := func(v string) []string {
		if v == "" {
			return nil
		}
		return strings.Split(v, ",")
	}
	at, armedAt := a[AnnotationArmedAt]
	return Facts{Target: a[AnnotationTarget], Targets: list(a[AnnotationTargets]), Namespaces: list(a[AnnotationNamespaces]),
		Membership: a[AnnotationMembership], Trigger: a[AnnotationTrigger], TriggerTime: parseTime(a[AnnotationTriggerTime]),
		Armed: armedAt || a[AnnotationArmed] == "true", ArmedAt: parseTime(at)}
}

// Covers is what a Job acts for: a batch weeder's services, a shard probe Job's namespaces,
// else its one Target (<namespace>/<service>, or <namespace>); nil for a Job that says none.
func (f Facts) Covers() []string {
	switch {
	case len(f.Targets) > 0:
		return f.Targets
	case len(f.Namespaces) > 0:
		return f.Namespaces
	case f.Target != "":
		return []string{f.Target}
	}
	return nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// parseTime is v as formatTime writes it; zero when it is not.
func parseTime(v string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, v) // zero on an error
	return t
}

// Armed reports whether a weeder Job was launched when the outage began, to wait for its
// service. Weeders launched on a return also follow their service's readiness, but they are
// not armed. For the coordinator's Jobs the answer is their Facts alone.
func Armed(j *batchv1.Job) bool {
	f := ReadFacts(j)
	if f.Armed || j.Labels[LabelManagedBy] == managedBy {
		return f.Armed
	}
	// A Job written by hand should say so with AnnotationArmed. Earlier manuals armed one
	// with START_WHEN_READY alone ("when etcd is back, restart ..." as one kubectl apply
	// during the outage), and such Jobs must keep counting as armed, or a return would
	// launch a second weeder beside them; the reaper reads its own env to tell. A trigger
	// that says it was launched on a return settles it.
	switch f.Trigger {
	case TriggerReady, TriggerCatchUp:
		return false
	}
	for _, c := range j.Spec.Template.Spec.Containers {
		if reaper.StartsWhenReady(c.Env) {
			return true
		}
	}
	return false
}
