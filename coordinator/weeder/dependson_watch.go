package weeder

import (
	"context"
	"fmt"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/podstate"
)

// dependsOn follows the dependencies workloads declare with AnnotationDependsOn: the
// Deployments, StatefulSets and DaemonSets, cut down to their name, UID, that annotation and
// their selector before they are cached; the index of what they declare; and an EndpointSlice
// watch per service name that annotations name and the config does not (one watch for the
// name in every namespace, started when the first workload names it, stopped with the last).
type dependsOn struct {
	client    kubernetes.Interface
	workloads []cache.SharedIndexInformer

	mu    sync.Mutex
	index dependsOnIndex
	names map[string]context.CancelFunc // service name → its EndpointSlice watch's stop
	watch map[string]cache.SharedIndexInformer
	ctx   context.Context // set by start; nil: watches wait for it
}

func newDependsOn(client kubernetes.Interface) *dependsOn {
	d := &dependsOn{client: client, index: newDependsOnIndex(),
		names: map[string]context.CancelFunc{}, watch: map[string]cache.SharedIndexInformer{}}
	for _, inf := range []cache.SharedIndexInformer{
		appsinformers.NewDeploymentInformer(client, metav1.NamespaceAll, 0, cache.Indexers{}),
		appsinformers.NewStatefulSetInformer(client, metav1.NamespaceAll, 0, cache.Indexers{}),
		appsinformers.NewDaemonSetInformer(client, metav1.NamespaceAll, 0, cache.Indexers{}),
	} {
		_ = inf.SetTransform(slimWorkload) // only the annotation and the selector are read
		d.workloads = append(d.workloads, inf)
	}
	return d
}

// workload is what the weeder reads of a Deployment, StatefulSet or DaemonSet.
type workload struct {
	kind     string
	meta     metav1.ObjectMeta
	selector *metav1.LabelSelector
}

func workloadOf(obj any) (workload, bool) {
	switch o := unwrap(obj).(type) {
	case *cachedWorkload:
		return workload{o.kind, o.ObjectMeta, o.selector}, true
	case *appsv1.Deployment:
		return workload{"Deployment", o.ObjectMeta, o.Spec.Selector}, true
	case *appsv1.StatefulSet:
		return workload{"StatefulSet", o.ObjectMeta, o.Spec.Selector}, true
	case *appsv1.DaemonSet:
		return workload{"DaemonSet", o.ObjectMeta, o.Spec.Selector}, true
	}
	return workload{}, false
}

// key is <kind>/<namespace>/<name>.
func (w workload) key() string { return w.kind + "/" + w.meta.Namespace + "/" + w.meta.Name }

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
	w, ok := workloadOf(obj)
	if !ok {
		return obj, nil
	}
	m := metav1.ObjectMeta{Name: w.meta.Name, Namespace: w.meta.Namespace, UID: w.meta.UID, ResourceVersion: w.meta.ResourceVersion}
	if v, ok := w.meta.Annotations[AnnotationDependsOn]; ok {
		m.Annotations = map[string]string{AnnotationDependsOn: v}
	}
	return &cachedWorkload{ObjectMeta: m, kind: w.kind, selector: w.selector}, nil
}

// DeclaredBy is what a workload's annotation declares (pure): the service keys its pods
// depend on, and the problems that make the annotation ignored (then no service).
func DeclaredBy(kind, ns, value string, selector *metav1.LabelSelector) ([]string, field.ErrorList) {
	keys, errs := ParseDependsOn(ns, value)
	if len(errs) > 0 {
		return nil, errs
	}
	if len(keys) == 0 {
		return nil, nil
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

// nameOf is the service name of key <namespace>/<name>.
func nameOf(key string) string {
	_, name, _ := strings.Cut(key, "/")
	return name
}

// follows: an annotation names the service key.
func (d *dependsOn) follows(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.index.follows(key)
}

func (d *dependsOn) selectors(key string) dependentSelectors {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.index.selectors(key)
}

// eventRef is the reference an Event on the workload is recorded with.
func (w workload) eventRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: w.kind, APIVersion: "apps/v1", Namespace: w.meta.Namespace,
		Name: w.meta.Name, UID: w.meta.UID, ResourceVersion: w.meta.ResourceVersion}
}

func (w workload) String() string {
	return fmt.Sprintf("%s %s/%s", strings.ToLower(w.kind), w.meta.Namespace, w.meta.Name)
}

// crashLoopingIn names a crash-looping pod in namespace ns that one of sels matches ("" if
// none), listing the pods: the dependents an annotation declares appear at run time, so they
// have no informer of their own; this list is made only on a catch-up edge.
func crashLoopingIn(ctx context.Context, client kubernetes.Interface, ns string, sels []string) (string, error) {
	for _, sel := range sels {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: "0"})
		if err != nil {
			return "", fmt.Errorf("listing the dependents %q of %s: %w", sel, ns, err)
		}
		for i := range pods.Items {
			if _, crashing := podstate.CrashLoopBackOff(&pods.Items[i]); crashing {
				return pods.Items[i].Name, nil
			}
		}
	}
	return "", nil
}
