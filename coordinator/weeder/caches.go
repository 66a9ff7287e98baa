package weeder

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/jobs"
)

// dependents caches the pods the configured dependant selectors match, one informer per
// distinct selector (server-side filtered), cut down to what the crash-loop test reads
// (podstate.Slim). The
// weeder asks it whether a Ready service has a crash-looping dependent (on a first sighting,
// on start and on winning leadership) without an API call: on a seed that question comes
// for thousands of services at once.
type dependents struct {
	infs map[string]cache.SharedIndexInformer // by selector string
}

func newDependents(client kubernetes.Interface, cfg *Config) (*dependents, error) {
	sels, err := selectorSet(cfg)
	if err != nil {
		return nil, err
	}
	d := &dependents{infs: map[string]cache.SharedIndexInformer{}}
	for _, sel := range sels {
		inf := coreinformers.NewFilteredPodInformer(client, metav1.NamespaceAll, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			func(o *metav1.ListOptions) { o.LabelSelector = sel })
		_ = inf.SetTransform(podstate.Transform) // a seed runs many dependents; their specs are most of their size
		d.infs[sel] = inf
	}
	return d, nil
}

// selectorSet is every distinct dependant selector of the config, sorted.
func selectorSet(cfg *Config) ([]string, error) {
	seen := sets.New[string]()
	for _, svc := range cfg.Services() {
		sels, err := jobs.SelectorStrings(cfg.Selectors(svc))
		if err != nil {
			return nil, fmt.Errorf("servicesAndDependantSelectors.%s: %w", svc, err)
		}
		seen.Insert(sels...)
	}
	return sets.List(seen), nil
}

func (d *dependents) informers() []cache.SharedIndexInformer {
	return slices.Collect(maps.Values(d.infs))
}

// crashLooping names a crash-looping pod of namespace ns that one of sels matches ("" if none).
// Every selector of the config has its watch from the start (a changed config restarts the
// coordinator), so the informers' stores answer alone.
func (d *dependents) crashLooping(ns string, sels []string) (string, error) {
	for _, sel := range sels {
		inf, ok := d.infs[sel]
		if !ok {
			return "", fmt.Errorf("the dependents %q have no watch (the config was not resolved at start)", sel)
		}
		objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
		if err != nil {
			return "", fmt.Errorf("reading the dependents %q of %s from their cache: %w", sel, ns, err)
		}
		for _, o := range objs {
			// The weeder Job's own test (CONTAINER_STATUSES=CrashLoopBackOff), so catch-up and
			// the Job agree on which pods count.
			if p, ok := o.(*corev1.Pod); ok {
				if _, crashing := podstate.CrashLoopBackOff(p); crashing {
					return p.Name, nil
				}
			}
		}
	}
	return "", nil
}
