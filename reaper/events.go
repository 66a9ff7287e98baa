package reaper

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/depwatch/depwatch/internal/event"
)

// eventFlushWait bounds how long the end of a run waits for its Events still queued: within
// a pod's termination grace period, and never a reason for a run to hang.
const eventFlushWait = 10 * time.Second

// events records the run's Events through client-go's event broadcaster, on a client (and so a
// rate limit) of their own: a delete never waits behind an Event, and a storm's Events never
// block the reaping. events is the broadcaster's sink too, and it does not retry: an Event that
// cannot be written (throttled, the API server busy) is counted and the first failure logged,
// once per run; retrying every ten seconds, as client-go's sink would, is load an incident does
// not need. A Forbidden is permanent: the service account may not create Events (pod-reaper's
// RBAC grants none), so none is sent again for the rest of the run, which for a scheduled
// reaper is the life of the process.
type events struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	client      kubernetes.Interface
	log         logrus.FieldLogger
	sent        atomic.Int64
	finished    atomic.Int64 // written or failed
	failed      atomic.Int64
	// forbidden: the API server refused an Event for want of a right; none is sent again.
	forbidden  atomic.Bool
	onceFailed sync.Once
}

// A nil client records none: the run may not write Events (the in-process executor under
// RBAC that grants none).
func newEvents(client kubernetes.Interface, log logrus.FieldLogger) *events {
	if client == nil {
		return &events{}
	}
	e := &events{broadcaster: record.NewBroadcaster(), client: client, log: log}
	e.recorder = e.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventComponent})
	e.broadcaster.StartRecordingToSink(e)
	return e
}

// record queues one Event on the pod; it never blocks.
func (e *events) record(pod *corev1.Pod, eventType, reason, message string) {
	if e.recorder == nil {
		return
	}
	e.sent.Add(1)
	e.recorder.Event(pod, eventType, reason, event.Truncate(message, event.MaxMessage))
}

// close waits until every queued Event was written or failed (at most eventFlushWait; an
// Event the broadcaster's spam filter drops is never written), stops the broadcaster and
// says how many could not be written.
func (e *events) close() {
	if e.broadcaster == nil {
		return
	}
	pending := func() int64 { return e.sent.Load() - e.finished.Load() }
	if wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, eventFlushWait, true,
		func(context.Context) (bool, error) { return pending() <= 0, nil }) != nil {
		e.log.WithField("events_pending", pending()).Warnf("Stopped waiting for %d Events after %s; they may be missing.", pending(), eventFlushWait)
		e.sent.Store(e.finished.Load())
	}
	e.broadcaster.Shutdown()
	n := e.failed.Load()
	if n == 0 {
		return
	}
	line := e.log.WithFields(logrus.Fields{"events_failed": n, "events": e.sent.Load()})
	if e.forbidden.Load() {
		// Said as a warning when it was found; a count now, not a second warning.
		line.Infof("%d of the run's %d Events were not written: the service account may not create Events (the pods were handled all the same).", n, e.sent.Load())
		return
	}
	line.Warnf("%d of the run's %d Events could not be written (the pods were handled all the same).", n, e.sent.Load())
}

func (e *events) Create(ev *corev1.Event) (*corev1.Event, error) {
	if e.forbidden.Load() { // not sent, only counted: the refusal was said when it came
		e.failed.Add(1)
		e.finished.Add(1)
		return ev, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	out, err := e.client.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	if apierrors.IsForbidden(err) {
		e.forbidden.Store(true)
	}
	return e.finish(ev, out, err)
}

// Update and Patch: the broadcaster merges repeats of one Event into a count; depwatch's
// Events are one per pod and round, so a repeat is written as a new Event rather than
// needing a right to patch.
func (e *events) Update(ev *corev1.Event) (*corev1.Event, error) { return e.Create(ev) }

func (e *events) Patch(ev *corev1.Event, _ []byte) (*corev1.Event, error) {
	fresh := ev.DeepCopy()
	fresh.ResourceVersion = ""
	return e.Create(fresh)
}

// finish never returns an error: client-go would retry, sleeping ten seconds between tries.
func (e *events) finish(ev, out *corev1.Event, err error) (*corev1.Event, error) {
	if err != nil {
		e.failed.Add(1)
		e.warnOnce(ev, err)
		out = ev
	}
	e.finished.Add(1)
	return out, nil
}

// warnOnce logs the run's first refusal by RBAC and its first other failure, each once; every
// later failure is only counted (close says how many).
func (e *events) warnOnce(ev *corev1.Event, err error) {
	o := ev.InvolvedObject
	fields := logrus.Fields{"namespace": o.Namespace, "pod": o.Name, "reason": ev.Reason, "error": err.Error()}
	switch {
	case apierrors.IsForbidden(err):
		// Once: the broadcaster hands its sink one Event at a time, and none is sent after this.
		e.log.WithFields(fields).Warnf("Could not record the %s Event on pod %s/%s: the service account may not create Events (%v). "+
			"No Event is sent again by this run; every pod is still handled and logged. Grant events create to get them.", ev.Reason, o.Namespace, o.Name, err)
	default:
		e.onceFailed.Do(func() {
			e.log.WithFields(fields).Warnf("Could not record the %s Event on pod %s/%s: %v (the pod was handled; later Event failures of this run are only counted, in the run's last lines).", ev.Reason, o.Namespace, o.Name, err)
		})
	}
}
