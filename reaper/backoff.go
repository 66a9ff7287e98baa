package reaper

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/depwatch/depwatch/internal/podstate"
)

// backOffMemory is how long a floor skip is remembered, so the same back-off is logged and
// counted once; the kubelet's longest back-off is 5 minutes.
const backOffMemory = 2 * podstate.KubeletMaxBackOff

// backOffs is what the run knows of its matched pods' crash-loop back-offs: the back-offs it
// left to the kubelet (BACKOFF_FLOOR), each once, and whether it said it cannot read one.
type backOffs struct {
	floorSkips     map[types.UID]time.Time // the pod's back-off end, as skipped
	unreadableSaid bool
}

// saving is what a restart of a matched pod now saves: known is false when the pod is not
// crash-looping or its back-off cannot be read (it is reaped as before, said once per run).
type saving struct {
	known bool
	saved time.Duration // the back-off left, which the kubelet would have waited out
	until time.Time     // when the kubelet restarts it by itself
}

// savingOf reads the pod's back-off at now.
func (r *runner) savingOf(m match, now time.Time) saving {
	b, looping := podstate.PodBackOff(m.pod)
	if !looping {
		return saving{}
	}
	if b.Known {
		return saving{known: true, saved: b.Remaining(now), until: b.RestartAt}
	}
	if !r.backOffs.unreadableSaid { // said once per run
		r.backOffs.unreadableSaid = true
		r.log.WithFields(logrus.Fields{"namespace": m.pod.Namespace, "pod": m.pod.Name, "reason": "backoff-unreadable", "detail": b.Why}).
			Warnf("Cannot tell when the kubelet restarts pod %s/%s by itself (%s): such pods are restarted as before, "+
				"without BACKOFF_FLOOR and without a saved back-off; this is said once per run.", m.pod.Namespace, m.pod.Name, b.Why)
	}
	return saving{}
}

// belowFloor tells whether the kubelet restarts the pod sooner than BACKOFF_FLOOR, so a fresh
// pod would not be Ready sooner: the pod is then left to the kubelet, logged and counted once
// per back-off. It is not remembered as acted on: should the pod crash again, its next,
// longer back-off is judged afresh.
func (r *runner) belowFloor(m match, s saving, now time.Time) bool {
	if !s.known || r.opts.BackOffFloor <= 0 || s.saved >= r.opts.BackOffFloor {
		return false
	}
	maps.DeleteFunc(r.backOffs.floorSkips, func(_ types.UID, until time.Time) bool { return now.Sub(until) > backOffMemory })
	if r.backOffs.floorSkips == nil {
		r.backOffs.floorSkips = map[types.UID]time.Time{}
	}
	if until, seen := r.backOffs.floorSkips[m.pod.UID]; seen && until.Equal(s.until) {
		return true
	}
	r.backOffs.floorSkips[m.pod.UID] = s.until
	r.sum.BackOffSkipped++
	pod := m.pod
	r.log.WithFields(logrus.Fields{
		"namespace": pod.Namespace, "pod": pod.Name, "uid": string(pod.UID), "reasons": m.reasons,
		"action": ActionBackOffSkipped, "reason": "backoff-floor", "backoff_left_seconds": s.saved.Seconds(),
		"backoff_floor": r.opts.BackOffFloor.String(), "kubelet_restart_at": s.until.UTC().Format(time.RFC3339),
	}).Infof("Not restarting pod %s/%s: the kubelet restarts it by itself in %s (at %s), sooner than BACKOFF_FLOOR %s, "+
		"about what a fresh pod takes to be Ready (it matched because %s).",
		pod.Namespace, pod.Name, s.saved.Round(time.Second), s.until.UTC().Format(time.RFC3339), r.opts.BackOffFloor, strings.Join(m.reasons, "; and "))
	return true
}

// savedNote completes a restart's Event and log line with the back-off it saved.
func (s saving) savedNote() string {
	if !s.known {
		return ""
	}
	return fmt.Sprintf(" It saved about %ds of back-off (the kubelet would have restarted it at %s).",
		int64(s.saved.Round(time.Second)/time.Second), s.until.UTC().Format(time.RFC3339))
}
