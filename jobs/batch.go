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
	var shared reaper.JobSettings
	rts := make([]reaper.Target, 0, len(targets))
	keys := make([]string, 0, len(targets))
	for i, t := range targets {
		// Two runs for one service would restart its dependents twice (the reaper refuses
		// TARGETS that list one twice, too).
		if slices.Contains(keys, t.Key()) {
			return Spec{}, fmt.Errorf("weeder batch: service %s is listed twice", t.Key())
		}
		one := base
		one.Namespace, one.Service, one.Selectors, one.Elsewhere, one.ReadyWhen = t.Namespace, t.Service, t.Selectors, t.Elsewhere, t.ReadyWhen
		// The same checks as a Job of its own; the reaper's own checks of every target run
		// once, on the whole batch.
		run, err := weederRun(one)
		if err == nil {
			var ts []reaper.Target
			if ts, err = weederTargets(one, run.Selectors); err == nil {
				rts = append(rts, ts...)
			}
		}
		if err != nil {
			return Spec{}, fmt.Errorf("weeder batch: %w", err)
		}
		if i == 0 {
			shared = run // what every target shares, once targeted: the same for each
		}
		keys = append(keys, t.Key())
	}
	s := weederJob(base, targeted(shared, rts))
	s.Namespace, s.Service, s.Batch = "", "", keys
	return s, nil
}
