package reaper

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/depwatch/depwatch/internal/podstate"
)

// pageSize bounds how many pods one list response holds, so memory stays flat however large
// the cluster: only the pages in flight and the matched pods (slimmed) are kept.
const pageSize = 500

// listPods lists pods page by page with the typed client (protobuf, as NewClients builds it)
// and client-go's pager (Limit + Continue, the next page fetched while this one is judged;
// an expired continue token falls back to a full list), with server-side label and field
// selectors, and calls visit for each pod. The typed client already tries a GET again after
// a reset or lost connection. visit must copy a pod it keeps: the page is dropped once
// visited.
func listPods(ctx context.Context, client kubernetes.Interface, namespace, labelSelector, fieldSelector string, visit func(*corev1.Pod)) error {
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Pods(namespace).List(ctx, opts)
	})
	p.PageSize = pageSize
	p.PageBufferSize = 1 // one page ahead: the wire overlaps the rules, memory stays ~2 pages
	err := p.EachListItem(ctx, metav1.ListOptions{LabelSelector: labelSelector, FieldSelector: fieldSelector}, func(obj runtime.Object) error {
		if pod, ok := obj.(*corev1.Pod); ok {
			visit(pod)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list pods (namespace %q, labels %q, fields %q): %w", namespace, labelSelector, fieldSelector, err)
	}
	return nil
}

// slimPod is podstate.Slim (identity and what the crash-loop test reads) plus what the
// filters, the other rules, sorting, REAP_COOLDOWN and the delete/evict call read, so a kept
// pod (a cycle's match, a WATCH informer's cache entry) costs a fraction of the object the API
// sent: no managedFields, env, volumes, probes, images or resources.
func slimPod(p *corev1.Pod) *corev1.Pod {
	out := podstate.Slim(p)
	out.Labels, out.Annotations, out.OwnerReferences = p.Labels, p.Annotations, p.OwnerReferences
	out.CreationTimestamp = p.CreationTimestamp
	out.Spec.NodeName = p.Spec.NodeName
	out.Status.Reason, out.Status.StartTime, out.Status.Conditions = p.Status.Reason, p.Status.StartTime, p.Status.Conditions
	return out
}
