package prober

import (
	"time"

	"github.com/sirupsen/logrus"

	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/probe"
)

// onReport reads a finished probe run's report (leader only; false, not taken, otherwise). A
// run that ended before this coordinator started gives only each namespace's last-probe
// time: its totals and decisions were counted by the replica that saw it end.
func (p *Controller) onReport(run jobs.Report) bool {
	if !p.leading.Load() {
		return false
	}
	old := run.FinishedAt.Before(p.started)
	rep, err := probe.DecodeReport(run.Message)
	if err != nil {
		if !old {
			p.metrics.ProbeDecisions.WithLabelValues("error").Inc()
			p.log.WithFields(logrus.Fields{"pod": run.Run, "reason": "no report"}).
				Warnf("A probe pod ended without a readable report (refused its configuration, or killed): %v.", err)
		}
		return true
	}
	if !old {
		for r, n := range rep.Results {
			p.metrics.ProbeDecisions.WithLabelValues(r).Add(float64(n))
		}
		for r, n := range rep.Ops {
			p.metrics.ProbeScaleOps.WithLabelValues(r).Add(float64(n))
		}
	}
	for ns, e := range rep.Namespaces {
		if e.Last == probe.ResultNotProbed {
			continue
		}
		at := rep.End.Add(-e.Ago)
		p.noteProbe(ns, at, e.Last, !old && !rep.DryRun)
		if !old {
			p.noteThrottling(ns, e, at)
		}
	}
	return true
}

// noteProbe keeps the namespace's newest reported probe and, while it is probed, its
// last-probe series (a forgotten namespace's series is gone for good) and, with meltdown, its
// meltdown series as its last decision left it: set by a scale-down, gone after a scale-up (or
// a probe that found everything up); a probe without a decision changes nothing.
func (p *Controller) noteProbe(ns string, at time.Time, last probe.Result, meltdown bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, probed := p.next[ns]
	if at.After(p.reportedProbe[ns]) {
		p.reportedProbe[ns] = at
		if probed {
			p.metrics.ProbeLastProbe.WithLabelValues(ns).Set(float64(at.Unix()))
		}
	}
	switch {
	case !probed || !meltdown:
	case last == probe.ResultScaleDown:
		p.metrics.ProbeMeltdown.WithLabelValues(ns).Set(1)
	case last == probe.ResultScaleUp || last == probe.ResultHealthy:
		p.metrics.ProbeMeltdown.DeleteLabelValues(ns)
	}
}

// noteThrottling: a namespace whose last probe was throttled (an API server answered 429)
// gets its next probe pushed out by the back-off, doubling with each throttled probe in a
// row, across Jobs, so a throttled API server is not probed again at full rate; the next Job
// of its shard is told (NAMESPACE_SETTINGS notBefore). Any other result ends the back-off.
func (p *Controller) noteThrottling(ns string, e probe.NamespaceResult, last time.Time) {
	p.mu.Lock()
	if e.Last != probe.ResultThrottled {
		delete(p.throttled, ns)
		p.mu.Unlock()
		return
	}
	p.throttled[ns] += max(e.Throttled, 1)
	n := p.throttled[ns]
	next, scheduled := p.next[ns]
	if scheduled {
		next = NextAfterThrottle(next, last, n)
		p.next[ns] = next
	}
	p.mu.Unlock()
	if !scheduled {
		return
	}
	p.log.WithFields(logrus.Fields{"namespace": ns, "action": "back-off", "reason": "throttled", "backoff": probe.ThrottleBackoff(n).String(), "nextProbe": next.UTC().Format(time.RFC3339)}).
		Warnf("The probe was throttled (HTTP 429) %d time(s) in a row: the next probe of this namespace waits until %s.", n, next.UTC().Format(time.RFC3339))
	p.queue.Add(ns)
}
