package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/depwatch/depwatch/coordinator"
	"github.com/depwatch/depwatch/probe"
	"github.com/depwatch/depwatch/reaper"
)

// The process keeps to one budget of API requests, --kube-api-qps and --kube-api-burst: the
// controller's clients and every run it carries out in its process (the weeder's reap engine,
// the probe engine, built as the in-process executor builds them) take their requests from
// one rate limiter, whatever limits a run's Job would name; Events have one budget of their
// own, shared the same way; the Lease's client has its own. With a burst of 3 and a rate far
// below what the test's minute could refill, whoever asks fourth is refused by the limiter
// before a request is sent, whichever client it is.
func TestTheControllerAndEveryInProcessRunShareOneAPIBudget(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		kind := "PodList"
		if strings.HasSuffix(r.URL.Path, "/events") {
			kind = "EventList"
		}
		_, _ = w.Write([]byte(`{"kind":"` + kind + `","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	t.Cleanup(srv.Close)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	mustCoord(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	opts := coordinator.Options{Kubeconfig: kc, KubeAPIQPS: 0.001, KubeAPIBurst: 3, EventsQPS: 0.001, EventsBurst: 1}
	clients, err := coordinatorClients(opts)
	if err != nil {
		t.Fatal(err)
	}
	weederRun, err := reaper.ClientsFor(clients.rest, clients.eventsRest, false)
	if err != nil {
		t.Fatal(err)
	}
	probeRun, err := probe.NewDepsWith(clients.rest, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	for _, step := range []struct {
		who     string
		request func() error
		refused bool
	}{
		{"the controller's client", func() error { _, err := clients.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }, false},
		{"the controller's dynamic client", func() error { _, err := clients.dynamic.Resource(pods).List(ctx, metav1.ListOptions{}); return err }, false},
		{"an in-process weeder run", func() error { _, err := weederRun.API.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }, false},
		{"an in-process probe run, fourth in the burst of 3", func() error { _, err := probeRun.Seed.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }, true},
		{"the controller's client again", func() error { _, err := clients.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }, true},
		{"the controller's Events, their own budget", func() error { _, err := clients.events.CoreV1().Events("").List(ctx, metav1.ListOptions{}); return err }, false},
		{"the weeder run's Events, second in the Events' burst of 1", func() error {
			_, err := weederRun.Events.CoreV1().Events("").List(ctx, metav1.ListOptions{})
			return err
		}, true},
		{"the Lease's client, a budget of its own", func() error { _, err := clients.leases.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err }, false},
	} {
		before := served.Load()
		err := step.request()
		sent := served.Load() - before
		switch {
		case step.refused && (err == nil || !strings.Contains(err.Error(), "rate")):
			t.Errorf("%s: %v (sent %d); want the request refused by the shared rate limiter", step.who, err, sent)
		case step.refused && sent != 0:
			t.Errorf("%s: %d requests reached the server beyond the budget", step.who, sent)
		case !step.refused && (err != nil || sent != 1):
			t.Errorf("%s: %v (sent %d); want its request served", step.who, err, sent)
		}
	}
	if l := clients.kube.CoreV1().RESTClient().GetRateLimiter(); l != clients.rest.RateLimiter || l != clients.kube.AppsV1().RESTClient().GetRateLimiter() {
		t.Errorf("the controller's typed clients do not hold the process's rate limiter")
	}
}
