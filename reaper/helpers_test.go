package reaper

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Run is RunWith with one client for the API and the Events.
func Run(ctx context.Context, client kubernetes.Interface, opts Options, log logrus.FieldLogger) (Summary, error) {
	return RunWith(ctx, Clients{API: client, Events: client}, opts, log)
}

// t0 is the fixed "now" of the tests.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// envOf turns a map into a lookup function, as os.LookupEnv would be.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// mustOptions loads options from env and fails the test on error; now is pinned to t0 and the
// random order is the identity so results are deterministic.
func mustOptions(t testing.TB, m map[string]string) Options {
	t.Helper()
	o, err := LoadOptions(envOf(m))
	if err != nil {
		t.Fatalf("LoadOptions(%v): %v", m, err)
	}
	o.now = func() time.Time { return t0 }
	o.shuffle = func(int, func(i, j int)) {}
	return o
}

// quietLogger records entries for assertions and prints nothing.
func quietLogger() (*logrus.Logger, *logtest.Hook) {
	l, hook := logtest.NewNullLogger()
	l.SetOutput(io.Discard)
	l.SetLevel(logrus.DebugLevel)
	return l, hook
}

type podOpt func(*corev1.Pod)

func newPod(ns, name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: map[string]string{}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withLabel(k, v string) podOpt { return func(p *corev1.Pod) { p.Labels[k] = v } }

func withAnnotation(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func withUID(uid string) podOpt { return func(p *corev1.Pod) { p.UID = types.UID(uid) } }

func startedAgo(d time.Duration) podOpt {
	return func(p *corev1.Pod) { s := metav1.NewTime(t0.Add(-d)); p.Status.StartTime = &s }
}

func waiting(container, reason string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: container, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}},
		})
	}
}

func crashLooping(p *corev1.Pod) { waiting("app", "CrashLoopBackOff")(p) }

func initWaiting(container, reason string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: container, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}},
		})
	}
}

func terminated(container, reason string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: container, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason}},
		})
	}
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

func unreadyFor(d time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0.Add(-d)),
		})
	}
}

func terminating(p *corev1.Pod) { n := metav1.NewTime(t0); p.DeletionTimestamp = &n }
