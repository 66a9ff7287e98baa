package weeder

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/internal/termmsg"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/reaper"
)

// onReport reads what a finished weeder run saved from its report (reaper.ReadReport) into
// the saved back-off series: a Job's pod is gone long before Prometheus would scrape it. Each
// run is counted once, by the leader, and only if it ended after this replica took the lead
// (what ended before was the previous leader's to count); false when it is not counted here.
func (c *Controller) onReport(run jobs.Report) bool {
	since := c.leadSince()
	if since.IsZero() || run.FinishedAt.Before(since.Truncate(time.Second)) {
		return false
	}
	rep, err := reaper.ReadReport(run.Message)
	switch {
	case errors.Is(err, termmsg.ErrNoReport):
		return true // refused its configuration, or killed: its Job's own series say so
	case err != nil:
		c.log.WithFields(logrus.Fields{"pod": run.Run, "reason": "unreadable report"}).
			Warnf("A weeder pod ended with a report this coordinator cannot read (a different depwatch version?): %v. Its saved back-off is not counted.", err)
		return true
	case rep.DryRun:
		return true // nothing was restarted, nothing was saved
	}
	c.metrics.BackOffSaved.add(rep)
	c.metrics.BackOffSkipped.Add(float64(rep.BackOffSkipped))
	if rep.AdmissionRefused > 0 {
		c.metrics.AdmissionRefused.Add(float64(rep.AdmissionRefused))
		c.log.WithFields(logrus.Fields{"pod": run.Run, "action": "admission-refused", "refused": rep.AdmissionRefused,
			"reason": "an admission policy refused the weeder's deletes"}).
			Errorf("A weeder run had %d of its deletes refused by an admission policy: see the ReapRefused Events on the pods and the run's log. depwatch's own policy refusing depwatch's weeder is a bug.", rep.AdmissionRefused)
	}
	c.countPerService(run.Run, rep)
	return true
}

// countPerService adds a run's per-service restarts and saved back-off to their series.
func (c *Controller) countPerService(run string, rep reaper.Report) {
	for key, sv := range rep.Services {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil || ns == "" || name == "" {
			c.log.WithFields(logrus.Fields{"pod": run, "service": key, "reason": "unreadable report"}).
				Warn("A weeder pod's report names a service that is not <namespace>/<name>; its restarts are counted in the totals only.")
			continue
		}
		c.metrics.ServiceRestarts.WithLabelValues(ns, name).Add(float64(sv.Restarts))
		c.metrics.ServiceBackOffSaved.WithLabelValues(ns, name).Add(sv.Saved)
	}
	if rep.OtherServices > 0 {
		c.log.WithFields(logrus.Fields{"pod": run, "services": rep.OtherServices, "reason": "report full"}).
			Infof("A batch weeder run restarted dependents of %d more services than its 4 KiB report could name; their restarts are counted in the totals only.", rep.OtherServices)
	}
}

// savedBackOff is the histogram of the back-off each restart saved. The weeder runs report
// counts per bucket, not each value, which client_golang's Observe cannot take; this
// collector adds them up and exposes them as the histogram they are.
type savedBackOff struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	counts []uint64 // per bucket of reaper.SavedBackOffBuckets, not cumulative; above the last, last
	sum    float64
}

func newSavedBackOff() *savedBackOff {
	return &savedBackOff{
		desc: prometheus.NewDesc("depwatch_coordinator_weeder_backoff_saved_seconds",
			"Crash-loop back-off that the weeder's restarts saved, one observation per restarted pod: how long the kubelet would still have waited before restarting it (from its status), read from each finished weeder run's report. Its sum's rate is the time saved.",
			nil, nil),
		counts: make([]uint64, len(reaper.SavedBackOffBuckets)+1),
	}
}

func (h *savedBackOff) add(r reaper.Report) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, n := range r.SavedCounts {
		h.counts[i] += n
	}
	h.sum += r.SavedSeconds
}

func (h *savedBackOff) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *savedBackOff) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	defer h.mu.Unlock()
	buckets := make(map[float64]uint64, len(reaper.SavedBackOffBuckets))
	var total uint64
	for i, bound := range reaper.SavedBackOffBuckets {
		total += h.counts[i]
		buckets[bound] = total
	}
	total += h.counts[len(h.counts)-1]
	ch <- prometheus.MustNewConstHistogram(h.desc, total, h.sum, buckets)
}
