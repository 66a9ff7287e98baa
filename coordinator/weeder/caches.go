package weeder

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/jobs"
)

// dependents caches the pods the configured dependant selectors match, one informer per
// distinct selector (server-side filtered), cut down to what the crash-loop test reads
// (podstate.Slim). The weeder asks it whether a Ready service has a crash-looping dependent
// (on a first sighting, on start and on winning leadership) without an API call: on a seed
// that question comes for thousands of services at once.
type dependents struct {
	infs map[string]cache.SharedIndexInformer // by selector string
}

func newDependents(client kubernetes.Interface, cfg *Config) (*dependents, error) {
	d := &dependents{infs: map[string]cache.SharedIndexInformer{}}
	for _, svc := range cfg.Services() {
		sels, err := jobs.SelectorStrings(cfg.Selectors(svc))
		if err != nil {
			return nil, fmt.Errorf("servicesAndDependantSelectors.%s: %w", svc, err)
		}
		for _, sel := range sels {
			if d.infs[sel] != nil {
				continue
			}
			inf := coreinformers.NewFilteredPodInformer(client, metav1.NamespaceAll, 0,
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
				func(o *metav1.ListOptions) { o.LabelSelector = sel })
			_ = inf.SetTransform(podstate.Transform) // a seed runs many dependents; their specs are most of their size
			d.infs[sel] = inf
		}
	}
	return d, nil
}

func (d *dependents) informers() []cache.SharedIndexInformer {
	return slices.Collect(maps.Values(d.infs))
}

// crashLoopingDependent names a crash-looping dependent of the service ("" if none), in its
// own namespace first, then in each other one an annotation's workloads run in (as
// <namespace>/<pod>). The weeder Job's own test (CONTAINER_STATUSES=CrashLoopBackOff), so
// catch-up and the Job agree on which pods count.
func (c *Controller) crashLoopingDependent(ctx context.Context, key string) (string, error) {
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	t := c.target(key)
	for _, in := range append([]string{ns}, slices.Sorted(maps.Keys(t.Elsewhere))...) {
		sels, err := jobs.SelectorStrings(t.Selectors)
		if in != ns {
			sels, err = jobs.SelectorStrings(t.Elsewhere[in])
		}
		if err != nil {
			return "", err // validated at load or when the annotation was read
		}
		for _, sel := range sels {
			pods, err := c.dependentsOf(ctx, in, sel, c.cfg.Configured(svc))
			if err != nil {
				return "", err
			}
			for _, p := range pods {
				if _, crashing := podstate.CrashLoopBackOff(p); crashing {
					if in != ns {
						return in + "/" + p.Name, nil
					}
					return p.Name, nil
				}
			}
		}
	}
	return "", nil
}

// dependentsOf are the pods of namespace ns that sel matches. A configured selector has its
// informer from the start (a changed config restarts the coordinator), so its store answers
// alone; the dependents an annotation declares appear at run time, so they have no informer
// of their own: they are listed, which only a catch-up edge does.
func (c *Controller) dependentsOf(ctx context.Context, ns, sel string, configured bool) ([]*corev1.Pod, error) {
	if !configured {
		list, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: "0"})
		if err != nil {
			return nil, fmt.Errorf("listing the dependents %q of %s: %w", sel, ns, err)
		}
		out := make([]*corev1.Pod, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out, nil
	}
	inf, ok := c.deps.infs[sel]
	if !ok {
		return nil, fmt.Errorf("the dependents %q have no watch (the config was not resolved at start)", sel)
	}
	objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	if err != nil {
		return nil, fmt.Errorf("reading the dependents %q of %s from their cache: %w", sel, ns, err)
	}
	var out []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out, nil
}
