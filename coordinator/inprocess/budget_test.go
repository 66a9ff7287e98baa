package inprocess

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/depwatch/depwatch/internal/apilimit"
)

// A run in the process spends the process's budget (Options.Config's shared rate limiter),
// not the limits its Job names for a pod of its own: once the controller has spent the burst,
// the run's requests are refused by the limiter and none reaches the API server, although
// its Job asks for a thousand a second.
func TestAnInProcessRunSpendsTheProcessBudgetNotItsJobsOwn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		spent     bool // the controller has spent the burst before the run starts
		wantSent  bool
		wantExit0 bool
	}{
		{name: "budget left: the run's requests are sent", wantSent: true, wantExit0: true},
		{name: "budget spent by the controller: the run must wait for the process's next token, none is sent", spent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var served atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				served.Add(1)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`))
			}))
			defer srv.Close()
			process := apilimit.Limit{QPS: 0.001, Burst: 1}.Shared(&rest.Config{Host: srv.URL})
			if tc.spent {
				controller, err := kubernetes.NewForConfig(process)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := controller.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			before := served.Load()
			quiet := logrus.New()
			quiet.SetOutput(io.Discard)
			e := New(Options{Config: process, NoEvents: true, Log: quiet})
			job := &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "weeder", Args: []string{"reap"}, Env: []corev1.EnvVar{
					{Name: "POD_STATUSES", Value: "Evicted"}, {Name: "REAP_AT_START", Value: "true"}, {Name: "RUN_DURATION", Value: "1s"},
					{Name: "KUBE_API_QPS", Value: "1000"}, {Name: "KUBE_API_BURST", Value: "1000"}, // a pod's own limits
				},
			}}}}}}
			// The deadline is far shorter than the limiter's next token (1000 s): a request that
			// must wait for it is refused at once, whatever the machine's speed.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, msg := e.opts.Engine(ctx, job, quiet)
			sent := served.Load() - before
			if (sent > 0) != tc.wantSent || (code == 0) != tc.wantExit0 {
				t.Errorf("the run sent %d requests and exited %d (%q); want requests sent %v, exit 0 %v", sent, code, msg, tc.wantSent, tc.wantExit0)
			}
		})
	}
}
