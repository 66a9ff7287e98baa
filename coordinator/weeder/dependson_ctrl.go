package weeder

import (
	"context"
	"maps"
	"slices"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// DependsOn reports whether the weeder follows AnnotationDependsOn (dependsOnAnnotation,
// default true).
func (c *Config) DependsOn() bool { return c.DependsOnAnnotation == nil || *c.DependsOnAnnotation }

// Weeds reports whether this config gives the weeder anything to follow: a configured service,
// or workloads' depends-on annotations (followed by default, with EndpointSlices, where the
// service account may read workloads; noWorkloadReads: it may not). A config with neither
// runs no weeder. The coordinator's config check, its start and New decide with it.
func (c *Config) Weeds(noWorkloadReads bool) bool {
	return len(c.Services()) > 0 || (c.DependsOn() && !c.UseEndpoints && !noWorkloadReads)
}

// follows: the service key is the config's (its name is configured) or an annotation's.
func (c *Controller) follows(rc *runningConfig, key string) bool {
	if _, svc, _ := cache.SplitMetaNamespaceKey(key); rc.cfg.Configured(svc) {
		return true
	}
	return c.dependsOn != nil && c.dependsOn.follows(key)
}

// selectorsOf are the service's dependents' pod selectors: the config's where it names the
// service (it wins: annotations add nothing to a configured service), else those of the
// workloads whose annotation names it, in its namespace and in others.
func (c *Controller) selectorsOf(rc *runningConfig, key string) dependentSelectors {
	if _, svc, _ := cache.SplitMetaNamespaceKey(key); rc.cfg.Configured(svc) || c.dependsOn == nil {
		return dependentSelectors{own: rc.cfg.Selectors(svc)}
	}
	return c.dependsOn.selectors(key)
}

// crashLoopingDependent names a crash-looping dependent of the service ("" if none): from the
// informers for the config's selectors, from a pod list per namespace for an annotation's.
func (c *Controller) crashLoopingDependent(ctx context.Context, rc *runningConfig, key string) (string, error) {
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	deps := c.selectorsOf(rc, key)
	sels, err := jobs.SelectorStrings(deps.own)
	if err != nil {
		return "", err // validated at load or when the annotation was read
	}
	if rc.cfg.Configured(svc) {
		return c.deps.crashLooping(ns, sels)
	}
	if pod, err := crashLoopingIn(ctx, c.client, ns, sels); pod != "" || err != nil {
		return pod, err
	}
	for _, other := range slices.Sorted(maps.Keys(deps.elsewhere)) {
		sels, err := jobs.SelectorStrings(deps.elsewhere[other])
		if err != nil {
			return "", err
		}
		pod, err := crashLoopingIn(ctx, c.client, other, sels)
		if err != nil {
			return "", err
		}
		if pod != "" {
			return other + "/" + pod, nil
		}
	}
	return "", nil
}

// addDependsOnHandlers: a workload's event updates what it declares (onWorkload).
func (c *Controller) addDependsOnHandlers() error {
	for _, inf := range c.dependsOn.workloads {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onWorkload(obj, false) },
			UpdateFunc: func(_, obj any) { c.onWorkload(obj, false) },
			DeleteFunc: func(obj any) { c.onWorkload(obj, true) },
		}); err != nil {
			return err
		}
	}
	return nil
}

// onWorkload reads a workload's depends-on annotation (DeclaredBy) and records it in the
// index; when it changed, it tells a malformed one with an Event on the workload, follows the
// services that gained their first dependent and forgets those that lost their last. A
// workload's other updates (its status) cost a map lookup.
func (c *Controller) onWorkload(obj any, deleted bool) {
	w, ok := workloadOf(obj)
	if !ok {
		return
	}
	value, annotated := w.meta.Annotations[AnnotationDependsOn]
	var d declared
	var problem string
	if annotated && !deleted {
		keys, errs := DeclaredBy(w.kind, w.meta.Namespace, value, w.selector)
		d = declared{value: value, services: keys, dep: dependent{workload: w.key(), namespace: w.meta.Namespace}}
		if w.selector != nil {
			d.dep.selector = *w.selector.DeepCopy()
		}
		if len(errs) > 0 {
			problem = DependsOnProblem(errs)
		}
	}
	dep := c.dependsOn
	dep.mu.Lock()
	old, had := dep.index.byWorkload[w.key()]
	if had == (annotated && !deleted) && old.value == d.value {
		dep.mu.Unlock()
		return // the selector is immutable: nothing it declares changed
	}
	followed, unfollowed := dep.index.set(w.key(), d)
	dep.mu.Unlock()
	log := c.log.WithFields(logrus.Fields{"namespace": w.meta.Namespace, "workload": w.String(), "dependsOn": value})
	if problem != "" {
		log.Warnf("A workload's depends-on annotation is malformed and is ignored: %s.", problem)
		if c.recorder != nil {
			c.recorder.Event(w.eventRef(), corev1.EventTypeWarning, EventInvalidDependsOn, problem)
		}
	} else if len(d.services) > 0 {
		log.WithField("services", d.services).Info("A workload declares the Services its pods depend on: they are weeded when those come back.")
	}
	for _, key := range followed {
		c.follow(key, log)
	}
	for _, key := range unfollowed {
		c.unfollow(key, log)
	}
}

// newDependsOnWatch builds the workloads' informers when the annotation is followed: on by
// default (dependsOnAnnotation), with EndpointSlices (legacy Endpoints name no service by a
// label to watch it by) and where workloads may be read.
func (c *Controller) newDependsOnWatch(d Deps) error {
	switch {
	case !d.Config.DependsOn():
		return nil
	case d.Config.UseEndpoints:
		c.log.Info("The depends-on annotation is not followed with useEndpoints: only the config's services are.")
		return nil
	case c.opts.NoWorkloadReads:
		c.log.Info("The depends-on annotation is not followed: this service account may not list and watch Deployments, StatefulSets and DaemonSets.")
		return nil
	}
	c.dependsOn = newDependsOn(d.Client)
	return c.addDependsOnHandlers()
}
