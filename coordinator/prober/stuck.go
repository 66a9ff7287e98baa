package prober

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/depwatch/depwatch/jobs"
)

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
	if active != nil && now.Sub(active.Created) >= stuckAfter(p.current().cfg) {
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
