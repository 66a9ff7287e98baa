package weeder

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/jobs"
)

// AnnotationDependsOn on a Deployment, StatefulSet or DaemonSet names the Services its pods
// depend on, comma-separated: `postgres, redis` (Services in the workload's namespace) or
// `other/db` (a Service in namespace other). Its pods, chosen by the workload's own selector,
// become dependents of those Services, as if servicesAndDependantSelectors named them.
const AnnotationDependsOn = "depwatch.io/depends-on"

// EventInvalidDependsOn: the workload's depends-on annotation has an entry that is not a
// Service's name; the annotation is ignored.
const EventInvalidDependsOn = "InvalidDependsOn"

// ParseDependsOn reads a depends-on annotation of a workload in namespace ns: the keys
// (<namespace>/<service>) of the Services it names, sorted and without duplicates, and a field
// error (with the bad entry as its value) for each entry that is not a Service. An empty
// value names none. It is pure.
func ParseDependsOn(ns, value string) ([]string, field.ErrorList) {
	path := field.NewPath("metadata", "annotations").Key(AnnotationDependsOn)
	var errs field.ErrorList
	seen := sets.New[string]()
	entries := strings.Split(value, ",")
	for _, raw := range entries {
		entry := strings.TrimSpace(raw)
		if entry == "" {
			if strings.TrimSpace(value) != "" && len(entries) > 1 {
				errs = append(errs, field.Invalid(path, raw, "empty entry between commas"))
			}
			continue
		}
		key, err := dependsOnKey(ns, entry)
		if err != "" {
			errs = append(errs, field.Invalid(path, entry, err))
			continue
		}
		seen.Insert(key)
	}
	return slices.Sorted(maps.Keys(seen)), errs
}

// dependsOnKey is one entry's service key, or why it is not a Service ("" when it is).
func dependsOnKey(ns, entry string) (string, string) {
	svcNS, name := ns, entry
	if before, after, ok := strings.Cut(entry, "/"); ok {
		svcNS, name = before, after
		if m := validation.IsDNS1123Label(svcNS); len(m) > 0 {
			return "", "not a namespace name: " + strings.Join(m, "; ")
		}
	}
	if m := validation.IsDNS1035Label(name); len(m) > 0 {
		return "", "not a service name: " + strings.Join(m, "; ")
	}
	return svcNS + "/" + name, ""
}

// DependsOnProblem is the message of an InvalidDependsOn Event: each bad entry with what is
// wrong with it.
func DependsOnProblem(errs field.ErrorList) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, fmt.Sprintf("%q: %s", e.BadValue, e.Detail))
	}
	return fmt.Sprintf("The %s annotation is ignored: %s", AnnotationDependsOn, strings.Join(parts, "; "))
}

// DeclaredBy is what a workload's annotation declares (pure): the service keys its pods
// depend on, and the problems that make the annotation ignored (then no service).
func DeclaredBy(kind, ns, value string, selector *metav1.LabelSelector) ([]string, field.ErrorList) {
	keys, errs := ParseDependsOn(ns, value)
	if len(errs) > 0 || len(keys) == 0 {
		return nil, errs
	}
	path := field.NewPath("spec", "selector")
	sel, err := metav1.LabelSelectorAsSelector(selector)
	switch {
	case selector == nil:
		return nil, field.ErrorList{field.Required(path, "the "+kind+" has no selector to choose its pods by")}
	case err != nil:
		return nil, field.ErrorList{field.Invalid(path, sel, err.Error())}
	case sel.Empty():
		return nil, field.ErrorList{field.Invalid(path, "{}", "empty: it would select every pod in the namespace")}
	}
	return keys, nil
}

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

// dependsOn follows the dependencies workloads declare with AnnotationDependsOn: the
// Deployments, StatefulSets and DaemonSets, cut down to a cachedWorkload and indexed by the
// service keys they declare (declaredIndex); the keys some workload declares; and an
// EndpointSlice watch per service name that annotations name and the config does not (one
// watch for the name in every namespace, started when the first workload names it, stopped
// with the last).
type dependsOn struct {
	workloads []cache.SharedIndexInformer

	mu       sync.Mutex
	followed sets.Set[string]      // service keys a workload declares
	watches  map[string]*nameWatch // by service name
	ctx      context.Context       // set by StartDependsOn; nil: watches wait for it
}

// nameWatch is the EndpointSlice watch of one service name; stop is nil until it runs.
type nameWatch struct {
	inf  cache.SharedIndexInformer
	stop context.CancelFunc
}

// declaredIndex indexes the workloads' caches by the service keys their annotation declares.
const declaredIndex = "dependsOn"

// newDependsOnWatch builds the workloads' informers when the annotation is followed: on by
// default (dependsOnAnnotation), with EndpointSlices (legacy Endpoints name no service by a
// label to watch it by) and where workloads may be read. A workload's event updates what it
// declares (onWorkload).
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
	c.dependsOn = &dependsOn{followed: sets.New[string](), watches: map[string]*nameWatch{}}
	idx := cache.Indexers{declaredIndex: func(obj any) ([]string, error) {
		w, ok := obj.(*cachedWorkload)
		if !ok {
			return nil, nil
		}
		keys, _ := w.declared()
		return keys, nil
	}}
	for _, inf := range []cache.SharedIndexInformer{
		appsinformers.NewDeploymentInformer(d.Client, metav1.NamespaceAll, 0, idx),
		appsinformers.NewStatefulSetInformer(d.Client, metav1.NamespaceAll, 0, idx),
		appsinformers.NewDaemonSetInformer(d.Client, metav1.NamespaceAll, 0, idx),
	} {
		_ = inf.SetTransform(slimWorkload) // only the annotation and the selector are read
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onWorkload(nil, obj) },
			UpdateFunc: c.onWorkload,
			DeleteFunc: func(obj any) { c.onWorkload(obj, nil) },
		}); err != nil {
			return err
		}
		c.dependsOn.workloads = append(c.dependsOn.workloads, inf)
	}
	return nil
}

// cachedWorkload is what the workloads' informers keep of each: its kind, name, namespace,
// UID, resource version, the depends-on annotation and its selector. A seed runs tens of
// thousands of workloads, and a typed Deployment cut down to these fields still weighs 1.2 KB
// (its empty pod template and status); this weighs a fifth of that.
type cachedWorkload struct {
	metav1.ObjectMeta
	kind     string
	selector *metav1.LabelSelector
}

// GetObjectKind and DeepCopyObject make it a runtime.Object, as informer stores expect.
func (w *cachedWorkload) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (w *cachedWorkload) DeepCopyObject() runtime.Object {
	return &cachedWorkload{ObjectMeta: *w.ObjectMeta.DeepCopy(), kind: w.kind, selector: w.selector.DeepCopy()}
}

// slimWorkload is the informers' transform: a workload becomes its cachedWorkload.
func slimWorkload(obj any) (any, error) {
	var kind string
	var meta metav1.ObjectMeta
	var sel *metav1.LabelSelector
	switch o := obj.(type) {
	case *appsv1.Deployment:
		kind, meta, sel = "Deployment", o.ObjectMeta, o.Spec.Selector
	case *appsv1.StatefulSet:
		kind, meta, sel = "StatefulSet", o.ObjectMeta, o.Spec.Selector
	case *appsv1.DaemonSet:
		kind, meta, sel = "DaemonSet", o.ObjectMeta, o.Spec.Selector
	default:
		return obj, nil
	}
	m := metav1.ObjectMeta{Name: meta.Name, Namespace: meta.Namespace, UID: meta.UID, ResourceVersion: meta.ResourceVersion}
	if v, ok := meta.Annotations[AnnotationDependsOn]; ok {
		m.Annotations = map[string]string{AnnotationDependsOn: v}
	}
	return &cachedWorkload{ObjectMeta: m, kind: kind, selector: sel}, nil
}

// workloadOf is the cached workload of an informer's object or tombstone (nil: none).
func workloadOf(obj any) *cachedWorkload {
	w, _ := unwrap(obj).(*cachedWorkload)
	return w
}

// annotation is the workload's depends-on annotation; nil has none.
func (w *cachedWorkload) annotation() (string, bool) {
	if w == nil {
		return "", false
	}
	v, ok := w.Annotations[AnnotationDependsOn]
	return v, ok
}

func (w *cachedWorkload) declared() ([]string, field.ErrorList) {
	if v, ok := w.annotation(); ok {
		return DeclaredBy(w.kind, w.Namespace, v, w.selector)
	}
	return nil, nil
}

func (w *cachedWorkload) String() string {
	return fmt.Sprintf("%s %s/%s", strings.ToLower(w.kind), w.Namespace, w.Name)
}

// onWorkload handles a workload's add (old nil), update, or delete (obj nil). When its
// annotation changed, it tells a malformed one with an Event on the workload, and follows the
// services that gained their first dependent and forgets those that lost their last (the
// caches' declaredIndex says which). A workload's other updates (its status) cost a map
// lookup: its selector is immutable.
func (c *Controller) onWorkload(old, obj any) {
	before, after := workloadOf(old), workloadOf(obj)
	w := after
	if w == nil {
		w = before
	}
	if w == nil {
		return
	}
	bv, bok := before.annotation()
	av, aok := after.annotation()
	if bv == av && bok == aok {
		return
	}
	value, _ := w.annotation()
	log := c.log.WithFields(logrus.Fields{"namespace": w.Namespace, "workload": w.String(), "dependsOn": value})
	was, _ := before.declared()
	keys, errs := after.declared()
	switch {
	case len(errs) > 0:
		problem := DependsOnProblem(errs)
		log.Warnf("A workload's depends-on annotation is malformed and is ignored: %s.", problem)
		if c.recorder != nil {
			ref := &corev1.ObjectReference{Kind: w.kind, APIVersion: "apps/v1", Namespace: w.Namespace, Name: w.Name, UID: w.UID, ResourceVersion: w.ResourceVersion}
			c.recorder.Event(ref, corev1.EventTypeWarning, EventInvalidDependsOn, problem)
		}
	case len(keys) > 0:
		log.WithField("services", keys).Info("A workload declares the Services its pods depend on: they are weeded when those come back.")
	}
	d := c.dependsOn
	for _, key := range sets.List(sets.New(was...).Insert(keys...)) {
		d.mu.Lock() // the three kinds' handlers run at once: reading and recording is one step
		declared := len(d.declarers(key)) > 0
		changed := d.followed.Has(key) != declared
		if declared {
			d.followed.Insert(key)
		} else {
			d.followed.Delete(key)
		}
		d.mu.Unlock()
		switch {
		case changed && declared:
			c.follow(key, log)
		case changed:
			c.unfollow(key, log)
		}
	}
}

// declarers are the cached workloads that declare the service key, ordered by
// <kind>/<namespace>/<name>.
func (d *dependsOn) declarers(key string) []*cachedWorkload {
	var out []*cachedWorkload
	for _, inf := range d.workloads {
		objs, _ := inf.GetIndexer().ByIndex(declaredIndex, key)
		for _, o := range objs {
			if w, ok := o.(*cachedWorkload); ok {
				out = append(out, w)
			}
		}
	}
	id := func(w *cachedWorkload) string { return w.kind + "/" + w.Namespace + "/" + w.Name }
	slices.SortFunc(out, func(a, b *cachedWorkload) int { return strings.Compare(id(a), id(b)) })
	return out
}

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
	for _, w := range d.watches {
		if w.stop == nil {
			d.run(w)
		}
	}
}

// run starts a watch; d.mu must be held and d.ctx set.
func (d *dependsOn) run(w *nameWatch) {
	ctx, cancel := context.WithCancel(d.ctx)
	w.stop = cancel
	go w.inf.RunWithContext(ctx)
}

// follow: an annotation names the service key for the first time. A configured name has its
// watch already; another one gets a watch of its own for its name, unless another namespace's
// service of that name has one: then what its cache holds for key is folded at once (its
// first sighting; a Ready service is checked for crash-looping dependents).
func (c *Controller) follow(key string, log logrus.FieldLogger) {
	_, name, _ := strings.Cut(key, "/")
	if c.cfg.Configured(name) {
		log.WithField("service", key).Info("The service is also in the config, whose dependents' selectors are used for it.")
		return
	}
	d := c.dependsOn
	d.mu.Lock()
	w, running := d.watches[name]
	if !running {
		_, inf, _, err := podstate.SliceFollower(c.client, metav1.NamespaceAll, []string{name})
		if err != nil {
			d.mu.Unlock()
			log.WithError(err).Error("Could not watch the EndpointSlices of a service an annotation names.")
			return
		}
		w = &nameWatch{inf: inf}
		d.watches[name] = w
		_, _ = w.inf.AddEventHandler(c.endpointsHandler())
		if d.ctx != nil {
			d.run(w)
		}
	}
	d.mu.Unlock()
	if !running {
		log.WithField("service", key).Info("Watching the EndpointSlices of a service an annotation names.")
		return // its first list brings the service's slices to onEndpoints
	}
	objs, _ := w.inf.GetIndexer().ByIndex(podstate.ServiceIndex, key)
	for _, o := range objs {
		c.onEndpoints(o, false)
	}
}

// unfollow: no annotation names the service key any more. Its state is forgotten, so its next
// outage arms nothing, and its name's watch stops when no other namespace's service of that
// name is named.
func (c *Controller) unfollow(key string, log logrus.FieldLogger) {
	_, name, _ := strings.Cut(key, "/")
	if c.cfg.Configured(name) {
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
	for k := range d.followed {
		if _, n, _ := strings.Cut(k, "/"); n == name {
			return
		}
	}
	if w := d.watches[name]; w != nil && w.stop != nil {
		w.stop()
	}
	delete(d.watches, name)
	log.WithField("service", key).Info("No workload depends on the service any more: it is no longer followed.")
}

// follows: the service key is the config's (its name is configured) or an annotation's.
func (c *Controller) follows(key string) bool {
	if _, svc, _ := cache.SplitMetaNamespaceKey(key); c.cfg.Configured(svc) {
		return true
	}
	if c.dependsOn == nil {
		return false
	}
	c.dependsOn.mu.Lock()
	defer c.dependsOn.mu.Unlock()
	return c.dependsOn.followed.Has(key)
}

// target is the service key as a weeder Job covers it, with its dependents' pod selectors:
// the config's where it names the service (it wins: annotations add nothing to a configured
// service), else those of the workloads whose annotation names it, ordered by workload: in
// its namespace (Selectors) and in each other one (Elsewhere: an annotation may name another
// namespace's Service).
func (c *Controller) target(key string) jobs.WeederTarget {
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	t := jobs.WeederTarget{Namespace: ns, Service: svc, ReadyWhen: c.cfg.ReadyWhenOf(svc)}
	if c.cfg.Configured(svc) || c.dependsOn == nil {
		t.Selectors = c.cfg.Selectors(svc)
		return t
	}
	for _, w := range c.dependsOn.declarers(key) {
		if w.Namespace == ns {
			t.Selectors = append(t.Selectors, *w.selector.DeepCopy())
			continue
		}
		if t.Elsewhere == nil {
			t.Elsewhere = map[string][]metav1.LabelSelector{}
		}
		t.Elsewhere[w.Namespace] = append(t.Elsewhere[w.Namespace], *w.selector.DeepCopy())
	}
	return t
}
