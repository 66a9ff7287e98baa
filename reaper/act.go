package reaper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/internal/admission"
)

// apiTimeout bounds one delete/evict/Event call. These calls run without the run's
// cancellation (a SIGTERM must not abandon the pod in hand half-way), so they need a bound of
// their own that fits in a pod's termination grace period.
const apiTimeout = 10 * time.Second

// eventComponent is the Event source, so `kubectl get events` shows who killed the pod.
const eventComponent = "depwatch-reaper"

// Event reasons.
const (
	ReasonReaped      = "Reaped"
	ReasonReapSkipped = "ReapSkipped"
	// ReasonReapRefused: an admission policy refused the delete or eviction (depwatch's own
	// manifests/admission/weeder-deletes.yaml, or a cluster's). For a weeder that is a bug to
	// see at once: the policy and the reaper disagree on what a crash-looping pod is.
	ReasonReapRefused = "ReapRefused"
)

// pod-reaper's log messages, which dashboards and alerts match on: the message text is
// pod-reaper's, the fields are depwatch's (pod-reaper's pod and reasons, plus namespace, uid,
// action, and "detail", the sentence a person reads).
const (
	MsgReaping       = "reaping pod"
	MsgDryRun        = "pod would be reaped but pod-reaper is in dry-run mode"
	MsgMaxPods       = "pod would be reaped but maxPods is exceeded"
	MsgUnableToReap  = "unable to delete pod"
	msgCycleStarting = "starting reap cycle"
)

// reap acts on one matched pod - dry run, delete or evict - records an Event, logs exactly one
// line and counts what came of it; true when the pod was reaped (or, in a dry run, would have
// been). It never returns early on a cancelled run: the pod in hand is finished.
func (r *runner) reap(m match, s saving) bool {
	pod := m.pod
	verb, action, done := "delete", ActionDeleted, "Deleted"
	if r.opts.Evict {
		verb, action, done = "evict", ActionEvicted, "Evicted"
	}
	why := strings.Join(m.reasons, "; and ")
	line := r.log.WithFields(logrus.Fields{
		"namespace": pod.Namespace,
		"pod":       pod.Name,
		"uid":       string(pod.UID),
		"reasons":   m.reasons,
	})

	if r.opts.DryRun {
		line.WithFields(logrus.Fields{"action": ActionDryRun, "detail": fmt.Sprintf("Dry run: would %s pod %s/%s because %s; nothing was changed.", verb, pod.Namespace, pod.Name, why)}).
			Info(MsgDryRun)
		return true
	}

	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), apiTimeout)
	defer cancel()
	err := r.removePod(ctx, pod)
	switch {
	case err == nil:
		msg := fmt.Sprintf("%s pod %s/%s because %s.", done, pod.Namespace, pod.Name, why) + s.savedNote()
		if s.known {
			line = line.WithField("backoff_saved_seconds", s.saved.Seconds())
		}
		line.WithFields(logrus.Fields{"action": action, "detail": msg}).Info(MsgReaping)
		r.events.record(pod, corev1.EventTypeNormal, ReasonReaped, msg)
		r.sum.countRestart(r.opts.StartWhenReady, s)
		return true
	case r.opts.Evict && apierrors.IsTooManyRequests(err):
		msg := fmt.Sprintf("Skipped pod %s/%s: the eviction was refused (%v), most likely because a PodDisruptionBudget allows no disruption now; it will be tried again later. It matched because %s.",
			pod.Namespace, pod.Name, apiMessage(err), why)
		line.WithFields(logrus.Fields{"action": ActionSkipped, "detail": msg, "error": err.Error()}).Warn(MsgUnableToReap)
		r.events.record(pod, corev1.EventTypeWarning, ReasonReapSkipped, msg)
		r.sum.Skipped++ // not remembered: a PodDisruptionBudget may allow it later
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// NotFound: deleted meanwhile. Conflict: the UID precondition failed, so the pod we
		// judged is gone and a namesake (e.g. a StatefulSet's replacement) must not pay for it.
		line.WithFields(logrus.Fields{"action": ActionGone, "error": err.Error(),
			"detail": fmt.Sprintf("Pod %s/%s was already gone before it could be %s; nothing to do.", pod.Namespace, pod.Name, action)}).Warn(MsgUnableToReap)
		r.sum.Gone++
		r.done[pod.UID] = r.cycle
	case admission.Refused(err):
		denial, _ := admission.Message(err)
		msg := fmt.Sprintf("Could not %s pod %s/%s: an admission policy refused it (%s). It matched because %s; it will be tried again later. "+
			"If this is depwatch's own policy, the policy and the reaper disagree on what may be reaped: report it.", verb, pod.Namespace, pod.Name, denial, why)
		line.WithFields(logrus.Fields{"action": ActionRefused, "reason": "admission-refused", "policy": admission.Policy(err),
			"detail": msg, "error": err.Error()}).Error(MsgUnableToReap)
		r.events.record(pod, corev1.EventTypeWarning, ReasonReapRefused, msg)
		r.sum.Errors++ // not remembered, as below, and counted apart: the coordinator exports it
		r.sum.AdmissionRefused++
	default:
		line.WithFields(logrus.Fields{"action": ActionFailed, "error": err.Error(),
			"detail": fmt.Sprintf("Could not %s pod %s/%s (it matched because %s): %v; it will be tried again later.", verb, pod.Namespace, pod.Name, why, err)}).
			Warn(MsgUnableToReap)
		r.sum.Errors++ // not remembered: tried again on the next cycle or update
	}
	return false
}

// removePod deletes or evicts the pod with a UID precondition, so a pod re-created under the
// same name since it was judged is never hit.
func (r *runner) removePod(ctx context.Context, pod *corev1.Pod) error {
	opts := metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID)), GracePeriodSeconds: r.opts.GracePeriod}
	pods := r.client.CoreV1().Pods(pod.Namespace)
	if r.opts.Evict {
		// policy/v1: policy/v1beta1 Eviction (pod-reaper's) was removed in Kubernetes 1.25.
		return pods.EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			DeleteOptions: &opts,
		})
	}
	return pods.Delete(ctx, pod.Name, opts)
}

// apiMessage is the server's own explanation (e.g. "Cannot evict pod as it would violate the
// pod's disruption budget."), which says more to a person than the error's type.
func apiMessage(err error) string {
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Message != "" {
		return s.Status().Message
	}
	return err.Error()
}

// deferPod leaves a matched pod alone because its owner's pods were reaped less than
// REAP_COOLDOWN ago and the pod was created since: it is most likely the replacement of a pod
// reaped then, crash-looping again. It is counted once and logged once per owner and round
// (a cycle and every watch event would otherwise repeat the line); it is not remembered as
// acted on, so a cycle or watch event after the cooldown reaps it if it still matches.
func (r *runner) deferPod(m match, o owner, now time.Time) {
	pod := m.pod
	firstForPod, firstForOwner := r.cool.deferred(o.uid, pod.UID)
	if firstForPod {
		r.sum.Deferred++
	}
	if !firstForOwner {
		return
	}
	until := r.cool.until(o.uid)
	ago := r.opts.ReapCooldown - until.Sub(now)
	r.log.WithFields(logrus.Fields{
		"namespace": pod.Namespace,
		"pod":       pod.Name,
		"uid":       string(pod.UID),
		"owner":     o.desc,
		"action":    ActionDeferred,
		"reason":    "reap-cooldown",
		"reasons":   m.reasons,
		"cooldown":  r.opts.ReapCooldown.String(),
		"until":     until.UTC().Format(time.RFC3339),
	}).Warnf("Not restarting pod %s/%s yet: pods of %s were already restarted %s ago and this one, created since, crash-loops again "+
		"(it matched because %s). Its owner's new pods are left to the kubelet's own back-off until REAP_COOLDOWN %s has passed (at %s). "+
		"A workload that keeps crash-looping after a restart is usually broken for another reason: check its logs (kubectl logs --previous).",
		pod.Namespace, pod.Name, o.desc, ago.Round(time.Second), strings.Join(m.reasons, "; and "), r.opts.ReapCooldown, until.UTC().Format(time.RFC3339))
}
