package prober

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/depwatch/depwatch/jobs"
)

// shardMembers are the probed namespaces of shard i with their notBefore, and whether the
// shard exists.
func (p *Controller) shardMembers(i int) (map[string]time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	count := ShardCount(len(p.next), p.cfg.PerJob())
	notBefore := map[string]time.Time{}
	for ns, at := range p.next {
		if ShardOf(ns, count) == i {
			notBefore[ns] = at
		}
	}
	return notBefore, i < count
}

// notCoveredElsewhere is members without those an active probe Job of another target probes
// (their shard changed while it runs, or a Job of one namespace alone): they join their new
// shard once that Job no longer probes them (its membership let them go, or it ended), so no
// namespace is ever probed by two Jobs at once.
func (p *Controller) notCoveredElsewhere(target string, members []string) []string {
	elsewhere := sets.New[string]()
	for _, r := range p.view.AllActive() {
		if r.Facts.Target != target {
			elsewhere.Insert(p.covers(r)...)
		}
	}
	return slices.DeleteFunc(members, elsewhere.Has)
}

// reconcileShard: history clean-up, the membership of its running Job, DecideShard and its
// one action. A shard is a key of the queue, so no two workers run one shard's turn at once.
func (p *Controller) reconcileShard(ctx context.Context, i int) error {
	target := p.shardName(i)
	if err := p.cleanHistory(ctx, target); err != nil {
		p.log.WithError(err).WithField("shard", target).Warn("Could not remove old probe Jobs; will retry.")
	}
	now := p.now()
	notBefore, exists := p.shardMembers(i)
	var active *jobs.Run // the shard's probe Job that has not finished
	if runs := p.view.Active(target); len(runs) > 0 {
		active = &runs[0]
	}
	p.checkStuck(i, active, now)
	if !exists {
		// The shard count went down: its members belong to other shards now. Its running
		// Job's membership is emptied (its namespaces are free for their new shards at once);
		// with no Job left, its ConfigMap goes.
		switch {
		case active == nil:
			return p.members.Delete(ctx, target)
		case follows(active) && p.membershipsComplete():
			return p.syncMembership(ctx, target, nil, nil, now, p.log.WithField("shard", target))
		}
		return nil
	}
	mine := p.notCoveredElsewhere(target, slices.Sorted(maps.Keys(notBefore)))
	p.mu.Lock()
	nextAt := p.shardNext[i]
	p.mu.Unlock()
	in, due := ShardInputOf(mine, notBefore, active != nil, nextAt, p.cfg.RunDuration(), now)
	action, why := DecideShard(in)
	log := p.log.WithFields(logrus.Fields{"shard": target, "action": string(action), "reason": why, "namespaces": in.Members})
	if follows(active) && p.membershipsComplete() {
		if err := p.syncMembership(ctx, target, mine, notBefore, now, log); err != nil {
			return err
		}
	}
	switch action {
	case ShardIdle:
		if active == nil {
			return p.members.Delete(ctx, target)
		}
		return nil
	case ShardKeep:
		p.metrics.JobsLaunched.WithLabelValues(string(jobs.KindProbe), string(jobs.ResultKept)).Inc()
		// Looked at again when the Job ends (its informer event), and meanwhile for a Job that
		// cannot start.
		p.queue.AddAfter(shardKey(i), stuckAfter(p.cfg))
		return nil
	case ShardWait:
		at := in.NextAt
		if !now.Before(at) {
			at = in.EarliestDue
		}
		p.queue.AddAfter(shardKey(i), max(at.Sub(now), time.Second))
		return nil
	}
	if p.standingAside() != "" {
		return nil // its namespaces leave it; looked at again when the prober no longer stands aside
	}
	return p.launchShard(ctx, i, target, due, mine, notBefore, now, log)
}

// launchShard launches shard i's Job: for its due members, or, when Jobs run a while and so
// follow their membership, for all of them (each from its own notBefore on) once the
// membership ConfigMap holds them. The shard's next Job is no earlier than one interval on.
func (p *Controller) launchShard(ctx context.Context, i int, target string, due, mine []string, notBefore map[string]time.Time, now time.Time, log logrus.FieldLogger) error {
	// Each namespace its own slot, so a hanging one delays no other; a Job that follows its
	// membership has room for the namespaces that join while it runs.
	concurrency, membershipIn := len(due), ""
	if p.cfg.RunDuration() > 0 {
		if err := p.syncMembership(ctx, target, mine, notBefore, now, log); err != nil {
			return err
		}
		due, concurrency, membershipIn = mine, MaxNamespacesPerProbeJob, p.launcher.Template.Namespace
	}
	// Each shoot's own settings as they are now; a Job that follows its membership ConfigMap
	// picks up later changes.
	settings := p.memberSettings(due)
	for ns, s := range settings {
		if at := notBefore[ns]; at.After(now) {
			s.NotBefore = at
			settings[ns] = s
		}
	}
	ps := p.cfg.ProbeSpec("", now)
	ps.Namespaces, ps.NamespaceSettings, ps.Concurrency = due, settings, concurrency
	ps.Shard, ps.MembershipIn = target, membershipIn
	spec, err := jobs.Probe(ps)
	if err != nil {
		return err // validated at load
	}
	out, err := p.launcher.Launch(ctx, spec, p.view.Active(spec.Target()))
	p.metrics.JobsLaunched.WithLabelValues(string(jobs.KindProbe), string(out.Result)).Inc()
	if err != nil {
		log.WithError(err).Error("Could not launch the shard's probe Job; will retry. The other shards are not affected.")
		return err
	}
	log.WithFields(logrus.Fields{"job": out.Run.Namespace + "/" + out.Run.Name, "result": string(out.Result)}).
		Debugf("Launched a probe Job for %d namespace(s).", len(due))
	d := Jittered(p.cfg.Interval(), p.cfg.Jitter())
	p.mu.Lock()
	p.shardNext[i] = now.Add(d)
	p.mu.Unlock()
	p.queue.AddAfter(shardKey(i), d)
	return nil
}

// shardName is shard i's Job target under the running config's namespace selector.
func (p *Controller) shardName(i int) string {
	return ShardName(i, p.cfg.Selector().String())
}

// noteShardCount returns the shard count for the probed namespaces now; when it changed,
// namespaces move between shards, so every shard looks at its members again.
func (p *Controller) noteShardCount() int {
	per := p.cfg.PerJob()
	p.mu.Lock()
	count := ShardCount(len(p.next), per)
	before := p.shards
	p.shards = count
	p.mu.Unlock()
	if count != before {
		p.metrics.ProbeShards.WithLabelValues("total").Set(float64(count))
		p.log.WithFields(logrus.Fields{"shards": count, "before": before, "reason": "probed namespaces changed"}).
			Infof("The probed namespaces now form %d shard(s) of about %d: one probe Job each at a time.", count, per)
		for i := range max(count, before) {
			p.queue.Add(shardKey(i))
		}
	}
	return count
}

// cleanHistory deletes the target's (a shard's, or one namespace's) finished probe Jobs
// beyond the history limits (the Job executor's: an in-process run is gone once it ends).
func (p *Controller) cleanHistory(ctx context.Context, target string) error {
	all := func(jobs.Run) bool { return true }
	excess := jobs.ExcessHistory(p.view.ForTarget(target, all), p.cfg.SuccessfulHistory(), p.cfg.FailedHistory())
	if len(excess) == 0 {
		return nil
	}
	deleted, err := p.launcher.Delete(ctx, excess)
	p.metrics.ProbeJobsCleaned.Add(float64(len(deleted)))
	if len(deleted) > 0 {
		p.log.WithFields(logrus.Fields{"target": target, "jobs": deleted}).Debug("Removed finished probe Jobs beyond the history limits.")
	}
	if err != nil {
		return fmt.Errorf("history clean-up: %w", err)
	}
	return nil
}

// stuckAfter is how long a shard's probe Job may go without a running pod before the shard
// counts as stuck: a pod normally runs seconds after its Job is created.
func stuckAfter(cfg *Config) time.Duration { return max(time.Minute, cfg.Interval()) }

// checkStuck notes whether shard i's active Job cannot start (no pod, or a pod that stays
// Pending: no node fits, quota, admission): its namespaces are then not probed. It is made
// visible, once per Job, as a Warning log line and Event on the Job, in the metric
// depwatch_coordinator_probe_shards{state="stuck"} and in /readyz's detail. The other shards
// carry on: each has its own Job.
func (p *Controller) checkStuck(i int, active *jobs.Run, now time.Time) {
	why := ""
	if active != nil && now.Sub(active.Created) >= stuckAfter(p.cfg) {
		why = p.notStarted(*active)
	}
	p.mu.Lock()
	before := p.stuck[i]
	if why == "" {
		delete(p.stuck, i)
	} else {
		p.stuck[i] = why
	}
	n := len(p.stuck)
	p.mu.Unlock()
	p.metrics.ProbeShards.WithLabelValues("stuck").Set(float64(n))
	if why == "" || why == before {
		return
	}
	msg := fmt.Sprintf("The probe Job of %s has no running pod after %s: %s. Its namespaces (%s) are not probed until it starts; the other shards are not affected.",
		p.shardName(i), now.Sub(active.Created).Round(time.Second), why, strings.Join(active.Facts.Namespaces, ","))
	p.log.WithFields(logrus.Fields{"shard": p.shardName(i), "job": active.Namespace + "/" + active.Name, "action": "none", "reason": why}).Warn(msg)
	if p.recorder != nil {
		ref := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: active.Namespace, Name: active.Name, UID: active.UID}}
		p.recorder.Event(&ref, corev1.EventTypeWarning, "ProbeShardNotRunning", msg)
	}
}

// stuckShards is /readyz's detail: one line per shard whose Job cannot start.
func (p *Controller) StuckShards() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for i, why := range p.stuck {
		out = append(out, fmt.Sprintf("probe %s: its Job has no running pod: %s", p.shardName(i), why))
	}
	slices.Sort(out)
	return out
}
