package weeder

import (
	"context"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/podstate"
)

// StartDependsOn lets the EndpointSlice watches of the services annotations name run until
// ctx ends; the coordinator calls it before it starts the informers. Watches asked for
// before it start then.
func (c *Controller) StartDependsOn(ctx context.Context) {
	if c.dependsOn == nil {
		return
	}
	d := c.dependsOn
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctx = ctx
	for name, inf := range d.watch {
		if d.names[name] == nil {
			d.names[name] = d.run(inf)
		}
	}
}

// run starts a watch; d.mu must be held and d.ctx set.
func (d *dependsOn) run(inf cache.SharedIndexInformer) context.CancelFunc {
	ctx, cancel := context.WithCancel(d.ctx)
	go inf.RunWithContext(ctx)
	return cancel
}

// follow: an annotation names the service key for the first time. A configured name has its
// watch already; another one gets a watch of its own for its name, unless another namespace's
// service of that name has one: then what its cache holds for key is folded at once (its
// first sighting; a Ready service is checked for crash-looping dependents).
func (c *Controller) follow(key string, log logrus.FieldLogger) {
	name := nameOf(key)
	if c.config().cfg.Configured(name) {
		log.WithField("service", key).Info("The service is also in the config, whose dependents' selectors are used for it.")
		return
	}
	d := c.dependsOn
	d.mu.Lock()
	inf, running := d.watch[name]
	if !running {
		src, err := newSliceSource(c.client, []string{name}, c.config().cfg.ReadyWhenOf)
		if err != nil {
			d.mu.Unlock()
			log.WithError(err).Error("Could not watch the EndpointSlices of a service an annotation names.")
			return
		}
		inf = src.Informer()
		d.watch[name] = inf
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onEndpoints(obj, false) },
			UpdateFunc: func(_, obj any) { c.onEndpoints(obj, false) },
			DeleteFunc: func(obj any) { c.onEndpoints(obj, true) },
		})
		if d.ctx != nil {
			d.names[name] = d.run(inf)
		}
	}
	d.mu.Unlock()
	if !running {
		log.WithField("service", key).Info("Watching the EndpointSlices of a service an annotation names.")
		return // its first list brings the service's slices to onEndpoints
	}
	objs, _ := inf.GetIndexer().ByIndex(podstate.ServiceIndex, key)
	for _, o := range objs {
		c.onEndpoints(o, false)
	}
}

// unfollow: no annotation names the service key any more. Its state is forgotten, so its next
// outage arms nothing, and its name's watch stops when no other namespace's service of that
// name is named.
func (c *Controller) unfollow(key string, log logrus.FieldLogger) {
	name := nameOf(key)
	if c.config().cfg.Configured(name) {
		return
	}
	c.mu.Lock()
	if st, ok := c.services[key]; ok {
		st.owed = nil
		c.forget(key, st)
	}
	c.mu.Unlock()
	d := c.dependsOn
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.index.nameInUse(name) {
		return
	}
	if stop := d.names[name]; stop != nil {
		stop()
	}
	delete(d.names, name)
	delete(d.watch, name)
	log.WithField("service", key).Info("No workload depends on the service any more: it is no longer followed.")
}
