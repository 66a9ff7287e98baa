package weeder

import (
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// newInformers makes the weeder's informers: the configured services' endpoints
// (EndpointSlices, or legacy Endpoints with the config's useEndpoints), the configured
// dependents' pods and the weeder Jobs (the executor's runs) and their reports in the Jobs'
// namespace; the namespaces are d's, shared with the prober. The coordinator runs them.
func (c *Controller) newInformers(d Deps) error {
	client, jobNamespace := d.Client, d.Template.Namespace
	if !c.opts.NoNamespaceReads {
		c.nsInf = d.Namespaces
		c.nsLister = corelisters.NewNamespaceLister(c.nsInf.GetIndexer())
	}
	src, err := newSource(client, d.Config)
	if err != nil {
		return err
	}
	c.src = src
	deps, err := newDependents(client, c.cfg)
	if err != nil {
		return err
	}
	c.deps = deps
	runs, err := c.exec.RunView(jobNamespace, jobs.KindWeeder, func(r jobs.Run) []string { return r.Facts.Covers() }, jobs.RunHandlers{
		Added:    c.onJobAdded,
		Stopped:  func(jobs.Run) { c.batch.poke() },
		Reported: c.onReport,
		Failed: func(jobs.Run) {
			if !c.leadSince().IsZero() {
				c.metrics.JobsFailed.WithLabelValues(string(jobs.KindWeeder)).Inc()
			}
		},
	})
	if err != nil {
		return err
	}
	c.runs = runs
	return nil
}

// addHandlers: an endpoints event may make an edge (onEndpoints); a namespace's new labels
// may leave its services out of the config's namespaces, or in again (onNamespace). The
// runs' changes are the run view's handlers (newInformers): a run's add observes its
// expectation, and a run that stops frees a place under --max-weeder-jobs, so the batches
// waiting for one look again.
func (c *Controller) addHandlers() error {
	if c.nsSelect {
		if _, err := c.nsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) { c.onNamespace(obj) },
		}); err != nil {
			return err
		}
	}
	_, err := c.src.AddEventHandler(c.endpointsHandler())
	return err
}

// endpointsHandler folds a source's events (onEndpoints), the config's and the annotations'.
func (c *Controller) endpointsHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onEndpoints(obj, false) },
		UpdateFunc: func(_, obj any) { c.onEndpoints(obj, false) },
		DeleteFunc: func(obj any) { c.onEndpoints(obj, true) },
	}
}

// onJobAdded: the view shows the run, so it is no longer only expected.
func (c *Controller) onJobAdded(r jobs.Run) {
	c.mu.Lock()
	c.expectations.observe(r.Name, c.now())
	c.mu.Unlock()
}

// state returns (creating) the state of key; c.mu must be held.
func (c *Controller) state(key string) *serviceState {
	st, ok := c.services[key]
	if !ok {
		st = &serviceState{}
		c.services[key] = st
	}
	return st
}

// relevant: a service configured or named by an annotation, in a namespace the config watches.
func (c *Controller) relevant(key string) bool {
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	return c.follows(key) && c.watched(ns)
}

// watched: the config leaves the namespace in (Exclusion), and it is known.
func (c *Controller) watched(ns string) bool {
	why, known := c.exclusion(ns)
	return known && why == ""
}
