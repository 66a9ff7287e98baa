package reaper

import (
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// encodeAs encodes a list as the API server would in mediaType.
func encodeAs(t testing.TB, list runtime.Object, mediaType string) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	data, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), list)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// podListOf is one page of pods, the last (no continue token).
func podListOf(pods []*corev1.Pod) *corev1.PodList {
	list := &corev1.PodList{}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	return list
}

// listPodsFrom lists pods against an API server (httptest) with the clients Run uses.
func listPodsFrom(t *testing.T, h http.HandlerFunc, namespace, labels, fields string) ([]corev1.Pod, error) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := NewClients(&rest.Config{Host: srv.URL}, ClientLimits{}, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []corev1.Pod
	err = listPods(context.Background(), c.API, namespace, labels, fields, func(p *corev1.Pod) { got = append(got, *p) })
	return got, err
}

// TestListPodsPagesProtobufAndJSON: listPods pages with the pager, sends the selectors, the
// page size and the continue token, asks for protobuf first, and gets the same pods from a
// server that only speaks JSON, gzipped or not.
func TestListPodsPagesProtobufAndJSON(t *testing.T) {
	t.Parallel() // seconds of work or waiting, none of it timed: the others need not wait for it
	var pods []*corev1.Pod
	base := append(differentialPods(), realisticPod(0))
	for i := 0; i < 2*pageSize+3; i++ {
		p := base[i%len(base)].DeepCopy()
		p.Name = fmt.Sprintf("%s-%d", p.Name, i)
		pods = append(pods, p)
	}
	for _, mediaType := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		for _, gz := range []bool{false, true} { // gzip: as the API server sends a large response
			t.Run(fmt.Sprintf("%s gzip=%v", mediaType, gz), func(t *testing.T) {
				var mu sync.Mutex
				var accepts, queries []string
				got, err := listPodsFrom(t, func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path != "/api/v1/namespaces/ns/pods" {
						http.NotFound(w, r)
						return
					}
					mu.Lock()
					accepts, queries = append(accepts, r.Header.Get("Accept")), append(queries, r.URL.RawQuery)
					mu.Unlock()
					limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
					from, _ := strconv.Atoi(r.URL.Query().Get("continue"))
					to := min(from+limit, len(pods))
					page := podListOf(pods[from:to])
					if to < len(pods) {
						page.Continue = strconv.Itoa(to)
					}
					w.Header().Set("Content-Type", mediaType)
					if gz && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
						w.Header().Set("Content-Encoding", "gzip")
						zw := gzip.NewWriter(w)
						_, _ = zw.Write(encodeAs(t, page, mediaType))
						_ = zw.Close()
						return
					}
					_, _ = w.Write(encodeAs(t, page, mediaType))
				}, "ns", "app=a", "status.phase!=Succeeded")
				if err != nil {
					t.Fatal(err)
				}
				var want corev1.PodList // what the wire carries: times to the second
				if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(encodeAs(t, podListOf(pods), mediaType), nil, &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want.Items) {
					t.Errorf("got %d pods, not the %d sent", len(got), len(want.Items))
				}
				if len(queries) != 3 {
					t.Fatalf("%d requests, want 3 pages: %v", len(queries), queries)
				}
				for i, q := range queries {
					if !strings.Contains(q, "labelSelector=app%3Da") || !strings.Contains(q, "fieldSelector=status.phase%21%3DSucceeded") || !strings.Contains(q, "limit=500") {
						t.Errorf("request %d: query %q lacks the selectors or the page size", i, q)
					}
					if i > 0 && !strings.Contains(q, "continue="+strconv.Itoa(i*pageSize)) {
						t.Errorf("request %d: query %q lacks the continue token", i, q)
					}
					if !strings.HasPrefix(accepts[i], runtime.ContentTypeProtobuf) {
						t.Errorf("request %d: Accept %q, want protobuf first", i, accepts[i])
					}
				}
			})
		}
	}
}

// TestListPodsReportsAPIErrors: an API error (here 403) fails the listing with its status.
func TestListPodsReportsAPIErrors(t *testing.T) {
	_, err := listPodsFrom(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", runtime.ContentTypeJSON)
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods is forbidden: no list","reason":"Forbidden","code":403}`))
	}, "", "", "")
	if err == nil || !strings.Contains(err.Error(), "pods is forbidden: no list") {
		t.Fatalf("got %v, want the API's Forbidden", err)
	}
}

// TestListPodsRetriesALostConnection: a page whose connection is cut before the answer is
// fetched again (the typed client's retry of a GET).
func TestListPodsRetriesALostConnection(t *testing.T) {
	t.Parallel() // seconds of work or waiting, none of it timed: the others need not wait for it
	var mu sync.Mutex
	calls := 0
	body := encodeAs(t, podListOf(differentialPods()), runtime.ContentTypeProtobuf)
	got, err := listPodsFrom(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(body)
	}, "", "", "")
	if err != nil {
		t.Fatalf("listing after a lost connection: %v", err)
	}
	if len(got) != len(differentialPods()) || calls != 2 {
		t.Fatalf("visited %d pods in %d requests, want %d in 2", len(got), calls, len(differentialPods()))
	}
}
