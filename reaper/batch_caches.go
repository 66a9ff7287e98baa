package reaper

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/podstate"
)

// The shared caches of a batch run: one EndpointSlice informer for every target's service and
// one pod informer for every target's dependents, each filtered server-side as far as a label
// selector can (a namespace set cannot be; the target set is checked here) and confined to a
// namespace when all the targets share one (a run of one service: its namespace, so a
// namespaced Role is enough).
// Their handlers only record and enqueue: all reaping happens on the run's workers.

// serviceTracker follows the readiness of the targets' services and records each return (not
// Ready → Ready) with the time it was seen: a fact the target's gate acts on however late its
// turn comes.
type serviceTracker struct {
	informer  cache.SharedIndexInformer
	selector  string           // server-side: the targets' service names
	namespace string           // the services' namespace when they share one; "" = every namespace
	onChange  func(ServiceRef) // the target's turn; called without the lock held

	mu       sync.Mutex
	synced   bool // the caches have synced (resync): before, the first list says nothing yet
	services map[ServiceRef]*followed
}

// followed is one target's service: its READY_WHEN (the target's readyWhen), its slices folded
// event by event, and what is known of it.
type followed struct {
	when   podstate.ReadyWhen
	slices podstate.ServiceSlices
	view   serviceView
}

// newServiceTracker builds the follower (podstate.SliceFollower): the services' namespace
// (every namespace unless they share one), the targets' service names (a storm's targets
// share a few names: etcd-main-client, ...). A storm's batch keeps every target's slices for
// its whole run, slim.
func newServiceTracker(client kubernetes.Interface, when map[ServiceRef]podstate.ReadyWhen, onChange func(ServiceRef)) (*serviceTracker, error) {
	names, namespaces := sets.New[string](), sets.New[string]()
	t := &serviceTracker{services: map[ServiceRef]*followed{}, onChange: onChange}
	for r, w := range when {
		names.Insert(r.Name)
		namespaces.Insert(r.Namespace)
		t.services[r] = &followed{when: w}
	}
	t.namespace = onlyOne(namespaces)
	var err error
	if _, t.informer, t.selector, err = podstate.SliceFollower(client, t.namespace, sets.List(names)); err != nil {
		return nil, err
	}
	_, err = t.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.changed(obj, false) },
		UpdateFunc: func(_, obj any) { t.changed(obj, false) },
		DeleteFunc: func(obj any) { t.changed(obj, true) },
	})
	return t, err
}

// changed folds one event into its service's slices (podstate.ServiceSlices, as the
// coordinator follows them) and, once the caches have synced, records what it makes of the
// service. Before then the first list is still arriving and says nothing: resync decides.
func (t *serviceTracker) changed(obj any, deleted bool) {
	keys, _ := podstate.ServiceKeys(obj)
	for _, k := range keys {
		ns, name, err := cache.SplitMetaNamespaceKey(k)
		if err != nil {
			continue
		}
		ref := ServiceRef{Namespace: ns, Name: name}
		t.mu.Lock()
		f, ours := t.services[ref]
		changed := false
		if ours {
			f.slices.Apply(obj, deleted)
			changed = t.synced && f.evaluate()
		}
		t.mu.Unlock()
		if changed {
			t.onChange(ref)
		}
	}
}

// resync evaluates every service once the caches have synced; the caller then gives every
// target a turn.
func (t *serviceTracker) resync() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.synced = true
	for _, f := range t.services {
		f.evaluate()
	}
}

// evaluate records the service's readiness as its folded slices say, and a return if it just
// became Ready; it says whether what is known of it changed.
func (f *followed) evaluate() bool {
	v, ready := &f.view, f.slices.Ready(f.when)
	if v.Known && v.Ready == ready {
		return false
	}
	if ready {
		v.Returns++
		v.LastReturn = time.Now()
	}
	v.Known, v.Ready = true, ready
	return true
}

// view is what is known of the service now; a plain run follows none (t is nil): its service
// is Ready from the start.
func (t *serviceTracker) view(ref ServiceRef) serviceView {
	if t == nil {
		return serviceView{Known: true, Ready: true}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if f, ok := t.services[ref]; ok {
		return f.view
	}
	return serviceView{}
}

// onlyOne is the one member of s, or "" when s has several: the namespace informers are
// confined to, or every namespace.
func onlyOne(s sets.Set[string]) string {
	if s.Len() == 1 {
		return sets.List(s)[0]
	}
	return ""
}

// podCache is the batch's pod informers: one informer (in namespace, "" = every namespace) whose label selector every
// target's dependents pass (podSelectors), or, when the targets' selectors share no label, one
// per distinct selector (a storm's targets have the few selectors of a few configured
// services). Pods are kept slim. Handlers hand each added or updated pod to onPod.
type podCache struct {
	informers []cache.SharedIndexInformer
	selectors []string // server-side, for the log
}

// newPodCache starts nothing: it builds one slim pod informer per selector of podSelectors
// (server-side filtered, namespace-scoped when namespace is set).
func newPodCache(client kubernetes.Interface, selectors []labels.Selector, fieldSelector, namespace string, onPod func(*corev1.Pod)) *podCache {
	on := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			onPod(pod)
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, obj any) { on(obj) }}
	c := &podCache{}
	for _, sel := range podSelectors(selectors) {
		labelSelector := sel.String()
		c.selectors = append(c.selectors, labelSelector)
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
				lo.LabelSelector = labelSelector
				lo.FieldSelector = fieldSelector
			}))
		inf := f.Core().V1().Pods().Informer()
		// The cache keeps only what the run reads (slimPod): a run over many pods stays small.
		_ = inf.SetTransform(func(obj any) (any, error) {
			if pod, ok := obj.(*corev1.Pod); ok {
				return slimPod(pod), nil
			}
			return obj, nil
		})
		_, _ = inf.AddEventHandler(handler)
		c.informers = append(c.informers, inf)
	}
	return c
}

// inNamespace lists the cached pods of a namespace ("": of every namespace), each once, in
// namespace and name order (the API's list order, which the default sorting keeps).
func (c *podCache) inNamespace(ns string) []*corev1.Pod {
	seen := sets.New[string]()
	var out []*corev1.Pod
	for _, inf := range c.informers {
		objs := inf.GetStore().List()
		if ns != "" {
			objs, _ = inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
		}
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok && !seen.Has(string(p.UID)) {
				seen.Insert(string(p.UID))
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// get is the pod of key as the caches hold it now; false when it is gone or terminating.
func (c *podCache) get(key cache.ObjectName) (*corev1.Pod, bool) {
	k := key.String()
	for _, inf := range c.informers {
		obj, exists, err := inf.GetStore().GetByKey(k)
		if err != nil || !exists {
			continue
		}
		pod, ok := obj.(*corev1.Pod)
		return pod, ok && pod.DeletionTimestamp == nil
	}
	return nil, false
}

// changedPods are the watched pods of a target that changed since its last turn, each once,
// in the order they first changed: the informers' handlers add, the target's turn takes. Its
// pods are judged as the caches hold them when it takes them, so a pod that changed ten times
// is judged once, as it is now, and one deleted meanwhile not at all.
type changedPods struct {
	mu   sync.Mutex
	keys []cache.ObjectName
	has  sets.Set[cache.ObjectName]
}

func (c *changedPods) add(key cache.ObjectName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.has.Has(key) {
		return
	}
	if c.has == nil {
		c.has = sets.New[cache.ObjectName]()
	}
	c.has.Insert(key)
	c.keys = append(c.keys, key)
}

func (c *changedPods) take() []cache.ObjectName {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := c.keys
	c.keys, c.has = nil, nil
	return keys
}

// podSelectors is the server-side filter of the batch's pod informers: one selector every
// dependent passes (commonSelector) when the selectors share a label, else the distinct
// selectors themselves.
func podSelectors(selectors []labels.Selector) []labels.Selector {
	if common := commonSelector(selectors); !common.Empty() {
		return []labels.Selector{common}
	}
	distinct := map[string]labels.Selector{}
	for _, s := range selectors {
		distinct[s.String()] = s
	}
	out := make([]labels.Selector, 0, len(distinct))
	for _, k := range slices.Sorted(maps.Keys(distinct)) {
		out = append(out, distinct[k])
	}
	return out
}

// commonSelector is the narrowest single selector that every pod matching any of the OR-ed
// selectors also matches, built from the keys every selector requires: a key each requires
// with values (=, ==, in) becomes `key in (all their values)`; a key one of them only
// requires to exist becomes `key`. Negative requirements (!=, notin, !) are left to the
// client-side check. Empty when no key is required by all of them.
func commonSelector(selectors []labels.Selector) labels.Selector {
	out := labels.NewSelector()
	if len(selectors) == 0 {
		return out
	}
	type need struct {
		values sets.Set[string]
		exists bool // some selector only asks for the key to exist
		count  int  // selectors that require the key
	}
	needs := map[string]*need{}
	for _, s := range selectors {
		reqs, _ := s.Requirements()
		inThis := sets.New[string]()
		for _, r := range reqs {
			if inThis.Has(r.Key()) {
				continue // the key's first positive requirement is enough of a superset
			}
			n := needs[r.Key()]
			if n == nil {
				n = &need{values: sets.New[string]()}
				needs[r.Key()] = n
			}
			switch r.Operator() {
			case selection.Equals, selection.DoubleEquals, selection.In:
				n.values.Insert(r.ValuesUnsorted()...)
			case selection.Exists:
				n.exists = true
			default:
				continue // not a positive requirement
			}
			inThis.Insert(r.Key())
			n.count++
		}
	}
	for _, key := range slices.Sorted(maps.Keys(needs)) {
		n := needs[key]
		if n.count < len(selectors) {
			continue
		}
		op, values := selection.In, sets.List(n.values)
		if n.exists {
			op, values = selection.Exists, nil
		}
		if r, err := labels.NewRequirement(key, op, values); err == nil {
			out = out.Add(*r)
		}
	}
	return out
}
