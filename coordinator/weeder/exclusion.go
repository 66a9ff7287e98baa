package weeder

import (
	"strings"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// Exclusion says why the config's namespaces section leaves namespace ns out of the weeder's
// watch, "" when it does not: names is namespaces.names (empty: any name), sel is
// namespaces.selector (nil: any labels), nsLabels are the namespace's. It is the one rule for
// which namespaces are weeded; the reason is what an operator reads in the log.
func Exclusion(ns string, names map[string]bool, sel labels.Selector, nsLabels map[string]string) string {
	if len(names) > 0 && !names[ns] {
		return "namespaces.names does not list namespace " + ns
	}
	if sel != nil && !sel.Matches(labels.Set(nsLabels)) {
		return "the labels of namespace " + ns + " do not match namespaces.selector " + sel.String()
	}
	return ""
}

// NamespacesText says which namespaces the weeder watches, for people.
func (c *Config) NamespacesText() string {
	if c.Namespaces == nil || (c.Namespaces.Selector == nil && len(c.Namespaces.Names) == 0) {
		return "every namespace"
	}
	var parts []string
	if c.Namespaces.Selector != nil {
		parts = append(parts, "matching "+c.NamespaceSelector().String())
	}
	if len(c.Namespaces.Names) > 0 {
		parts = append(parts, "named "+strings.Join(c.Namespaces.Names, ", "))
	}
	return "the namespaces " + strings.Join(parts, " and ")
}

// Excludes reports whether the config's namespaces section leaves any namespace out.
func (c *Config) Excludes() bool { return c.NamespacesText() != "every namespace" }

// relevant: a service configured or named by an annotation, in a namespace the config watches:
// the config leaves the namespace in (Exclusion), and it is known.
func (c *Controller) relevant(key string) bool {
	if !c.follows(key) {
		return false
	}
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	why, known := c.exclusion(ns)
	return known && why == ""
}

// exclusion is why the config leaves namespace ns out ("" when it is watched); known is false when
// the namespace's labels are needed and the cache does not have it (deleted, or not listed
// yet): it is then neither watched nor reported.
func (c *Controller) exclusion(ns string) (why string, known bool) {
	if !c.nsSelect {
		return Exclusion(ns, c.nsNames, nil, nil), true
	}
	n, err := c.nsLister.Get(ns)
	if err != nil {
		return "", false
	}
	return Exclusion(ns, c.nsNames, c.nsSel, n.Labels), true
}

// reportExclusion keeps what the weeder says of a followed service (configured, or named by
// an annotation) whose namespace the config leaves out: a warning when it starts being left
// out, a line when it is watched again, and the services_excluded gauge. Nothing is said
// before the namespaces are listed (exclusionsReady), so a namespace not yet in the cache is
// not mistaken for one left out. c.mu must be held.
func (c *Controller) reportExclusion(key string, st *serviceState) {
	why := ""
	if c.exclusionsReady.Load() && c.follows(key) {
		ns, _, _ := cache.SplitMetaNamespaceKey(key)
		why, _ = c.exclusion(ns)
	}
	c.setExcluded(key, st, why)
}

// setExcluded records that the service is left out for reason why ("" : it is not) and says
// so when that changes; c.mu must be held.
func (c *Controller) setExcluded(key string, st *serviceState, why string) {
	if (why != "") == st.excluded {
		return
	}
	st.excluded = why != ""
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	log := c.log.WithFields(logrus.Fields{"namespace": ns, "service": svc})
	if st.excluded {
		c.metrics.ServicesExcluded.Inc()
		log.WithFields(logrus.Fields{"action": "excluded", "reason": why}).
			Warnf("The Service has dependents (the config or a workload's %s annotation names it), but the config leaves its namespace out: its outages are not weeded (%s).", AnnotationDependsOn, why)
		return
	}
	c.metrics.ServicesExcluded.Dec()
	log.Info("The Service's namespace is no longer left out by the config: its outages are weeded.")
}

// forget drops a service's state, taking it out of the gauges first; c.mu must be held.
func (c *Controller) forget(key string, st *serviceState) {
	st.relevant = false
	c.countReady(st)
	c.setExcluded(key, st, "")
	delete(c.services, key)
}

// ReportExclusions is called once the caches have synced: it says which namespaces the config
// leaves out, then names each followed service it leaves out (and keeps saying so as
// services and namespaces change), so that no dependency is dropped without a word.
func (c *Controller) ReportExclusions() {
	if !c.cfg.Excludes() {
		return
	}
	c.log.WithField("namespaces", c.cfg.NamespacesText()).
		Infof("The weeder watches only %s (the config's namespaces section): a Service with dependents in another namespace is not weeded; each one found is named in a warning and counted in depwatch_coordinator_weeder_services_excluded.", c.cfg.NamespacesText())
	c.exclusionsReady.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, st := range c.services {
		c.reportExclusion(key, st)
	}
}

// onNamespace: a namespace's labels changed, so the config may leave its services out now,
// or no longer; it says so at once rather than at the services' next endpoints event.
func (c *Controller) onNamespace(obj any) {
	n, ok := obj.(*corev1.Namespace)
	if !ok || !c.exclusionsReady.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, st := range c.services {
		if ns, _, _ := cache.SplitMetaNamespaceKey(key); ns == n.Name {
			c.reportExclusion(key, st)
		}
	}
}
