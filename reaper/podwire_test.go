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
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// wirePods are the fixtures of the decoder's tests: realistic control-plane pods, every state
// the rules tell apart, and the shapes a skipping decoder could get wrong.
// decodeSlimPodList decodes one body with a decoder of its own, as a listing's first page is.
func decodeSlimPodList(body []byte) (*slimPodList, error) { return newPodDecoder().decode(body) }

func wirePods() []*corev1.Pod {
	pods := []*corev1.Pod{realisticPod(0), realisticPod(1), realisticPod(2)}
	pods = append(pods, differentialPods()...)
	always, empty := corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicy("")
	del := metav1.NewTime(t0.Add(-time.Minute))
	grace := int64(30)
	sidecars := realisticPod(3)
	sidecars.Name = "with-init-and-sidecar"
	sidecars.Spec.InitContainers = []corev1.Container{
		{Name: "init", Image: "busybox", Command: []string{"sh", "-c", "true"}},
		{Name: "sidecar-proxy", Image: "envoy", RestartPolicy: &always, Env: []corev1.EnvVar{{Name: "X", Value: "y"}}},
		{Name: "empty-policy", RestartPolicy: &empty},
	}
	sidecars.Status.InitContainerStatuses = []corev1.ContainerStatus{
		{Name: "init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: 0, StartedAt: del, FinishedAt: del, Message: "done"}}},
		{Name: "sidecar-proxy", RestartCount: 7, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}},
	}
	terminatingPod := realisticPod(4)
	terminatingPod.Name = "terminating"
	terminatingPod.DeletionTimestamp = &del
	terminatingPod.DeletionGracePeriodSeconds = &grace
	terminatingPod.Finalizers = []string{"example.com/keep"}
	terminatingPod.Status.Reason, terminatingPod.Status.Message = "Terminating", "being deleted"
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "ns", UID: "bare-uid"}}
	emptyLists := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "empty-lists", Namespace: "ns", UID: "e", Labels: map[string]string{}, Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{}, ManagedFields: []metav1.ManagedFieldsEntry{}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{}, InitContainers: []corev1.Container{}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{}, ContainerStatuses: []corev1.ContainerStatus{}},
	}
	odd := realisticPod(5)
	odd.Name = "odd-values"
	odd.Labels[""] = "empty-key"
	odd.Labels["empty-value"] = ""
	odd.Annotations["big"] = strings.Repeat("x", 5000) // longer than any interned string
	odd.OwnerReferences = append(odd.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "n", UID: "n-uid"})
	odd.Status.ContainerStatuses[0].RestartCount = -1
	odd.Status.ContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, Signal: 9}}
	odd.Status.Conditions[0].LastProbeTime = del
	odd.Status.Conditions[0].Reason, odd.Status.Conditions[0].Message = "ContainersNotReady", "containers with unready status: [app]"
	odd.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	odd.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "debug", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: del}}}}
	return append(pods, sidecars, terminatingPod, bare, emptyLists, odd)
}

func podListOf(pods []*corev1.Pod) *corev1.PodList {
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page", RemainingItemCount: ptr.To(int64(7))}}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	return list
}

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

// fullDecode is what client-go's typed List returns for body.
func fullDecode(t testing.TB, body []byte) *corev1.PodList {
	t.Helper()
	list := &corev1.PodList{}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, list); err != nil {
		t.Fatalf("full decode: %v", err)
	}
	return list
}

// assertSlimOfFull checks that got holds exactly slimPod of each of full's pods, and its list
// metadata.
func assertSlimOfFull(t *testing.T, full *corev1.PodList, got *slimPodList) {
	t.Helper()
	if !reflect.DeepEqual(got.ListMeta, full.ListMeta) {
		t.Errorf("list metadata: got %+v, want %+v", got.ListMeta, full.ListMeta)
	}
	if len(got.Items) != len(full.Items) {
		t.Fatalf("got %d pods, want %d", len(got.Items), len(full.Items))
	}
	for i := range full.Items {
		want := slimPod(&full.Items[i])
		if !reflect.DeepEqual(&got.Items[i], want) {
			t.Errorf("pod %s: %s", full.Items[i].Name, firstDifference(&got.Items[i], want))
		}
	}
}

// firstDifference shows where got and want (equal when printed, or not) part.
func firstDifference(got, want *corev1.Pod) string {
	g, w := fmt.Sprintf("%#v", *got), fmt.Sprintf("%#v", *want)
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	from := max(0, i-200)
	return fmt.Sprintf("differs at byte %d:\n got  ...%s\n want ...%s", i, g[from:min(len(g), i+100)], w[from:min(len(w), i+100)])
}

// TestSlimDecodeEqualsSlimOfFullDecode: the skipping decoder's pod is exactly slimPod of the
// pod client-go's full decode of the same bytes gives, for every fixture (init containers and
// sidecars, deletionTimestamp, empty lists, bare pods, odd values).
func TestSlimDecodeEqualsSlimOfFullDecode(t *testing.T) {
	body := encodeAs(t, podListOf(wirePods()), runtime.ContentTypeProtobuf)
	got, err := decodeSlimPodList(body)
	if err != nil {
		t.Fatal(err)
	}
	assertSlimOfFull(t, fullDecode(t, body), got)

	// The realistic page of the benchmarks too.
	body = encodeAs(t, podPage(), runtime.ContentTypeProtobuf)
	if got, err = decodeSlimPodList(body); err != nil {
		t.Fatal(err)
	}
	assertSlimOfFull(t, fullDecode(t, body), got)

	// An empty list.
	body = encodeAs(t, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, runtime.ContentTypeProtobuf)
	if got, err = decodeSlimPodList(body); err != nil {
		t.Fatal(err)
	}
	assertSlimOfFull(t, fullDecode(t, body), got)
}

// TestSlimDecodeFallsBackToJSON: a server that answers JSON gets the same slim pods.
func TestSlimDecodeFallsBackToJSON(t *testing.T) {
	list := podListOf(wirePods())
	jsonBody := encodeAs(t, list, runtime.ContentTypeJSON)
	got, err := decodeSlimPodList(jsonBody)
	if err != nil {
		t.Fatal(err)
	}
	assertSlimOfFull(t, fullDecode(t, jsonBody), got)
	// And the decisions are those of the protobuf path.
	fromProto, err := decodeSlimPodList(encodeAs(t, list, runtime.ContentTypeProtobuf))
	if err != nil {
		t.Fatal(err)
	}
	assertSameDecisions(t, got, fromProto)
}

// unknownFields is a field of every wire type with numbers no pod message uses.
func unknownFields() []byte {
	var b []byte
	b = protowire.AppendTag(b, 9901, protowire.VarintType)
	b = protowire.AppendVarint(b, 12345)
	b = protowire.AppendTag(b, 9902, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("future field"))
	b = protowire.AppendTag(b, 9903, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 7)
	b = protowire.AppendTag(b, 9904, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 8)
	b = protowire.AppendTag(b, 9905, protowire.StartGroupType)
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 9905, protowire.EndGroupType)
	return b
}

// withUnknown returns msg with unknownFields added to the message at path (field numbers from
// msg down), in front of its fields and behind them, in every occurrence of a repeated field.
func withUnknown(t *testing.T, msg []byte, path ...protowire.Number) []byte {
	t.Helper()
	if len(path) == 0 {
		out := append([]byte{}, unknownFields()...)
		out = append(out, msg...)
		return append(out, unknownFields()...)
	}
	var out []byte
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			t.Fatal(protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			t.Fatal(protowire.ParseError(m))
		}
		if num == path[0] && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(msg[n:])
			out = protowire.AppendTag(out, num, typ)
			out = protowire.AppendBytes(out, withUnknown(t, v, path[1:]...))
		} else {
			out = append(out, msg[:n+m]...)
		}
		msg = msg[n+m:]
	}
	return out
}

// TestSlimDecodeSkipsUnknownFields: fields the decoder does not know (a newer API server's) are
// stepped over at every level, whatever their wire type, as the generated code does.
func TestSlimDecodeSkipsUnknownFields(t *testing.T) {
	var unk runtime.Unknown
	body := encodeAs(t, podListOf(wirePods()), runtime.ContentTypeProtobuf)
	if err := unk.Unmarshal(body[len(protobufMagic):]); err != nil {
		t.Fatal(err)
	}
	paths := [][]protowire.Number{
		{},              // PodList
		{1},             // ListMeta
		{2},             // Pod
		{2, 1},          // ObjectMeta
		{2, 1, 11},      // a label entry
		{2, 1, 12},      // an annotation entry
		{2, 1, 13},      // OwnerReference
		{2, 1, 8},       // creationTimestamp
		{2, 1, 17},      // managedFields (skipped anyway)
		{2, 2},          // PodSpec
		{2, 2, 2},       // Container
		{2, 2, 20},      // init Container
		{2, 3},          // PodStatus
		{2, 3, 2},       // PodCondition
		{2, 3, 8},       // ContainerStatus
		{2, 3, 8, 2},    // ContainerState
		{2, 3, 8, 2, 1}, // ContainerStateWaiting
		{2, 3, 10},      // init ContainerStatus
	}
	for _, path := range paths {
		u := unk
		u.Raw = withUnknown(t, unk.Raw, path...)
		data, err := u.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		changed := append(append([]byte{}, protobufMagic...), data...)
		got, err := decodeSlimPodList(changed)
		if err != nil {
			t.Fatalf("path %v: %v", path, err)
		}
		full := fullDecode(t, changed)
		assertSlimOfFull(t, full, got)
		// And the unknown fields changed nothing: the same pods as without them. (Except in a
		// creationTimestamp: a zero time is an empty message, which unknown fields make a
		// Timestamp of 0 s, 1970, for the generated decoder as for this one.)
		if !reflect.DeepEqual(path, []protowire.Number{2, 1, 8}) {
			assertSlimOfFull(t, fullDecode(t, body), got)
		}
	}
}

// TestSlimDecodeRejectsDamage: a cut or foreign body is an error, never a panic or a silently
// short page.
func TestSlimDecodeRejectsDamage(t *testing.T) {
	body := encodeAs(t, podListOf(wirePods()[:4]), runtime.ContentTypeProtobuf)
	for cut := len(protobufMagic) + 1; cut < len(body); cut += 7 {
		if _, err := decodeSlimPodList(body[:cut]); err == nil {
			// A cut that falls between two whole fields of the envelope can be a valid shorter
			// message; the full decoder must then agree on what it holds.
			if _, _, ferr := scheme.Codecs.UniversalDeserializer().Decode(body[:cut], nil, &corev1.PodList{}); ferr != nil {
				t.Errorf("cut at %d of %d: slim decode accepted what the full decode rejects (%v)", cut, len(body), ferr)
			}
		}
	}
	svc := encodeAs(t, &corev1.ServiceList{}, runtime.ContentTypeProtobuf)
	if _, err := decodeSlimPodList(svc); err == nil || !strings.Contains(err.Error(), "ServiceList") {
		t.Errorf("a ServiceList body: got %v, want an error naming it", err)
	}
}

// decisionEnvs are the settings of TestSlimPodKeepsEveryDecision.
var decisionEnvs = []map[string]string{
	{"CONTAINER_STATUSES": "CrashLoopBackOff"},
	{"CONTAINER_STATUSES": "Completed,OOMKilled,Error,"},
	{"POD_STATUSES": "Evicted"},
	{"POD_STATUS_PHASES": "Failed,Succeeded,Pending"},
	{"MAX_DURATION": "1h"},
	{"MAX_UNREADY": "10m"},
	{"CHAOS_CHANCE": "1", "REQUIRE_ANNOTATION_KEY": "x", "REQUIRE_ANNOTATION_VALUES": "y"},
	{"CHAOS_CHANCE": "1", "EXCLUDE_LABEL_KEY": "keep", "EXCLUDE_LABEL_VALUES": "true", "NODE_NAME": "n1"},
	{"CHAOS_CHANCE": "1", "EXCLUDE_LABEL_KEY": "role", "EXCLUDE_LABEL_VALUES": "apiserver", "NODE_NAME": "node-1"},
}

// assertSameDecisions: every rule, filter, the crash-loop test and the cooldown's owner give
// the same answer for a's and b's pods.
func assertSameDecisions(t *testing.T, a, b *slimPodList) {
	t.Helper()
	for _, env := range decisionEnvs {
		o := mustOptions(t, env)
		s := selector{filter: o.filter(), rules: o.Rules}
		for i := range a.Items {
			_, x := s.evaluate(&a.Items[i], t0)
			_, y := s.evaluate(&b.Items[i], t0)
			if x != y {
				t.Errorf("%v, pod %s: picked %v and %v", env, a.Items[i].Name, x, y)
			}
		}
	}
	for i := range a.Items {
		_, x := CrashLoopBackOff(&a.Items[i])
		_, y := CrashLoopBackOff(&b.Items[i])
		if x != y || ownerOf(&a.Items[i]) != ownerOf(&b.Items[i]) {
			t.Errorf("pod %s: crash loop %v/%v or owner differs", a.Items[i].Name, x, y)
		}
	}
}

// TestSlimDecodeKeepsEveryDecision: the decoded pods get every rule's, filter's and the crash
// loop test's answer the full pods (as the fixtures were written) get.
func TestSlimDecodeKeepsEveryDecision(t *testing.T) {
	pods := wirePods()
	got, err := decodeSlimPodList(encodeAs(t, podListOf(pods), runtime.ContentTypeProtobuf))
	if err != nil {
		t.Fatal(err)
	}
	assertSameDecisions(t, got, &slimPodList{Items: podListOf(pods).Items})
	picked := 0
	for _, env := range decisionEnvs {
		o := mustOptions(t, env)
		s := selector{filter: o.filter(), rules: o.Rules}
		for i, p := range pods {
			_, full := s.evaluate(p, t0)
			_, thin := s.evaluate(&got.Items[i], t0)
			if full != thin {
				t.Errorf("%v, pod %s: full pod picked %v, decoded pod %v", env, p.Name, full, thin)
			}
			if full {
				picked++
			}
		}
	}
	if picked == 0 {
		t.Fatal("no fixture was picked by any setting: the test proves nothing")
	}
}

// TestListPodsPagesRawProtobufAndJSON: listPods against an API server (httptest) pages with
// the pager through protobuf pages, sends the selectors, the page size and the continue token,
// asks for protobuf first, and gets the same slim pods from a server that only speaks JSON.
func TestListPodsPagesRawProtobufAndJSON(t *testing.T) {
	t.Parallel() // seconds of work or waiting, none of it timed: the others need not wait for it
	var pods []*corev1.Pod
	base := wirePods()
	for i := 0; i < 2*pageSize+3; i++ {
		p := base[i%len(base)].DeepCopy()
		p.Name = fmt.Sprintf("%s-%d", p.Name, i)
		pods = append(pods, p)
	}
	for _, tc := range []struct {
		mediaType string
		gzip      bool // as the API server does for a large response to a client that accepts it
	}{{runtime.ContentTypeProtobuf, false}, {runtime.ContentTypeProtobuf, true}, {runtime.ContentTypeJSON, false}, {runtime.ContentTypeJSON, true}} {
		mediaType := tc.mediaType
		t.Run(fmt.Sprintf("%s gzip=%v", mediaType, tc.gzip), func(t *testing.T) {
			var mu sync.Mutex
			var accepts, queries []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v1/namespaces/ns/pods" {
					http.NotFound(w, r)
					return
				}
				mu.Lock()
				accepts = append(accepts, r.Header.Get("Accept"))
				queries = append(queries, r.URL.RawQuery)
				mu.Unlock()
				q := r.URL.Query()
				limit, _ := strconv.Atoi(q.Get("limit"))
				from, _ := strconv.Atoi(q.Get("continue"))
				to := min(from+limit, len(pods))
				page := podListOf(pods[from:to])
				page.Continue, page.RemainingItemCount = "", nil
				if to < len(pods) {
					page.Continue = strconv.Itoa(to)
				}
				w.Header().Set("Content-Type", mediaType)
				if tc.gzip && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
					w.Header().Set("Content-Encoding", "gzip")
					zw := gzip.NewWriter(w)
					_, _ = zw.Write(encodeAs(t, page, mediaType))
					_ = zw.Close()
					return
				}
				_, _ = w.Write(encodeAs(t, page, mediaType))
			}))
			defer srv.Close()
			cfg := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeProtobuf, AcceptContentTypes: listAccept}}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var got []corev1.Pod
			err = listPods(context.Background(), client, "ns", "app=a", "status.phase!=Succeeded", func(p *corev1.Pod) { got = append(got, *p) })
			if err != nil {
				t.Fatal(err)
			}
			full := fullDecode(t, encodeAs(t, podListOf(pods), mediaType))
			assertSlimOfFull(t, full, &slimPodList{ListMeta: full.ListMeta, Items: got})
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

// TestListPodsReportsAPIErrors: an API error (here 403) fails the listing with its status.
func TestListPodsReportsAPIErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", runtime.ContentTypeJSON)
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods is forbidden: no list","reason":"Forbidden","code":403}`))
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	err = listPods(context.Background(), client, "", "", "", func(*corev1.Pod) { t.Error("visited a pod") })
	if err == nil || !strings.Contains(err.Error(), "pods is forbidden: no list") {
		t.Fatalf("got %v, want the API's Forbidden", err)
	}
}

// TestListPodsRetriesALostConnection: a page whose connection is cut before the answer is
// fetched again, as the typed client's Do would.
func TestListPodsRetriesALostConnection(t *testing.T) {
	t.Parallel() // seconds of work or waiting, none of it timed: the others need not wait for it
	var mu sync.Mutex
	calls := 0
	page := podListOf(wirePods())
	page.Continue, page.RemainingItemCount = "", nil // one page
	body := encodeAs(t, page, runtime.ContentTypeProtobuf)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := listPods(context.Background(), client, "", "", "", func(*corev1.Pod) { n++ }); err != nil {
		t.Fatalf("listing after a lost connection: %v", err)
	}
	if n != len(wirePods()) || calls != 2 {
		t.Fatalf("visited %d pods in %d requests, want %d in 2", n, calls, len(wirePods()))
	}
}
