package prober

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// A shard's probe Job runs for probeJobRunDuration, while shoots are created, woken up and
// hibernated at any moment. So each shard's membership lives in a ConfigMap that the
// coordinator keeps equal to the shard's members, and the running Job follows it: a shoot
// that becomes probe-able is probed from its initialDelay on, one that stops being so is
// neither probed nor scaled any more, in the time a watch event takes, and at no Job's cost.

// ShardMembership is the membership shard members should have, given the one its
// ConfigMap holds now (current; nil: none). Each member carries its own settings as they are
// now; its notBefore is the one current gives it when it is a member already (a running Job
// reads notBefore only when a namespace joins, so rewriting it would change nothing but cost
// a write per probe interval), else its own notBefore when that is still ahead.
func ShardMembership(members []string, notBefore map[string]time.Time, settings map[string]probe.NamespaceSettings, current *probe.Membership, now time.Time) probe.Membership {
	m := probe.Membership{Namespaces: slices.Clone(members), Settings: map[string]probe.NamespaceSettings{}}
	slices.Sort(m.Namespaces)
	for _, ns := range m.Namespaces {
		s := settings[ns]
		s.NotBefore = time.Time{}
		switch {
		case current != nil && slices.Contains(current.Namespaces, ns):
			s.NotBefore = current.Settings[ns].NotBefore
		case notBefore[ns].After(now):
			s.NotBefore = notBefore[ns]
		}
		m.Settings[ns] = s
	}
	return m
}

// follows: the Job follows its shard's membership ConfigMap (it was launched with one).
func follows(r *jobs.Run) bool { return r != nil && r.Facts.Membership != "" }

// covers is the namespaces a probe Job probes now: its shard's membership when it follows
// one, else the namespaces it was launched with.
func (p *Controller) covers(r jobs.Run) []string {
	f := r.Facts
	if f.Membership != "" {
		if m, ok := p.members.Get(f.Target); ok {
			return m.Namespaces
		}
	}
	return f.Covers()
}

// syncMembership makes shard target's membership hold members, with their settings as they
// are now.
func (p *Controller) syncMembership(ctx context.Context, target string, members []string, notBefore map[string]time.Time, now time.Time, log logrus.FieldLogger) error {
	var current *probe.Membership
	if m, ok := p.members.Get(target); ok {
		current = &m
	}
	want := ShardMembership(members, notBefore, p.memberSettings(members), current, now)
	changed, err := p.members.Set(ctx, target, want)
	if err != nil || !changed {
		return err
	}
	joined := want.Namespaces
	var left []string
	if current != nil {
		joined, left = jobs.Departed(want.Namespaces, current.Namespaces), jobs.Departed(current.Namespaces, want.Namespaces)
	}
	log.WithFields(logrus.Fields{"action": "membership", "joined": joined, "left": left, "configmap": jobs.MembershipName(target)}).
		Info("The shard's membership changed; its running probe Job follows it at once.")
	return nil
}

// onLeft: namespaces that left a shard's membership may be waiting to join another shard
// (theirs changed with the shard count): they are looked at again now that no Job probes
// them.
func (p *Controller) onLeft(namespaces []string) {
	for _, ns := range namespaces {
		p.queue.Add(ns)
	}
}

// memberSettings are each namespace's own probe settings as its Cluster says now (its shoot's
// nodeMonitorGracePeriod and node conditions), noted in the log when they change.
func (p *Controller) memberSettings(namespaces []string) map[string]probe.NamespaceSettings {
	out := make(map[string]probe.NamespaceSettings, len(namespaces))
	for _, ns := range namespaces {
		cluster, _ := p.clusterFor(ns)
		shoot := ShootSettingsOf(cluster)
		grace := shoot.Grace(p.cfg.KCMGrace())
		p.noteShootSettings(ns, shoot, grace, p.log.WithField("namespace", ns))
		s := probe.NamespaceSettings{NodeConditions: shoot.NodeConditions}
		if grace != p.cfg.KCMGrace() {
			s.NodeMonitorGrace = grace
		}
		out[ns] = s
	}
	return out
}

// noteShootSettings logs a namespace's shoot-specific settings when they change (not on every
// probe: a seed has up to a thousand namespaces probed every few seconds).
func (p *Controller) noteShootSettings(ns string, s ShootSettings, grace time.Duration, log logrus.FieldLogger) {
	note := fmt.Sprintf("grace=%s conditions=%s problems=%v", grace, s.NodeConditionsJSON(), s.Problems)
	p.mu.Lock()
	changed := p.shootNotes[ns] != note
	p.shootNotes[ns] = note
	p.mu.Unlock()
	if !changed {
		return
	}
	fields := logrus.Fields{"nodeMonitorGrace": grace.String(), "nodeConditions": s.NodeConditionsJSON(), "reason": "shoot settings"}
	if s.NodeMonitorGrace > 0 {
		log.WithFields(fields).Info("The shoot sets its own nodeMonitorGracePeriod: its probes use it from now on.")
	} else {
		log.WithFields(fields).Debug("Probe settings of this namespace from now on.")
	}
	for _, pr := range s.Problems {
		log.WithFields(logrus.Fields{"reason": pr}).Warnf("The shoot's Cluster has a probe setting depwatch cannot use; the default applies: %s.", pr)
	}
}
