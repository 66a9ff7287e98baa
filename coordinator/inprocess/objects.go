package inprocess

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// jobsResource names the objects kept, in the API's errors.
var jobsResource = schema.GroupResource{Group: batchv1.GroupName, Resource: "jobs"}

// objects keeps the in-process runs' Jobs by namespace/name, and hands every change to the
// views that follow them (the controllers' caches, jobs.Objects). No resourceVersions and no watches: a view
// is told each change in the order it was made, while it runs. Objects go in and out as
// copies; what a view holds is never changed in place.
type objects struct {
	now func() metav1.Time

	mu    sync.Mutex
	byKey map[string]runtime.Object
	views map[*view]struct{}
}

func newObjects(now func() metav1.Time) *objects {
	return &objects{now: now, views: map[*view]struct{}{}, byKey: map[string]runtime.Object{}}
}

func key(namespace, name string) string { return namespace + "/" + name }

func metaOf(obj runtime.Object) metav1.Object {
	m, _ := meta.Accessor(obj) // every object kept is a Job
	return m
}

// changed tells the views that old became obj (old nil: created; obj nil: deleted);
// o.mu is held, so every view sees the changes in one order.
func (o *objects) changed(old, obj runtime.Object) {
	for v := range o.views {
		v.offer(old, obj)
	}
}

// create keeps a copy of obj, with a UID and creation time when it has none.
func (o *objects) create(obj runtime.Object) (runtime.Object, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obj = obj.DeepCopyObject()
	m := metaOf(obj)
	if _, taken := o.byKey[key(m.GetNamespace(), m.GetName())]; taken {
		return nil, apierrors.NewAlreadyExists(jobsResource, m.GetName())
	}
	if m.GetUID() == "" {
		m.SetUID(uuid.NewUUID())
	}
	if ts := m.GetCreationTimestamp(); ts.IsZero() {
		m.SetCreationTimestamp(o.now())
	}
	o.byKey[key(m.GetNamespace(), m.GetName())] = obj
	o.changed(nil, obj)
	return obj.DeepCopyObject(), nil
}

// mutate applies change to a copy of the kept object and keeps the result; false when there
// is no such object (deleted meanwhile).
func (o *objects) mutate(namespace, name string, change func(runtime.Object)) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	old, ok := o.byKey[key(namespace, name)]
	if !ok {
		return false
	}
	obj := old.DeepCopyObject()
	change(obj)
	o.byKey[key(namespace, name)] = obj
	o.changed(old, obj)
	return true
}

// remove deletes the object; a UID that is not the kept object's is a conflict (an object
// of the same name made since), as the API server's preconditions say ("": any).
func (o *objects) remove(namespace, name string, uid types.UID) (runtime.Object, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	old, ok := o.byKey[key(namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(jobsResource, name)
	}
	if uid != "" && metaOf(old).GetUID() != uid {
		return nil, apierrors.NewConflict(jobsResource, name, errUIDPrecondition)
	}
	delete(o.byKey, key(namespace, name))
	o.changed(old, nil)
	return old.DeepCopyObject(), nil
}

var errUIDPrecondition = errors.New("the UID in the precondition is not the object's")

func (o *objects) get(namespace, name string) (runtime.Object, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obj, ok := o.byKey[key(namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(jobsResource, name)
	}
	return obj.DeepCopyObject(), nil
}

func matches(obj runtime.Object, namespace string, sel labels.Selector) bool {
	m := metaOf(obj)
	return (namespace == "" || m.GetNamespace() == namespace) && sel.Matches(labels.Set(m.GetLabels()))
}

// view is what a controller follows of the Jobs (jobs.Objects): the objects in namespace
// that sel matches, in an indexer, and their changes handed to its handlers in order by its
// own goroutine (RunWithContext), as an informer hands its events out. The indexer is
// current when a handler is called, or ahead of it, as an informer's is.
type view struct {
	o         *objects
	namespace string
	sel       labels.Selector
	indexer   cache.Indexer
	synced    atomic.Bool
	done      chan struct{} // closed once synced

	mu       sync.Mutex
	handlers []cache.ResourceEventHandler
	queue    []delta
	wake     chan struct{}
}

// delta is one change for the handlers that were there when it was made (a handler added
// later is told the objects as they are then, instead).
type delta struct {
	old, obj any // old nil: added; obj nil: deleted
	initial  bool
	to       []cache.ResourceEventHandler
}

var _ jobs.Objects = (*view)(nil)

func (o *objects) view(namespace, selector string) jobs.Objects {
	sel, err := labels.Parse(selector)
	if err != nil {
		sel = labels.Nothing() // the controllers' selectors are built, not typed
	}
	return &view{o: o, namespace: namespace, sel: sel, wake: make(chan struct{}, 1), done: make(chan struct{}),
		indexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
}

func (v *view) AddIndexers(ix cache.Indexers) error { return v.indexer.AddIndexers(ix) }
func (v *view) GetIndexer() cache.Indexer           { return v.indexer }
func (v *view) GetStore() cache.Store               { return v.indexer }
func (v *view) HasSynced() bool                     { return v.synced.Load() }

// A view is also its handlers' registration (cache.ResourceEventHandlerRegistration) and
// its own cache.DoneChecker: synced once it runs.
func (v *view) HasSyncedChecker() cache.DoneChecker { return v }
func (v *view) Name() string                        { return "Jobs of the in-process runs" }
func (v *view) Done() <-chan struct{}               { return v.done }

// AddEventHandler adds h; once the view runs, h is first told of the objects it holds.
func (v *view) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	v.o.mu.Lock() // no change in between: h sees each object once, then its changes
	defer v.o.mu.Unlock()
	v.mu.Lock()
	v.handlers = append(v.handlers, h)
	v.mu.Unlock()
	if v.synced.Load() {
		for _, obj := range v.indexer.List() {
			v.push(delta{obj: obj, initial: true, to: []cache.ResourceEventHandler{h}})
		}
	}
	return v, nil
}

// RunWithContext fills the view with the objects kept now, follows their changes and hands
// them to the handlers until ctx ends.
func (v *view) RunWithContext(ctx context.Context) {
	v.o.mu.Lock()
	for _, obj := range v.o.byKey {
		if matches(obj, v.namespace, v.sel) {
			_ = v.indexer.Add(obj)
			v.push(delta{obj: obj, initial: true})
		}
	}
	v.o.views[v] = struct{}{}
	v.synced.Store(true)
	close(v.done)
	v.o.mu.Unlock()
	defer func() {
		v.o.mu.Lock()
		delete(v.o.views, v)
		v.o.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-v.wake:
		}
		for {
			v.mu.Lock()
			if len(v.queue) == 0 {
				v.mu.Unlock()
				break
			}
			d := v.queue[0]
			v.queue = v.queue[1:]
			v.mu.Unlock()
			for _, h := range d.to {
				switch {
				case d.old == nil:
					h.OnAdd(d.obj, d.initial)
				case d.obj == nil:
					h.OnDelete(d.old)
				default:
					h.OnUpdate(d.old, d.obj)
				}
			}
		}
	}
}

// offer applies a change to the view's indexer and queues it for the handlers;
// the objects' lock is held.
func (v *view) offer(old, obj runtime.Object) {
	was := old != nil && matches(old, v.namespace, v.sel)
	is := obj != nil && matches(obj, v.namespace, v.sel)
	switch {
	case is && was:
		_ = v.indexer.Update(obj)
		v.push(delta{old: old, obj: obj})
	case is:
		_ = v.indexer.Add(obj)
		v.push(delta{obj: obj})
	case was:
		_ = v.indexer.Delete(old)
		v.push(delta{old: old})
	}
}

// push queues d without bound (the executor never waits for a slow handler), for d.to or,
// when it names none, for the handlers there now.
func (v *view) push(d delta) {
	v.mu.Lock()
	if d.to == nil {
		d.to = slices.Clone(v.handlers)
	}
	v.queue = append(v.queue, d)
	v.mu.Unlock()
	select {
	case v.wake <- struct{}{}:
	default:
	}
}
