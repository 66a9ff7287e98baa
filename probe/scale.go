package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/depwatch/depwatch/internal/admission"
	"github.com/depwatch/depwatch/internal/event"
)

// The annotations dependency-watchdog and Gardener rely on.
const (
	// AnnotationReplicas holds the replicas a resource had before it was scaled down.
	AnnotationReplicas = "dependency-watchdog.gardener.cloud/replicas"
	// AnnotationMeltdownProtection tells Gardener's reconciliation not to scale the resource up.
	AnnotationMeltdownProtection = "dependency-watchdog.gardener.cloud/meltdown-protection-active"
	// AnnotationIgnoreScaling=true makes the probe leave a resource alone.
	AnnotationIgnoreScaling = "dependency-watchdog.gardener.cloud/ignore-scaling"
)

// Event reasons and source.
const (
	EventComponent       = "depwatch-probe"
	ReasonScaledDown     = "ScaledDown"
	ReasonScaledUp       = "ScaledUp"
	ReasonScaleDownError = "ScaleDownFailed"
	ReasonScaleUpError   = "ScaleUpFailed"
	// ReasonScaleRefused: an admission policy refused the probe's own write, a bug to see at
	// once (the policy and the probe disagree on what may be scaled).
	ReasonScaleRefused = "ScaleRefused"
)

// eventTimeout bounds one Event write; it runs without the run's cancellation.
const eventTimeout = 10 * time.Second

// Outcome is what happened to one dependent resource in one probe.
type Outcome string

const (
	OutcomeScaledDown         Outcome = "scaled-down"         // annotated, set to 0, no replica ready
	OutcomeScaledUp           Outcome = "scaled-up"           // set to the stored replicas, one ready, annotations removed
	OutcomeAnnotationsRemoved Outcome = "annotations-removed" // an earlier scale-up is completed: ready, annotations removed
	OutcomeWouldScaleDown     Outcome = "would-scale-down"    // dry run
	OutcomeWouldScaleUp       Outcome = "would-scale-up"      // dry run
	OutcomeAlreadyDown        Outcome = "already-down"        // replicas were 0: untouched, stored replicas kept
	OutcomeAlreadyUp          Outcome = "already-up"          // replicas > 0 and no annotation: untouched
	OutcomeIgnored            Outcome = "ignored"             // ignore-scaling=true
	OutcomeOptionalMissing    Outcome = "optional-missing"    // optional and not there: skipped
	OutcomeMissing            Outcome = "missing"             // required and not there: a failure
	OutcomeFailed             Outcome = "failed"              // an API error or a timeout
	OutcomeAdmissionRefused   Outcome = "admission-refused"   // an admission policy refused a write
	OutcomeNotStarted         Outcome = "not-started"         // the run was stopped before it
	OutcomeInterrupted        Outcome = "interrupted"         // the run was stopped while waiting for readiness
	OutcomeBlocked            Outcome = "blocked"             // not started: a resource of an earlier level failed
)

// failure reports whether the outcome makes the run exit non-zero.
func (o Outcome) failure() bool {
	return o == OutcomeFailed || o == OutcomeMissing || o == OutcomeAdmissionRefused
}

// scaler performs one direction of scaling for the resources of one probe.
type scaler struct {
	deps      Deps
	namespace string
	dryRun    bool
	direction Action // ActionScaleDown or ActionScaleUp
	why       string // the decision's reason
	log       logrus.FieldLogger
}

func (s *scaler) info(r DependentResource) ScaleInfo {
	if s.direction == ActionScaleDown {
		return r.ScaleDown
	}
	return r.ScaleUp
}

// target is one resolved dependent resource.
type target struct {
	res     DependentResource
	mapping *meta.RESTMapping
	log     logrus.FieldLogger
}

func (t *target) gr() schema.GroupResource { return t.mapping.Resource.GroupResource() }

// one scales one resource: its initial delay first, then everything within its timeout. The
// changes, once begun, are finished even when ctx is cancelled (the timeout still bounds them);
// only the wait for readiness is abandoned on cancellation.
func (s *scaler) one(ctx context.Context, r DependentResource) Outcome {
	info := s.info(r)
	t := &target{res: r}
	t.log = s.log.WithFields(logrus.Fields{
		"namespace": s.namespace, "kind": r.Ref.Kind, "name": r.Ref.Name, "api_version": r.Ref.APIVersion,
		"scale_level": info.Level, "decision": string(s.direction), "dry_run": s.dryRun,
	})
	if info.InitialDelay > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(info.InitialDelay):
		}
	}
	if ctx.Err() != nil {
		t.at(OutcomeNotStarted, "the run is stopping").Infof("Not scaling %s: the run is stopping.", r.Ref)
		return OutcomeNotStarted
	}

	deadline := time.Now().Add(info.Timeout)
	opCtx, cancelOp := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancelOp()
	waitCtx, cancelWait := context.WithDeadline(ctx, deadline)
	defer cancelWait()

	gvk := r.Ref.GroupVersionKind()
	mapping, err := s.deps.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return s.missing(t, fmt.Sprintf("the API server does not serve kind %s in %s", r.Ref.Kind, r.Ref.APIVersion))
		}
		return s.fail(t, nil, fmt.Errorf("resolving kind %s in %s: %w", r.Ref.Kind, r.Ref.APIVersion, err))
	}
	t.mapping = mapping

	obj, err := s.deps.Dynamic.Resource(mapping.Resource).Namespace(s.namespace).Get(opCtx, r.Ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return s.missing(t, fmt.Sprintf("%s %s/%s does not exist", r.Ref.Kind, s.namespace, r.Ref.Name))
	case err != nil:
		return s.fail(t, nil, fmt.Errorf("reading %s: %w", r.Ref, err))
	}
	if v, ok := obj.GetAnnotations()[AnnotationIgnoreScaling]; ok {
		if b, perr := strconv.ParseBool(strings.TrimSpace(v)); perr == nil && b {
			return s.ignored(opCtx, t, obj, AnnotationIgnoreScaling+"="+v)
		}
	}
	if s.direction == ActionScaleDown {
		return s.down(opCtx, waitCtx, ctx, t, obj)
	}
	return s.up(opCtx, waitCtx, ctx, t, obj)
}

// ignored leaves a resource annotated ignore-scaling=true alone, except for a leftover
// meltdown-protection-active annotation: an operator now manages the resource, and the
// marker would keep Gardener's reconciliation from scaling it up. The stored replicas stay.
func (s *scaler) ignored(ctx context.Context, t *target, obj *unstructured.Unstructured, reason string) Outcome {
	if _, stale := obj.GetAnnotations()[AnnotationMeltdownProtection]; !stale {
		t.at(OutcomeIgnored, reason).Infof("Leaving %s alone: it is annotated %s.", t.res.Ref, reason)
		return OutcomeIgnored
	}
	if s.dryRun {
		t.at(OutcomeIgnored, reason).Infof("Dry run: leaving %s alone (annotated %s); would remove its leftover %s annotation; nothing was changed.", t.res.Ref, reason, AnnotationMeltdownProtection)
		return OutcomeIgnored
	}
	if err := s.removeAnnotations(ctx, t, AnnotationMeltdownProtection); err != nil {
		return s.fail(t, obj, fmt.Errorf("removing the leftover %s annotation from %s (annotated %s): %w", AnnotationMeltdownProtection, t.res.Ref, reason, err))
	}
	t.at(OutcomeIgnored, reason).Infof("Leaving %s alone: it is annotated %s; removed its leftover %s annotation, since it is managed by hand now.", t.res.Ref, reason, AnnotationMeltdownProtection)
	return OutcomeIgnored
}

// down: store the replicas (and the meltdown-protection marker) in one patch, then set
// replicas to 0, then wait until no replica is ready. The annotation always lands before the
// replicas change, so a probe killed in between never loses the count; a resource already at
// 0 is left as it is and its stored replicas are kept.
func (s *scaler) down(opCtx, waitCtx, runCtx context.Context, t *target, obj *unstructured.Unstructured) Outcome {
	previous, already, obj, err := s.storeAndZero(opCtx, t, obj)
	switch {
	case err != nil:
		return s.scaleFailed(t, obj, err)
	case already:
		// An earlier probe may have set the replicas to 0 and stopped before its pods were
		// gone (its Job's run ended): the next level waits for that as it would have then.
		if ready, err := s.waitReady(waitCtx, t, func(n int64) bool { return n == 0 }); err != nil {
			return s.waitFailed(runCtx, t, obj, fmt.Sprintf("0 replicas wanted, %d still ready", ready), err)
		}
		t.at(OutcomeAlreadyDown, "replicas are 0 already").WithFields(logrus.Fields{"replicas": 0}).
			Infof("%s has 0 replicas already and none ready: left as it is (its stored replicas are kept).", t.res.Ref)
		return OutcomeAlreadyDown
	case s.dryRun:
		t.at(OutcomeWouldScaleDown, s.why).WithFields(logrus.Fields{"replicas": 0, "previous_replicas": previous}).
			Infof("Dry run: would store %d replicas in %s and scale %s down to 0 because %s; nothing was changed.", previous, AnnotationReplicas, t.res.Ref, s.why)
		return OutcomeWouldScaleDown
	}
	msg := fmt.Sprintf("Scaled %s down from %d to 0 replicas (stored in %s) because %s.", t.res.Ref, previous, AnnotationReplicas, s.why)
	t.at(OutcomeScaledDown, s.why).WithFields(logrus.Fields{"replicas": 0, "previous_replicas": previous}).Info(msg)
	s.event(obj, corev1.EventTypeNormal, ReasonScaledDown, msg)

	ready, err := s.waitReady(waitCtx, t, func(n int64) bool { return n == 0 })
	if err != nil {
		return s.waitFailed(runCtx, t, obj, fmt.Sprintf("%d replicas still ready", ready), err)
	}
	t.at("ready", "no replica ready").WithFields(logrus.Fields{"replicas": 0}).Infof("%s has no ready replica any more.", t.res.Ref)
	return OutcomeScaledDown
}

// storeAndZero stores the resource's replicas in its annotations and sets them to 0, retried
// on conflict; already: they were 0 (nothing is written). In a dry run nothing is written
// either. It returns the object as last patched.
func (s *scaler) storeAndZero(ctx context.Context, t *target, obj *unstructured.Unstructured) (int32, bool, *unstructured.Unstructured, error) {
	var previous int32
	var already bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := s.deps.Scales.Scales(s.namespace).Get(ctx, t.gr(), t.res.Ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		previous = sc.Spec.Replicas
		if previous == 0 {
			already = true
			return nil
		}
		if s.dryRun {
			return nil
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": sc.ResourceVersion, // the count stored is the count we set to 0
			"annotations": map[string]any{
				AnnotationReplicas:           strconv.Itoa(int(previous)),
				AnnotationMeltdownProtection: "",
			},
		}})
		if err != nil {
			return err
		}
		patched, err := s.patch(ctx, t, patch)
		if err != nil {
			return fmt.Errorf("annotating %s with its replicas: %w", t.res.Ref, err)
		}
		obj = patched
		if err := s.setReplicas(ctx, t, 0, patched.GetResourceVersion()); err != nil {
			return fmt.Errorf("setting the replicas of %s to 0: %w", t.res.Ref, err)
		}
		return nil
	})
	return previous, already, obj, err
}

// up: only where replicas are 0. The target is the stored replicas (an integer > 0) or 1; once
// a replica is ready, both annotations are removed. A resource with replicas > 0 that still
// carries the annotations (an earlier probe stopped after scaling up) gets the same ending.
func (s *scaler) up(opCtx, waitCtx, runCtx context.Context, t *target, obj *unstructured.Unstructured) Outcome {
	current, want, why, err := s.restoreReplicas(opCtx, t, obj)
	annotated := hasAnnotations(obj)
	switch {
	case err != nil:
		return s.scaleFailed(t, obj, err)
	case current > 0 && !annotated:
		t.at(OutcomeAlreadyUp, "replicas > 0").WithFields(logrus.Fields{"replicas": current}).
			Debugf("%s has %d replicas: nothing to scale up.", t.res.Ref, current)
		return OutcomeAlreadyUp
	case current > 0 && s.dryRun:
		t.at(OutcomeWouldScaleUp, "replicas > 0 but the scale-down annotations are still there").WithFields(logrus.Fields{"replicas": current}).
			Infof("Dry run: %s has %d replicas but still carries the scale-down annotations: would remove them once a replica is ready; nothing was changed.", t.res.Ref, current)
		return OutcomeWouldScaleUp
	case current > 0:
		t.at("resume", "replicas > 0 but the scale-down annotations are still there").WithFields(logrus.Fields{"replicas": current}).
			Infof("%s has %d replicas but still carries the scale-down annotations (an earlier scale-up did not finish): removing them once a replica is ready.", t.res.Ref, current)
	case s.dryRun:
		t.at(OutcomeWouldScaleUp, why).WithFields(logrus.Fields{"replicas": want, "previous_replicas": 0}).
			Infof("Dry run: would scale %s up from 0 to %d replicas (%s) because %s; nothing was changed.", t.res.Ref, want, why, s.why)
		return OutcomeWouldScaleUp
	default:
		msg := fmt.Sprintf("Scaled %s up from 0 to %d replicas (%s) because %s.", t.res.Ref, want, why, s.why)
		t.at(OutcomeScaledUp, why).WithFields(logrus.Fields{"replicas": want, "previous_replicas": 0}).Info(msg)
		s.event(obj, corev1.EventTypeNormal, ReasonScaledUp, msg)
	}

	ready, err := s.waitReady(waitCtx, t, func(n int64) bool { return n >= 1 })
	if err != nil {
		return s.waitFailed(runCtx, t, obj, fmt.Sprintf("%d replicas ready; the annotations stay until one is", ready), err)
	}
	if annotated {
		if err := s.removeAnnotations(opCtx, t, AnnotationReplicas, AnnotationMeltdownProtection); err != nil {
			return s.fail(t, obj, fmt.Errorf("removing the scale-down annotations from %s: %w", t.res.Ref, err))
		}
	}
	t.at("ready", "a replica is ready").WithFields(logrus.Fields{"replicas": ready}).
		Infof("%s has %d ready replicas; the scale-down annotations are removed.", t.res.Ref, ready)
	if current > 0 {
		return OutcomeAnnotationsRemoved
	}
	return OutcomeScaledUp
}

// restoreReplicas sets replicas that are 0 to the stored count (or 1), want, retried on
// conflict; current is what they were. Replicas above 0, or a dry run, write nothing.
func (s *scaler) restoreReplicas(ctx context.Context, t *target, obj *unstructured.Unstructured) (current, want int32, why string, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := s.deps.Scales.Scales(s.namespace).Get(ctx, t.gr(), t.res.Ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if current = sc.Spec.Replicas; current > 0 {
			return nil
		}
		if want, why, err = targetReplicas(obj.GetAnnotations()); err != nil || s.dryRun {
			return err
		}
		if err := s.setReplicas(ctx, t, want, sc.ResourceVersion); err != nil {
			return fmt.Errorf("setting the replicas of %s to %d: %w", t.res.Ref, want, err)
		}
		return nil
	})
	return current, want, why, err
}

// setReplicas merge-patches spec.replicas, with the resourceVersion the decision was based on
// as a precondition: a conflict re-reads and retries. A Deployment or StatefulSet is patched
// itself (RBAC: patch on the resource), so an admission policy sees the whole object, its
// replicas annotation included, and not a bare Scale; other kinds (a custom resource whose
// replicas may be anywhere) through their scale subresource (patch on <resource>/scale).
func (s *scaler) setReplicas(ctx context.Context, t *target, replicas int32, resourceVersion string) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"spec":     map[string]any{"replicas": replicas},
	})
	if err != nil {
		return err
	}
	if t.mapping.Resource.Group == "apps" {
		_, err = s.patch(ctx, t, patch)
		return err
	}
	_, err = s.deps.Scales.Scales(s.namespace).Patch(ctx, t.mapping.Resource, t.res.Ref.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// patch merge-patches the resource itself.
func (s *scaler) patch(ctx context.Context, t *target, patch []byte) (*unstructured.Unstructured, error) {
	return s.deps.Dynamic.Resource(t.mapping.Resource).Namespace(s.namespace).
		Patch(ctx, t.res.Ref.Name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// removeAnnotations removes the annotations keys from the resource.
func (s *scaler) removeAnnotations(ctx context.Context, t *target, keys ...string) error {
	nulls := map[string]any{}
	for _, k := range keys {
		nulls[k] = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": nulls}})
	if err != nil {
		return err
	}
	_, err = s.patch(ctx, t, patch)
	return err
}

// ErrBadReplicasAnnotation is wrapped when the stored replicas are not an integer > 0.
var ErrBadReplicasAnnotation = errors.New("the replicas annotation is not an integer > 0")

// targetReplicas is the scale-up target: the stored replicas, or 1 when there is no
// annotation; why says which. A stored value that is not an integer > 0 is an error, as in
// dependency-watchdog: someone wrote it by hand, and guessing 1 could start a controller
// with fewer replicas than it needs (or start one that was meant to stay off).
func targetReplicas(annotations map[string]string) (int32, string, error) {
	v, ok := annotations[AnnotationReplicas]
	if !ok {
		return 1, fmt.Sprintf("no %s annotation: default 1", AnnotationReplicas), nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n <= 0 {
		return 0, "", fmt.Errorf("annotation %s=%q: %w; fix or remove it to scale up", AnnotationReplicas, shorten(v), ErrBadReplicasAnnotation)
	}
	return int32(n), fmt.Sprintf("restoring the %d replicas stored in %s", n, AnnotationReplicas), nil
}

func hasAnnotations(obj *unstructured.Unstructured) bool {
	a := obj.GetAnnotations()
	_, r := a[AnnotationReplicas]
	_, m := a[AnnotationMeltdownProtection]
	return r || m
}

// waitReady polls the resource's ready replicas until cond holds or ctx ends; a read that
// fails is tried again at the next poll, and named in the error if ctx ends before one works.
func (s *scaler) waitReady(ctx context.Context, t *target, cond func(int64) bool) (int64, error) {
	var ready int64
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, s.deps.PollInterval, true, func(ctx context.Context) (bool, error) {
		n, err := s.readyReplicas(ctx, t)
		if err != nil {
			lastErr = err
			return false, nil
		}
		ready, lastErr = n, nil
		return cond(n), nil
	})
	if err != nil && lastErr != nil {
		return ready, fmt.Errorf("%w (last error: %w)", err, lastErr)
	}
	return ready, err
}

// readyReplicas reads status.readyReplicas of the object (absent = 0, as Deployments and
// StatefulSets omit it when it is 0). Kinds outside apps that have no such field fall back to
// the scale subresource's status.replicas.
func (s *scaler) readyReplicas(ctx context.Context, t *target) (int64, error) {
	obj, err := s.deps.Dynamic.Resource(t.mapping.Resource).Namespace(s.namespace).Get(ctx, t.res.Ref.Name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	if v, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "readyReplicas"); found {
		switch n := v.(type) {
		case int64:
			return n, nil
		case int32:
			return int64(n), nil
		case int:
			return int64(n), nil
		case float64:
			return int64(n), nil
		}
	}
	if t.mapping.Resource.Group == "apps" {
		return 0, nil
	}
	sc, err := s.deps.Scales.Scales(s.namespace).Get(ctx, t.gr(), t.res.Ref.Name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	return int64(sc.Status.Replicas), nil
}

func (s *scaler) waitFailed(runCtx context.Context, t *target, obj *unstructured.Unstructured, state string, err error) Outcome {
	if runCtx.Err() != nil {
		t.at(OutcomeInterrupted, "the run is stopping").
			Warnf("Stopped waiting for %s (%s): the run is stopping; the next probe continues from here.", t.res.Ref, state)
		return OutcomeInterrupted
	}
	return s.fail(t, obj, fmt.Errorf("%s did not reach its state within its timeout %s (%s): %w", t.res.Ref, s.info(t.res).Timeout, state, err))
}

func (s *scaler) missing(t *target, what string) Outcome {
	if t.res.Optional {
		t.at(OutcomeOptionalMissing, what).Infof("Skipping optional %s: %s.", t.res.Ref, what)
		return OutcomeOptionalMissing
	}
	t.at(OutcomeMissing, what).Errorf("Cannot scale required %s: %s; the other resources are still scaled.", t.res.Ref, what)
	return OutcomeMissing
}

// scaleFailed is the outcome of a change of the replicas that failed: the resource (or its
// scale subresource) is missing, or the change failed.
func (s *scaler) scaleFailed(t *target, obj *unstructured.Unstructured, err error) Outcome {
	if apierrors.IsNotFound(err) {
		return s.missing(t, fmt.Sprintf("%s %s/%s does not exist (or has no scale subresource)", t.res.Ref.Kind, s.namespace, t.res.Ref.Name))
	}
	return s.fail(t, obj, err)
}

func (s *scaler) fail(t *target, obj *unstructured.Unstructured, err error) Outcome {
	if denial, ok := admission.Message(err); ok {
		return s.refused(t, obj, denial, err)
	}
	verb := strings.TrimPrefix(string(s.direction), "scale-")
	t.at(OutcomeFailed, err.Error()).WithFields(logrus.Fields{"error": err.Error()}).Errorf("Scaling %s %s failed: %v", t.res.Ref, verb, err)
	reason := map[Action]string{ActionScaleDown: ReasonScaleDownError, ActionScaleUp: ReasonScaleUpError}[s.direction]
	s.event(obj, corev1.EventTypeWarning, reason, fmt.Sprintf("Scaling %s failed: %v", verb, err))
	return OutcomeFailed
}

// refused: an admission policy refused one of the probe's writes. Logged at error level and
// recorded as a ScaleRefused Warning Event quoting the policy; its outcome reaches the
// coordinator's probe_scale_operations_total{result="admission-refused"}.
func (s *scaler) refused(t *target, obj *unstructured.Unstructured, denial string, err error) Outcome {
	msg := fmt.Sprintf("Scaling %s %s was refused by an admission policy (%s). If this is depwatch's own policy, the policy and the probe disagree on what may be scaled: report it.",
		t.res.Ref, strings.TrimPrefix(string(s.direction), "scale-"), denial)
	t.at(OutcomeAdmissionRefused, "admission-refused").WithFields(logrus.Fields{"policy": admission.Policy(err), "error": err.Error()}).Error(msg)
	s.event(obj, corev1.EventTypeWarning, ReasonScaleRefused, msg)
	return OutcomeAdmissionRefused
}

// event records a core/v1 Event on the scaled resource synchronously, so it exists before a
// one-shot Job exits. A failure is only logged: the resource was handled either way.
func (s *scaler) event(obj *unstructured.Unstructured, eventType, reason, message string) {
	if s.dryRun || obj == nil || s.deps.NoEvents {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	ref := corev1.ObjectReference{Kind: obj.GetKind(), APIVersion: obj.GetAPIVersion(), Namespace: s.namespace, Name: obj.GetName(),
		UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()}
	if err := event.Write(ctx, s.deps.Seed, ref, EventComponent, eventType, reason, message); err != nil {
		s.log.WithFields(logrus.Fields{"namespace": s.namespace, "kind": obj.GetKind(), "name": obj.GetName(), "error": err.Error()}).
			Warnf("Could not record the %s Event on %s/%s: %v", reason, obj.GetKind(), obj.GetName(), err)
	}
}

// at is t's log line for an action (an Outcome, or a step such as "ready") and its reason.
func (t *target) at(action Outcome, reason string) *logrus.Entry {
	return t.log.WithFields(logrus.Fields{"action": string(action), "reason": reason})
}

// scaleAll scales every resource in its level's turn: levels ascending, the resources of one
// level concurrently, a level starting when the previous one has finished. When a resource of
// a level fails (an API error, a timeout, a required resource missing), the later levels do
// not run (OutcomeBlocked), as in dependency-watchdog: the order exists because a later level
// is only safe once the earlier one is done (machine-controller-manager must not run while
// kube-controller-manager still marks nodes; cluster-autoscaler must not come up before the
// controllers that serve it). The next probe tries again from level 0. When ctx is
// cancelled, no further level starts and the resources waiting for their initial delay are
// not started. The outcomes are in the order of resources.
func (s *scaler) scaleAll(ctx context.Context, resources []DependentResource) []Outcome {
	results := make([]Outcome, len(resources))
	byLevel := map[int][]int{}
	for i, r := range resources {
		results[i] = OutcomeNotStarted
		lv := s.info(r).Level
		byLevel[lv] = append(byLevel[lv], i)
	}
	failedAt, failed := 0, false
	for _, lv := range slices.Sorted(maps.Keys(byLevel)) {
		idx := byLevel[lv]
		if failed {
			for _, i := range idx {
				results[i] = OutcomeBlocked
			}
			s.log.WithFields(logrus.Fields{"namespace": s.namespace, "decision": string(s.direction), "scale_level": lv, "action": string(OutcomeBlocked),
				"reason": fmt.Sprintf("level %d failed", failedAt)}).
				Warnf("Level %d (%d resources) is not started because level %d failed; the next probe starts again from the first level.", lv, len(idx), failedAt)
			continue
		}
		if ctx.Err() != nil {
			s.log.WithFields(logrus.Fields{"namespace": s.namespace, "decision": string(s.direction), "scale_level": lv, "action": string(OutcomeNotStarted)}).
				Infof("The run is stopping: level %d (%d resources) is not started.", lv, len(idx))
			continue
		}
		s.log.WithFields(logrus.Fields{"namespace": s.namespace, "decision": string(s.direction), "scale_level": lv, "resources": len(idx)}).
			Debugf("Level %d: %d resources.", lv, len(idx))
		var wg sync.WaitGroup
		for _, i := range idx {
			wg.Go(func() {
				results[i] = s.one(ctx, resources[i])
			})
		}
		wg.Wait()
		for _, i := range idx {
			if results[i].failure() {
				failedAt, failed = lv, true
			}
		}
	}
	return results
}
