package reaper

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// pageSize bounds how many pods one list response holds, so memory stays flat however large
// the cluster: only the current page and the matched pods are kept.
const pageSize = 500

// listPods lists pods page by page (Limit + Continue) with server-side label and field
// selectors and calls visit for each pod. visit must copy a pod it keeps: the page is dropped
// once visited.
func listPods(ctx context.Context, client kubernetes.Interface, namespace, labelSelector, fieldSelector string, visit func(*corev1.Pod)) error {
	opts := metav1.ListOptions{LabelSelector: labelSelector, FieldSelector: fieldSelector, Limit: pageSize}
	for {
		page, err := client.CoreV1().Pods(namespace).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list pods (namespace %q, labels %q, fields %q): %w", namespace, labelSelector, fieldSelector, err)
		}
		for i := range page.Items {
			visit(&page.Items[i])
		}
		if page.Continue == "" {
			return nil
		}
		opts.Continue = page.Continue
	}
}
