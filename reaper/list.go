package reaper

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"
)

// pageSize bounds how many pods one list response holds, so memory stays flat however large
// the cluster: only the pages in flight and the matched pods (slimmed) are kept.
const pageSize = 500

// listPods lists pods page by page (client-go's pager: Limit + Continue, the next page fetched
// while this one is judged) with server-side label and field selectors and calls visit for each
// pod. The pods visit sees are slim (slimPod's fields only): with a real API client each page
// is fetched as raw protobuf and decoded by the skipping decoder (podwire.go), which never
// builds the fields no rule reads. visit must copy a pod it keeps: the page is dropped once
// visited.
func listPods(ctx context.Context, client kubernetes.Interface, namespace, labelSelector, fieldSelector string, visit func(*corev1.Pod)) error {
	var fn pager.ListPageFunc
	if rc, ok := client.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		// The pager calls fn from one goroutine, one page after the other, so the listing's
		// pages share the decoder (its interned strings) and the buffer a body is read into:
		// a page is decoded before the next is fetched, and its slim pods hold no reference
		// to the body.
		d := newPodDecoder()
		var buf bytes.Buffer
		fn = func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return listSlimPodPage(ctx, rc, d, &buf, namespace, opts)
		}
	} else {
		// A client without a REST client of its own (the fake clientset of tests): the typed
		// list, slimmed here, so visit sees the same pods either way.
		fn = func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := client.CoreV1().Pods(namespace).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return slimList(list), nil
		}
	}
	p := pager.New(fn)
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

// listAccept asks for protobuf and accepts JSON: an API server (or proxy) that cannot send
// protobuf answers JSON, which is decoded whole and slimmed.
const listAccept = runtime.ContentTypeProtobuf + ", " + runtime.ContentTypeJSON

// listSlimPodPage fetches one page of pods, as the typed client's List would (same URL, same
// query, same errors: the pager's handling of an expired continue token still applies), but
// reads the body into the listing's reused buffer and decodes it into slim pods, which copy
// what they keep out of it.
func listSlimPodPage(ctx context.Context, rc *rest.RESTClient, d *podDecoder, buf *bytes.Buffer, namespace string, opts metav1.ListOptions) (*slimPodList, error) {
	for attempt := 1; ; attempt++ {
		err := fetchInto(ctx, rc, buf, namespace, opts)
		if err == nil {
			return d.decode(buf.Bytes())
		}
		// As the typed client's Do: a GET that met a reset or lost connection is tried again
		// (after a second), a few times.
		if attempt == pageAttempts || !(utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

const pageAttempts = 3

// fetchInto GETs one page into buf. An API error (Forbidden, Expired, ...) is the Status the
// typed client returns.
func fetchInto(ctx context.Context, rc *rest.RESTClient, buf *bytes.Buffer, namespace string, opts metav1.ListOptions) error {
	body, err := rc.Get().
		Namespace(namespace).
		Resource("pods").
		VersionedParams(&opts, scheme.ParameterCodec).
		SetHeader("Accept", listAccept).
		Stream(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	buf.Reset()
	_, err = buf.ReadFrom(body)
	return err
}

// decode decodes a pod list body: protobuf with the skipping decoder, anything else (JSON)
// whole with the client's scheme, then slimmed.
func (d *podDecoder) decode(body []byte) (*slimPodList, error) {
	if isProtobufBody(body) {
		return d.decodeProtobuf(body)
	}
	list := &corev1.PodList{}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, list); err != nil {
		return nil, fmt.Errorf("decoding a pod list: %w", err)
	}
	return slimList(list), nil
}

// slimList keeps a decoded PodList's slim pods.
func slimList(list *corev1.PodList) *slimPodList {
	out := &slimPodList{ListMeta: list.ListMeta, Items: make([]corev1.Pod, len(list.Items))}
	for i := range list.Items {
		out.Items[i] = *slimPod(&list.Items[i])
	}
	return out
}
