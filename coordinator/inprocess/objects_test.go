package inprocess

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// recorder writes down what a view's handler is told, as "add a", "update a", "delete a".
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) handler() cache.ResourceEventHandlerFuncs {
	note := func(what string) func(obj any) {
		return func(obj any) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.seen = append(r.seen, what+" "+obj.(*batchv1.Job).Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: note("add"), UpdateFunc: func(_, obj any) { note("update")(obj) }, DeleteFunc: note("delete")}
}

func (r *recorder) wait(t *testing.T, want []string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("events %v", want), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Equal(r.seen, want)
	})
}

func job(name string, labels map[string]string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "garden", Labels: labels}}
}

// relabel gives the kept Job labels.
func relabel(labels map[string]string) func(runtime.Object) {
	return func(o runtime.Object) { o.(*batchv1.Job).Labels = labels }
}

// TestAViewIsToldEveryChangeOfItsObjectsInOrder: a view of the executor's objects is what the
// controllers' informers were: the objects there when it starts, then each change in the
// order it was made; an object that stops matching its selector leaves it as a delete; a
// handler added once it runs is first told what it holds; and the API's error kinds stand.
func TestAViewIsToldEveryChangeOfItsObjectsInOrder(t *testing.T) {
	o := newObjects(func() metav1.Time { return metav1.NewTime(time.Unix(0, 0)) })
	probe := map[string]string{"depwatch.io/kind": "probe"}
	if _, err := o.create(job("before", probe)); err != nil {
		t.Fatal(err)
	}
	v := o.view("garden", "depwatch.io/kind=probe")
	early := &recorder{}
	if _, err := v.AddEventHandler(early.handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go v.RunWithContext(ctx)
	waitFor(t, "the view to sync", v.HasSynced)

	if _, err := o.create(job("a", probe)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.create(job("other", nil)); err != nil { // not the view's
		t.Fatal(err)
	}
	if !o.mutate("garden", "a", relabel(probe)) {
		t.Fatal("a is not kept")
	}
	if !o.mutate("garden", "before", relabel(nil)) { // leaves the selector
		t.Fatal("before is not kept")
	}
	if _, err := o.remove("garden", "a", ""); err != nil {
		t.Fatal(err)
	}
	early.wait(t, []string{"add before", "add a", "update a", "delete before", "delete a"})
	if keys := v.GetIndexer().ListKeys(); len(keys) != 0 {
		t.Errorf("the view still holds %v", keys)
	}

	if _, err := o.create(job("b", probe)); err != nil {
		t.Fatal(err)
	}
	late := &recorder{}
	if _, err := v.AddEventHandler(late.handler()); err != nil {
		t.Fatal(err)
	}
	late.wait(t, []string{"add b"})

	if _, err := o.create(job("b", probe)); !apierrors.IsAlreadyExists(err) {
		t.Errorf("creating b twice: %v, want AlreadyExists", err)
	}
	if _, err := o.remove("garden", "b", "not-its-uid"); !apierrors.IsConflict(err) {
		t.Errorf("removing b under another UID: %v, want Conflict", err)
	}
	if _, err := o.remove("garden", "gone", ""); !apierrors.IsNotFound(err) {
		t.Errorf("removing a Job never made: %v, want NotFound", err)
	}
}
