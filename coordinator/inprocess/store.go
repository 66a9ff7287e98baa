package inprocess

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// kind is one of the object types the store keeps.
type kind string

const (
	kindJob       kind = "jobs"
	kindPod       kind = "pods"
	kindConfigMap kind = "configmaps"
)

func (k kind) groupResource() schema.GroupResource {
	if k == kindJob {
		return schema.GroupResource{Group: batchv1.GroupName, Resource: string(k)}
	}
	return schema.GroupResource{Resource: string(k)}
}

// historySize is how many recent changes a watch can resume after; one that asks to resume
// from further back is told its resourceVersion expired, and its informer lists again, as
// with the API server.
const historySize = 1024

// store keeps the in-process runs' objects as the API server would keep Jobs, pods and
// ConfigMaps: versioned (one resourceVersion counter), with UIDs and creation times, and
// watches from a resourceVersion for the controllers' informers. Objects go in and out as
// copies.
type store struct {
	now func() metav1.Time

	mu       sync.Mutex
	rv       uint64
	objects  map[kind]map[string]runtime.Object // by namespace/name
	history  []change                           // the last historySize changes, oldest first
	dropped  uint64                             // resourceVersion of the newest change no longer in history
	watchers map[*watcher]bool
	closed   bool
}

type change struct {
	kind kind
	rv   uint64
	ev   watch.Event
}

func newStore(now func() metav1.Time) *store {
	return &store{now: now, watchers: map[*watcher]bool{},
		objects: map[kind]map[string]runtime.Object{kindJob: {}, kindPod: {}, kindConfigMap: {}}}
}

func key(namespace, name string) string { return namespace + "/" + name }

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }

// record stamps obj with the next resourceVersion and tells the watchers; s.mu is held.
func (s *store) record(k kind, typ watch.EventType, obj runtime.Object) {
	s.rv++
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(formatRV(s.rv))
	c := change{kind: k, rv: s.rv, ev: watch.Event{Type: typ, Object: obj.DeepCopyObject()}}
	s.history = append(s.history, c)
	if len(s.history) > historySize {
		s.dropped = s.history[0].rv
		s.history = s.history[1:]
	}
	for w := range s.watchers {
		w.offer(c)
	}
}

// create stores a copy of obj, with a UID and creation time when it has none.
func (s *store) create(k kind, obj runtime.Object) (runtime.Object, error) {
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.objects[k][key(m.GetNamespace(), m.GetName())]; exists {
		return nil, apierrors.NewAlreadyExists(k.groupResource(), m.GetName())
	}
	if m.GetUID() == "" {
		m.SetUID(uuid.NewUUID())
	}
	if ts := m.GetCreationTimestamp(); ts.IsZero() {
		m.SetCreationTimestamp(s.now())
	}
	s.record(k, watch.Added, obj)
	s.objects[k][key(m.GetNamespace(), m.GetName())] = obj
	return obj.DeepCopyObject(), nil
}

// update replaces the object; a resourceVersion that is not the stored one is a conflict,
// as with the API server ("" updates whatever is stored).
func (s *store) update(k kind, obj runtime.Object) (runtime.Object, error) {
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[k][key(m.GetNamespace(), m.GetName())]
	if !ok {
		return nil, apierrors.NewNotFound(k.groupResource(), m.GetName())
	}
	cm, _ := meta.Accessor(cur)
	if rv := m.GetResourceVersion(); rv != "" && rv != cm.GetResourceVersion() {
		return nil, apierrors.NewConflict(k.groupResource(), m.GetName(), fmt.Errorf("the object has been modified"))
	}
	m.SetUID(cm.GetUID())
	m.SetCreationTimestamp(cm.GetCreationTimestamp())
	s.record(k, watch.Modified, obj)
	s.objects[k][key(m.GetNamespace(), m.GetName())] = obj
	return obj.DeepCopyObject(), nil
}

// mutate applies change to the stored object (a copy of it) and stores the result; false
// when there is no such object (deleted meanwhile).
func (s *store) mutate(k kind, namespace, name string, change func(runtime.Object)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[k][key(namespace, name)]
	if !ok {
		return false
	}
	obj := cur.DeepCopyObject()
	change(obj)
	s.record(k, watch.Modified, obj)
	s.objects[k][key(namespace, name)] = obj
	return true
}

// remove deletes the object; a UID that is not the stored object's is a conflict (an object
// of the same name made since), as the API server's preconditions say.
func (s *store) remove(k kind, namespace, name string, uid types.UID) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[k][key(namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(k.groupResource(), name)
	}
	cm, _ := meta.Accessor(cur)
	if uid != "" && uid != cm.GetUID() {
		return nil, apierrors.NewConflict(k.groupResource(), name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s)", uid, cm.GetUID()))
	}
	delete(s.objects[k], key(namespace, name))
	s.record(k, watch.Deleted, cur)
	return cur.DeepCopyObject(), nil
}

func (s *store) get(k kind, namespace, name string) (runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[k][key(namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(k.groupResource(), name)
	}
	return cur.DeepCopyObject(), nil
}

// list returns copies of the objects of k in namespace ("" every one) that sel matches, and
// the resourceVersion they are current at.
func (s *store) list(k kind, namespace string, sel labels.Selector) ([]runtime.Object, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runtime.Object
	for _, obj := range s.objects[k] {
		if matches(obj, namespace, sel) {
			out = append(out, obj.DeepCopyObject())
		}
	}
	return out, s.rv
}

func matches(obj runtime.Object, namespace string, sel labels.Selector) bool {
	m, err := meta.Accessor(obj)
	return err == nil && (namespace == "" || m.GetNamespace() == namespace) && sel.Matches(labels.Set(m.GetLabels()))
}

// watch follows the changes of k in namespace that sel matches, after resourceVersion from
// ("": from now on; a list's resourceVersion: from that list on, "0" included). A from that
// is no longer in the history is expired (410).
func (s *store) watch(k kind, namespace string, sel labels.Selector, from string) (watch.Interface, error) {
	var after uint64
	fromNow := from == ""
	if !fromNow {
		v, err := strconv.ParseUint(from, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q: not one of this store's", from))
		}
		after = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fromNow {
		after = s.rv
	}
	if after < s.dropped {
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %d is too old (the history starts after %d)", after, s.dropped))
	}
	w := newWatcher(s, k, namespace, sel)
	if s.closed {
		w.Stop()
		return w, nil
	}
	for _, c := range s.history {
		if c.rv > after {
			w.offer(c)
		}
	}
	s.watchers[w] = true
	return w, nil
}

// close stops every watch; the store keeps its objects.
func (s *store) close() {
	s.mu.Lock()
	s.closed = true
	ws := make([]*watcher, 0, len(s.watchers))
	for w := range s.watchers {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

func (s *store) forget(w *watcher) {
	s.mu.Lock()
	delete(s.watchers, w)
	s.mu.Unlock()
}

// watcher is one watch: changes are queued without bound (the store never waits for a slow
// reader, and never drops a change) and handed out in order by its own goroutine, which ends
// when the watch is stopped.
type watcher struct {
	s         *store
	kind      kind
	namespace string
	sel       labels.Selector

	mu    sync.Mutex
	queue []watch.Event
	wake  chan struct{}
	out   chan watch.Event
	done  chan struct{}
	once  sync.Once
}

func newWatcher(s *store, k kind, namespace string, sel labels.Selector) *watcher {
	w := &watcher{s: s, kind: k, namespace: namespace, sel: sel,
		wake: make(chan struct{}, 1), out: make(chan watch.Event), done: make(chan struct{})}
	go w.pump()
	return w
}

// offer queues c if the watch is for it; the store's lock is held.
func (w *watcher) offer(c change) {
	if c.kind != w.kind || !matches(c.ev.Object, w.namespace, w.sel) {
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, c.ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) pump() {
	defer close(w.out)
	for {
		w.mu.Lock()
		next := w.queue
		w.queue = nil
		w.mu.Unlock()
		for _, ev := range next {
			select {
			case w.out <- ev:
			case <-w.done:
				return
			}
		}
		select {
		case <-w.wake:
		case <-w.done:
			return
		}
	}
}

func (w *watcher) Stop() {
	w.once.Do(func() {
		close(w.done)
		w.s.forget(w)
	})
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.out }

// listWatch is a cache.ListerWatcher over the store, for an informer of the controllers.
type listWatch struct {
	s         *store
	kind      kind
	namespace string
	selector  string
}

var _ cache.ListerWatcherWithContext = listWatch{}

func (l listWatch) sel() (labels.Selector, error) {
	sel, err := labels.Parse(l.selector)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("label selector %q: %v", l.selector, err))
	}
	return sel, nil
}

func (l listWatch) List(o metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), o)
}

func (l listWatch) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), o)
}

func (l listWatch) ListWithContext(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	sel, err := l.sel()
	if err != nil {
		return nil, err
	}
	objs, rv := l.s.list(l.kind, l.namespace, sel)
	lm := metav1.ListMeta{ResourceVersion: formatRV(rv)}
	switch l.kind {
	case kindJob:
		list := &batchv1.JobList{ListMeta: lm}
		for _, o := range objs {
			list.Items = append(list.Items, *o.(*batchv1.Job))
		}
		return list, nil
	case kindPod:
		list := &corev1.PodList{ListMeta: lm}
		for _, o := range objs {
			list.Items = append(list.Items, *o.(*corev1.Pod))
		}
		return list, nil
	default:
		list := &corev1.ConfigMapList{ListMeta: lm}
		for _, o := range objs {
			list.Items = append(list.Items, *o.(*corev1.ConfigMap))
		}
		return list, nil
	}
}

func (l listWatch) WatchWithContext(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	sel, err := l.sel()
	if err != nil {
		return nil, err
	}
	return l.s.watch(l.kind, l.namespace, sel, o.ResourceVersion)
}

// IsWatchListSemanticsUnSupported tells client-go's reflector to list, then watch: the store
// does not stream its initial list as watch events.
func (listWatch) IsWatchListSemanticsUnSupported() bool { return true }
