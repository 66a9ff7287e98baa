package reaper

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/depwatch/depwatch/internal/podstate"

	"github.com/depwatch/depwatch/internal/envconf"
)

// Target is one service of a multi-service weeder run (TARGETS): the dependents selected by
// Selectors in PodNamespace (absent: Namespace) are reaped once Service in Namespace is Ready.
// A storm of outages is covered by a few Jobs, each watching many services, instead of one
// Job per service; a service with dependents in several namespaces is one target per
// namespace.
type Target struct {
	Namespace string   `json:"namespace"`
	Service   string   `json:"service"`
	Selectors []string `json:"selectors"`
	// PodNamespace is the dependents' namespace when it is not the service's (a workload's
	// depends-on annotation may name another namespace's Service).
	PodNamespace string `json:"podNamespace,omitempty"`
	// ReadyWhen is when Service counts as back ("any", "all" or a count); absent: the run's
	// READY_WHEN.
	ReadyWhen *podstate.ReadyWhen `json:"readyWhen,omitempty"`
}

func (t Target) ref() ServiceRef { return ServiceRef{Namespace: t.Namespace, Name: t.Service} }

// pods is the namespace of the target's dependents.
func (t Target) pods() string {
	if t.PodNamespace != "" {
		return t.PodNamespace
	}
	return t.Namespace
}

// String names the target in logs and errors: its service, and where its dependents are when
// that is another namespace.
func (t Target) String() string {
	if t.pods() != t.Namespace {
		return t.ref().String() + " (dependents in " + t.pods() + ")"
	}
	return t.ref().String()
}

// TargetsValue writes the TARGETS variable that ParseTargets reads back.
func TargetsValue(ts []Target) string {
	raw, _ := json.Marshal(ts) // strings and slices always marshal
	return string(raw)
}

// ParseTargets reads a TARGETS value: a JSON list of {namespace, service, selectors,
// podNamespace}. Every target needs a valid namespace and service name and at least one
// non-empty selector (an empty selector would reap every crash-looping pod of the namespace);
// a service listed twice for the same namespace of dependents is refused, because two runs
// for one service would restart its dependents twice.
func ParseTargets(v string) ([]Target, error) {
	var ts []Target
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ts); err != nil {
		return nil, fmt.Errorf(`must be a JSON list of {"namespace","service","selectors","podNamespace","readyWhen"}: %w`, err)
	}
	if len(ts) == 0 {
		return nil, errors.New("must list at least one target")
	}
	type place struct {
		ref  ServiceRef
		pods string
	}
	seen := map[place]bool{}
	var problems []string
	for i, t := range ts {
		if errs := validation.IsDNS1123Label(t.Namespace); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("target %d: namespace %q is not a valid namespace name: %s", i, t.Namespace, strings.Join(errs, "; ")))
		}
		if errs := validation.IsDNS1123Label(t.PodNamespace); t.PodNamespace != "" && len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("target %d: podNamespace %q is not a valid namespace name: %s", i, t.PodNamespace, strings.Join(errs, "; ")))
		}
		if errs := validation.IsDNS1035Label(t.Service); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("target %d: service %q is not a valid service name: %s", i, t.Service, strings.Join(errs, "; ")))
		}
		if p := (place{t.ref(), t.pods()}); seen[p] {
			problems = append(problems, fmt.Sprintf("target %d: service %s is listed twice", i, t))
		} else {
			seen[p] = true
		}
		if len(t.Selectors) == 0 {
			problems = append(problems, fmt.Sprintf("target %d (%s): needs at least one pod selector", i, t))
		}
		for j, s := range t.Selectors {
			sel, err := labels.Parse(s)
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("target %d (%s): selector %d (%q) is not a valid label selector: %v", i, t, j, s, err))
			case sel.Empty():
				problems = append(problems, fmt.Sprintf("target %d (%s): selector %d is empty and would select every pod", i, t, j))
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return ts, nil
}

// loadTargets reads TARGETS. A target names its own namespace, service and selectors, so
// NAMESPACE, START_WHEN_READY and LABEL_SELECTORS cannot be set beside it (which would win
// would be a guess); the label and annotation filters and every other setting apply to every
// target.
func loadTargets(e *envconf.Reader) []Target {
	v, ok := e.Get(envTargets)
	if !ok {
		return nil
	}
	ts, err := ParseTargets(v)
	if err != nil {
		e.Fail(envTargets, v, "%v", err)
		return nil
	}
	for _, name := range []string{envNamespace, envStartWhenReady, envLabelSelectors} {
		if w, set := e.NonEmpty(name); set {
			e.Fail(name, w, "cannot be set with TARGETS: each target names its own namespace, service and selectors")
		}
	}
	return ts
}

// forTarget is the single-service run of one target: the run's settings with the target's
// dependents' namespace, its service as START_WHEN_READY, and its selectors ANDed with the run's label
// filters (the only selector a TARGETS run has).
func (o Options) forTarget(t Target) Options {
	var base labels.Requirements
	if len(o.Selectors) > 0 {
		base, _ = o.Selectors[0].Requirements()
	}
	one := o
	one.Targets = nil
	one.Warnings = nil // logged once, by the run
	one.Namespace = t.pods()
	ref := t.ref()
	one.StartWhenReady = &ref
	if t.ReadyWhen != nil {
		one.ReadyWhen = *t.ReadyWhen
	}
	one.Selectors = make([]labels.Selector, 0, len(t.Selectors))
	for _, s := range t.Selectors {
		sel, _ := labels.Parse(s) // ParseTargets checked it
		reqs, _ := sel.Requirements()
		one.Selectors = append(one.Selectors, labels.NewSelector().Add(base...).Add(reqs...))
	}
	return one
}
