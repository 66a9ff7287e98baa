package weeder

import (
	"context"
	"errors"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// Reconcile is the sync of one service's key (the worker loop calls it): it acts once on the
// edge the handler recorded last (actOnEdge), if it is still worth acting on, and forgets the
// edge once it is done.
func (c *Controller) Reconcile(ctx context.Context, key string) error {
	c.mu.Lock()
	st := c.services[key]
	var owed *recordedEdge
	var seen Observation
	if st != nil {
		owed, seen = st.owed, st.seen
	}
	c.mu.Unlock()
	if owed == nil {
		return nil
	}
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	log := c.log.WithFields(logrus.Fields{"namespace": ns, "service": svc})
	worth, err := c.worthActing(ctx, key, st, owed, seen, log)
	if err == nil && worth {
		err = c.actOnEdge(ctx, key, st, owed, log)
	}
	if err != nil {
		return &attemptError{err: err, tried: owed}
	}
	c.mu.Lock()
	if st.owed == owed { // else a newer edge came while this one was acted on
		st.owed = nil
		if !st.seen.Known && c.services[key] == st {
			delete(c.services, key)
		}
	}
	c.mu.Unlock()
	return nil
}

// attemptError carries the edge a failed attempt acted on, so giving up drops that edge and
// not a newer one recorded while it was retried.
type attemptError struct {
	err   error
	tried *recordedEdge
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// GiveUp is told by the worker loop that a service's launch failed ctrl.MaxRetries times.
func (c *Controller) GiveUp(key string, err error) {
	var ae *attemptError
	if errors.As(err, &ae) {
		c.mu.Lock()
		if st, ok := c.services[key]; ok && st.owed == ae.tried {
			st.owed = nil // a newer edge recorded meanwhile is still owed its action
		}
		c.mu.Unlock()
		err = ae.err
	}
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	c.log.WithError(err).WithFields(logrus.Fields{"namespace": ns, "service": svc}).Error("Giving up launching the weeder Job.")
	c.recordEvent(ns, svc, corev1.EventTypeWarning, EventWeederFailed, "Could not launch a weeder Job: "+err.Error())
}

// worthActing: the edge still calls for PlanWeeder. Not when its namespace stopped matching
// since, nor for a gone service without a weeder or a catch-up without a crash-looping
// dependent: those read only the caches.
func (c *Controller) worthActing(ctx context.Context, key string, st *serviceState, e *recordedEdge, seen Observation, log logrus.FieldLogger) (bool, error) {
	if !c.relevant(key) {
		return false, nil
	}
	if t := c.target(key); len(t.Selectors) == 0 && len(t.Elsewhere) == 0 {
		log.Debug("Service has no dependent: nothing to do.")
		return false, nil // an annotation's workloads changed since the edge
	}
	switch {
	case e.edge == EdgeGone:
		if c.coverage(key, st).active == NoWeeder {
			log.Debug("The service's endpoints are gone and it has no weeder Job: nothing to do.")
			return false, nil
		}
	case e.catchUp:
		if !seen.Ready {
			return false, nil // down again: its outage edge is owed, or nothing is to do
		}
		pod, err := c.crashLoopingDependent(ctx, key)
		if err != nil {
			return false, err
		}
		if pod == "" {
			log.Debug("Service is Ready and none of its dependents is crash-looping: no catch-up weeder.")
			return false, nil
		}
		c.countTrigger(e)
		log.WithField("pod", pod).Info("Catch-up: the service is Ready and a dependent is in CrashLoopBackOff; making sure a weeder restarts it.")
	default:
		c.countTrigger(e)
	}
	return true, nil
}

func (c *Controller) countTrigger(e *recordedEdge) {
	if !e.triggerCounted {
		e.triggerCounted = true
		c.metrics.Triggers.WithLabelValues(string(jobs.KindWeeder), e.trigger).Inc()
	}
}

// actOnEdge reads what covers the service and, on an outage or when it is gone, whether its
// namespace is going away; lets PlanWeeder decide, and does it. A decision that needs no
// action costs no API call.
func (c *Controller) actOnEdge(ctx context.Context, key string, st *serviceState, e *recordedEdge, log logrus.FieldLogger) error {
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	cov := c.coverage(key, st)
	in := WeederInput{Edge: e.edge, Arm: c.cfg.Arm(svc), Active: cov.active, CatchUp: e.catchUp}
	going := ""
	if e.edge == EdgeOutage || e.edge == EdgeGone {
		var err error
		if going, err = c.namespaceGoing(ctx, ns); err != nil {
			log.WithError(err).Error("Could not tell whether the service's namespace is being deleted; will retry.")
			return err
		}
		if going == "" && e.edge == EdgeGone && c.opts.NoNamespaceReads {
			// Without namespace reads a deleted namespace shows only as its endpoints going:
			// an armed weeder left waiting would hold a place for maxWait. If the service comes
			// back Ready with a crash-looping dependent, its first sighting's catch-up covers it.
			going = "its endpoints are gone and namespaces are not read"
		}
		in.Going = going != ""
	}
	if in.Going {
		log = log.WithField("going", going)
	}
	switch action := PlanWeeder(in); action {
	case ActionKeepWeeder:
		c.keepWeeder(e, cov, log)
	case ActionStopWeeder:
		c.batch.drop(key)
		return c.stopWeeder(ctx, key, e, cov.own, going, log)
	case ActionArmWeeder, ActionLaunchWeeder:
		return c.launchWeeder(ctx, key, e, action == ActionArmWeeder, cov.own, log)
	case ActionNone:
		if in.Going {
			c.batch.drop(key)
			log.Infof("Service has no ready endpoint any more and is going away (%s): no weeder is armed.", going)
		} else if e.edge == EdgeOutage {
			log.WithField("trigger", e.trigger).Info("Service has no ready endpoint any more; no weeder Job was running.")
		}
	}
	return nil
}

// coverage is what covers a service when an edge is acted on.
type coverage struct {
	active ActiveWeeder
	// by names what covers it: a Job's name, or a batch Job being formed.
	by string
	// own is the Jobs that cover the service alone: those may be replaced or stopped for it;
	// a batch Job goes on for its other services.
	own []jobs.Run
}

// coverage reads what covers the service: its active weeder Jobs from the cache (an armed
// one first), else a Job just created that the cache has not shown yet, else a place in a
// batch being formed. It makes no API call.
func (c *Controller) coverage(key string, st *serviceState) coverage {
	var cov coverage
	for _, r := range c.runs.Active(key) {
		if cov.active != ArmedWeeder {
			cov.active, cov.by = weederKind(r.Armed), r.Name
		}
		if len(r.Facts.Covers()) == 1 {
			cov.own = append(cov.own, r)
		}
	}
	if cov.active == ArmedWeeder {
		return cov
	}
	if l, ok := c.expectedLaunch(st); ok {
		cov.active, cov.by = weederKind(l.armed), l.name
		if l.own { // not in the cache yet, but replaced or stopped like one that is
			cov.own = append(cov.own, jobs.Run{Namespace: c.launcher.Template.Namespace, Name: l.name, UID: l.uid})
		}
	}
	if cov.active == ArmedWeeder {
		return cov
	}
	if armed, ok := c.batch.waitingFor(key); ok {
		cov.active, cov.by = weederKind(armed), "a batch Job being formed"
	}
	return cov
}

func weederKind(armed bool) ActiveWeeder {
	if armed {
		return ArmedWeeder
	}
	return UnarmedWeeder
}

// expectedLaunch is the weeder Job this coordinator created for the service while the Job
// cache has not shown it yet. Once the cache has shown it, the cache alone says whether it is
// still active.
func (c *Controller) expectedLaunch(st *serviceState) (launchedJob, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.launched == nil || !c.expectations.pending(st.launched.name, c.now()) {
		return launchedJob{}, false
	}
	return *st.launched, true
}

// namespaceGoing says why a service of namespace ns is not coming back ("" when it may): the
// namespace is being deleted or is gone. Read from the namespace cache; only a namespace the
// cache does not hold (just created, or gone) costs an API read. A Service deleted on its own
// takes its EndpointSlices with it: that is EdgeGone, and its namespace stays.
func (c *Controller) namespaceGoing(ctx context.Context, ns string) (string, error) {
	if c.nsLister == nil {
		return "", nil // may not read namespaces (Options.NoNamespaceReads): not known
	}
	n, err := c.nsLister.Get(ns)
	if err != nil {
		n, err = c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	}
	return going("namespace", err, err == nil && (n.DeletionTimestamp != nil || n.Status.Phase == corev1.NamespaceTerminating))
}

// serviceGoing says why the Service is not coming back ("" when it may): it is gone or being
// deleted.
func (c *Controller) serviceGoing(ctx context.Context, ns, svc string) (string, error) {
	if c.opts.NoServiceReads {
		return "", nil // not known; the armed weeder waits for it
	}
	s, err := c.client.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{})
	return going("service", err, err == nil && s.DeletionTimestamp != nil)
}

// going names why what (read with err) is not coming back: it is gone, or deleting.
func going(what string, err error, deleting bool) (string, error) {
	switch {
	case apierrors.IsNotFound(err):
		return what + " gone", nil
	case err != nil:
		return "", err
	case deleting:
		return what + " being deleted", nil
	}
	return "", nil
}
