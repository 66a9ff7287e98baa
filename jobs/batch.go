package jobs

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/reaper"
)

const (
	// LabelBatch marks a weeder Job that covers several services.
	LabelBatch = "depwatch.io/batch"
	// AnnotationTargets lists a batch weeder Job's services, <namespace>/<service>, comma-separated.
	AnnotationTargets = "depwatch.io/targets"
)

// WeederTarget is one service of a batch weeder Job.
type WeederTarget struct {
	Namespace string
	Service   string
	Selectors []metav1.LabelSelector
	Elsewhere map[string][]metav1.LabelSelector // its dependents in other namespaces (WeederSpec's)
	ReadyWhen podstate.ReadyWhen                // when Service counts as back (zero: any)
}

// Key is <namespace>/<service>, the target's name in AnnotationTargets.
func (t WeederTarget) Key() string { return t.Namespace + "/" + t.Service }

// WeederBatch describes one weeder Job for several services (a storm of outages): the same
// run as Weeder's for each target, every target gated on its own service with its own
// watchDuration and max wait (the reaper's Targets). Base gives the settings every target
// shares; its Namespace, Service and Selectors are ignored.
func WeederBatch(base WeederSpec, targets []WeederTarget) (Spec, error) {
	if len(targets) == 0 {
		return Spec{}, fmt.Errorf("weeder batch: at least one target is required")
	}
	rts := make([]reaper.Target, 0, len(targets))
	keys := make([]string, 0, len(targets))
	for _, t := range targets {
		// Two runs for one service would restart its dependents twice (the reaper refuses
		// TARGETS that list one twice, too).
		if slices.Contains(keys, t.Key()) {
			return Spec{}, fmt.Errorf("weeder batch: service %s is listed twice", t.Key())
		}
		one := base
		one.Namespace, one.Service, one.Selectors, one.Elsewhere, one.ReadyWhen = t.Namespace, t.Service, t.Selectors, t.Elsewhere, t.ReadyWhen
		// The same checks as a Job of its own; the reaper's own checks of every target run
		// once, on the whole batch, below.
		run, _, err := weederRun(one)
		if err == nil {
			var ts []reaper.Target
			if ts, err = weederTargets(one, run); err == nil {
				rts = append(rts, ts...)
			}
		}
		if err != nil {
			return Spec{}, fmt.Errorf("weeder batch: %w", err)
		}
		keys = append(keys, t.Key())
	}
	// The first target's run gives what every target shares; the targets replace its one
	// namespace, selectors and gate.
	one := base
	one.Namespace, one.Service, one.Selectors, one.Elsewhere = targets[0].Namespace, targets[0].Service, targets[0].Selectors, targets[0].Elsewhere
	run, trigger, _ := weederRun(one) // checked above
	run.Namespace, run.Selectors, run.StartWhenReady, run.Targets = "", nil, nil, rts
	run.ReadyWhen = podstate.ReadyAny // each target carries its own
	s := weederJob(one, run, trigger)
	s.Service, s.Batch = "", keys
	return s, nil
}
