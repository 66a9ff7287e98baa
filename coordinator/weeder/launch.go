package weeder

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// launchWeeder covers the service with a weeder: a Job of its own while launches are rare
// (replacing its own unarmed Job, if one runs), else a place in the batch being formed.
func (c *Controller) launchWeeder(ctx context.Context, key string, e *recordedEdge, armed bool, own []jobs.Run, log logrus.FieldLogger) error {
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	recent, waiting := c.batch.input(c.now(), c.opts.Batching.Window)
	if PlanLaunch(c.opts.Batching, LaunchInput{RecentOwn: recent, Waiting: waiting, Active: c.activeWeederJobs()}) == LaunchInBatch {
		waiting = c.batch.add(&batchItem{key: key, edge: e, armed: armed, since: c.now()})
		log.WithFields(logrus.Fields{"trigger": e.trigger, "armed": armed, "waiting": waiting}).
			Info("Many services need a weeder at once: this one joins a batch weeder Job.")
		return nil
	}
	if armed {
		// A lone outage may be its Service being deleted (its pods going first): one read
		// spares a weeder that would wait maxWait for nothing. A storm's services are not
		// read one by one; a deleted one's target in a batch Job just waits out maxWait.
		if gone, err := c.serviceGoing(ctx, ns, svc); err != nil {
			log.WithError(err).Error("Could not tell whether the Service is being deleted; will retry.")
			return err
		} else if gone != "" {
			log.WithField("going", gone).Infof("Service has no ready endpoint any more and is going away (%s): no weeder is armed.", gone)
			return nil
		}
	}
	spec, err := jobs.Weeder(c.cfg.weederSpec(e, armed, c.target(key)))
	if err != nil {
		return err // validated at load; cannot happen
	}
	out, err := c.launcher.Launch(ctx, spec, own)
	c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), string(out.Result)).Inc()
	if err != nil {
		log.WithError(err).WithField("trigger", e.trigger).Error("Could not launch the weeder Job; will retry.")
		return err
	}
	c.batch.ownLaunched(c.now())
	c.covered(key, e, out, armed, 0, log)
	return nil
}

// covered notes that the service is covered by the Job just created (see expectedLaunch): its
// own, or (batch > 0) a batch Job for that many services. It measures the edge's latency,
// logs it and records the Service's Event.
func (c *Controller) covered(key string, e *recordedEdge, out jobs.Outcome, armed bool, batch int, log logrus.FieldLogger) {
	own := batch == 0
	c.mu.Lock()
	if !c.runs.Has(out.Run.Namespace, out.Run.Name) {
		c.expectations.expect(out.Run.Name, c.now())
	}
	if st, ok := c.services[key]; ok {
		st.launched = &launchedJob{name: out.Run.Name, uid: out.Run.UID, armed: armed, own: own}
	}
	c.mu.Unlock()
	latency := c.now().Sub(e.at)
	c.metrics.TriggerToJob.WithLabelValues(string(jobs.KindWeeder)).Observe(latency.Seconds())
	c.observeEdge(e)
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	job := out.Run.Namespace + "/" + out.Run.Name
	fields := logrus.Fields{"job": job, "trigger": e.trigger, "armed": armed}
	// What the Event calls the Job, the service's dependents, and the service.
	what, deps, when := "", "crash-looping dependents", "the service is"
	if own {
		fields["result"], fields["replaced"], fields["latencyMs"] = string(out.Result), out.Replaced, latency.Milliseconds()
		what = fmt.Sprintf("weeder Job %s (trigger %s%s)", job, e.trigger, replacedNote(out.Replaced))
	} else {
		fields["batch"] = batch
		what = fmt.Sprintf("batch weeder Job %s (trigger %s, %d services)", job, e.trigger, batch)
		deps, when = "this service's crash-looping dependents", "it is"
	}
	log = log.WithFields(fields)
	if armed {
		if own {
			log.WithField("maxWait", c.cfg.MaxWait().String()).Info("The service went down: launched its weeder Job armed; it starts reaping the moment the service is Ready again.")
		} else {
			log.Info("The service went down: covered by an armed batch weeder Job; it starts reaping the service's dependents the moment it is Ready again.")
		}
		c.recordEvent(ns, svc, corev1.EventTypeNormal, EventWeederArmed,
			fmt.Sprintf("Armed %s: it restarts %s from the moment %s Ready again (waiting at most %s), for %s", what, deps, when, c.cfg.MaxWait(), c.cfg.Watch()))
		return
	}
	if own {
		log.Info("Launched a weeder Job.")
	} else {
		log.Info("Covered by a batch weeder Job.")
	}
	c.recordEvent(ns, svc, corev1.EventTypeNormal, EventWeederStarted, fmt.Sprintf("Started %s: restarting %s for %s", what, deps, c.cfg.Watch()))
}

// activeWeederJobs counts the weeder Jobs active now (the --max-weeder-jobs cap's measure):
// the cache's, plus those created that it has not shown yet.
func (c *Controller) activeWeederJobs() int {
	n := c.runs.Count()
	c.mu.Lock()
	defer c.mu.Unlock()
	return n + c.expectations.count(c.now())
}

// keepWeeder: an active weeder already covers the edge; it is only said.
func (c *Controller) keepWeeder(e *recordedEdge, cov coverage, log logrus.FieldLogger) {
	c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), string(jobs.ResultKept)).Inc()
	c.observeEdge(e)
	log = log.WithFields(logrus.Fields{"job": c.launcher.Template.Namespace + "/" + cov.by, "trigger": e.trigger, "result": string(jobs.ResultKept)})
	switch {
	case cov.active != ArmedWeeder:
		log.Info("A weeder Job is already restarting the service's crash-looping dependents: no new Job.")
	case e.edge == EdgeOutage:
		log.Info("An armed weeder Job is active for the service: no new Job; it pauses while the service is down and reaps again when it is Ready, until its watchDuration ends.")
	default:
		log.Info("An armed weeder Job is active for the service: no new Job; it reaps the moment the service is Ready, then for watchDuration.")
	}
}

// stopWeeder deletes the service's own running weeder Job, if any: the service went down
// again and arming is off, or (going says why) it is going away.
func (c *Controller) stopWeeder(ctx context.Context, key string, e *recordedEdge, own []jobs.Run, going string, log logrus.FieldLogger) error {
	ns, svc, _ := cache.SplitMetaNamespaceKey(key)
	stopped, err := c.launcher.Delete(ctx, own)
	if err != nil {
		log.WithError(err).Error("The service went down but its running weeder Job could not be stopped; will retry.")
		return err
	}
	if len(stopped) == 0 {
		log.Info("Service has no ready endpoint any more; no weeder Job of its own was running.")
		return nil
	}
	c.metrics.JobsLaunched.WithLabelValues(string(jobs.KindWeeder), "stopped").Add(float64(len(stopped)))
	c.observeEdge(e)
	if going != "" {
		log.WithField("jobs", stopped).Infof("The service is going away (%s): stopped its weeder Job.", going)
		c.recordEvent(ns, svc, corev1.EventTypeNormal, EventWeederStopped,
			fmt.Sprintf("Stopped weeder Job(s) %v: the service is going away (%s)", stopped, going))
		return nil
	}
	log.WithField("jobs", stopped).Info("Service has no ready endpoint any more: stopped its weeder Job, so dependents are not restarted while they cannot work.")
	c.recordEvent(ns, svc, corev1.EventTypeNormal, EventWeederStopped,
		fmt.Sprintf("Stopped weeder Job(s) %v: the service has no ready endpoint; a new weeder starts when it is Ready again", stopped))
	return nil
}

// weederSpec is a weeder Job's spec of the config for an edge: one service's (t; armed adds
// its gate), or what a batch's targets share (t zero).
func (cfg *Config) weederSpec(e *recordedEdge, armed bool, t jobs.WeederTarget) jobs.WeederSpec {
	return jobs.WeederSpec{
		Namespace: t.Namespace, Service: t.Service, Selectors: t.Selectors, Elsewhere: t.Elsewhere, ReadyWhen: t.ReadyWhen,
		WatchDuration: cfg.Watch(), GracePeriod: cfg.Grace(), Trigger: e.trigger, TriggerTime: e.at,
		Armed: armed, MaxWait: cfg.MaxWait(), ReapCooldown: cfg.Cooldown(), BackOffFloor: cfg.Floor(),
	}
}

// observeEdge records how long after its edge the weeder's action was done.
func (c *Controller) observeEdge(e *recordedEdge) {
	c.metrics.EdgeToAction.WithLabelValues(e.trigger).Observe(c.now().Sub(e.at).Seconds())
}

func replacedNote(r []string) string {
	if len(r) == 0 {
		return ""
	}
	return fmt.Sprintf(", replacing %v", r)
}

// recordEvent records an Event on the Service (none without a recorder). Its UID (which
// `kubectl describe service` matches Events by) comes from its EndpointSlices' owner
// reference, so a storm of Events costs no reads; with legacy Endpoints, which carry no
// owner, the Service is read. (A slice made by hand without an owner gives an Event without
// UID: listed by kubectl get events, not by describe; a storm is never held up by a read per
// Event.)
func (c *Controller) recordEvent(ns, svc, typ, reason, msg string) {
	if c.recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: ns, Name: svc}
	c.mu.Lock()
	if st, ok := c.services[ns+"/"+svc]; ok {
		ref.UID = st.view.serviceUID()
	}
	c.mu.Unlock()
	if ref.UID == "" && c.cfg.UseEndpoints && !c.opts.NoServiceReads {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if s, err := c.client.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{}); err == nil {
			ref.UID, ref.ResourceVersion = s.UID, s.ResourceVersion
		}
	}
	c.recorder.Event(ref, typ, reason, msg)
}
