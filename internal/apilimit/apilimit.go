// Package apilimit is the client-side rate limit of a run's API requests as the engines'
// environment carries it (reaper: KUBE_API_QPS / KUBE_API_BURST and the Events' own pair;
// probe: KUBE_API_QPS / KUBE_API_BURST). client-go's default, 5 requests a second with a
// burst of 10, fits a run for one service; a run for a hundred services needs a client sized
// to its work, or its hundredth service waits behind the first ninety-nine (the coordinator
// sizes a batch weeder Job's limits by its number of services).
package apilimit

import (
	"fmt"
	"math"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/depwatch/depwatch/internal/envconf"
)

// Limit is a rate limit: QPS requests a second, bursts of Burst. The zero value is unset:
// Or gives the default then.
type Limit struct {
	QPS   float64
	Burst int
}

// Default is client-go's own default (what a client that sets nothing gets).
var Default = Limit{QPS: 5, Burst: 10}

// IsZero says whether the limit is unset.
func (l Limit) IsZero() bool { return l == Limit{} }

// Or fills what l leaves unset from def.
func (l Limit) Or(def Limit) Limit {
	if l.QPS == 0 {
		l.QPS = def.QPS
	}
	if l.Burst == 0 {
		l.Burst = def.Burst
	}
	return l
}

// Apply returns a copy of cfg with the limit (an unset half keeps cfg's): its clients each get
// a bucket of their own, unless cfg has a RateLimiter, which they share instead (Shared).
func (l Limit) Apply(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	if l.QPS > 0 {
		out.QPS = float32(l.QPS)
	}
	if l.Burst > 0 {
		out.Burst = l.Burst
	}
	return out
}

// Shared returns a copy of cfg with one token bucket of l (unset halves: Default) as its
// RateLimiter. client-go gives every client built from a config that has a RateLimiter (or
// from a copy of it: rest.CopyConfig keeps it) that very limiter instead of a bucket of its
// own, so every client built from the copy takes its requests from one budget together: the
// coordinator's controller and every run it carries out in its process, as one client's
// limiter bounds dependency-watchdog's.
func (l Limit) Shared(cfg *rest.Config) *rest.Config {
	l = l.Or(Default)
	out := rest.CopyConfig(cfg)
	out.QPS, out.Burst = float32(l.QPS), l.Burst
	out.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(float32(l.QPS), l.Burst)
	return out
}

func (l Limit) String() string {
	return fmt.Sprintf("%s/s burst %d", envconf.FormatFloat(l.QPS), l.Burst)
}

// maxQPS bounds a QPS setting: far above what any API server serves one client, and small
// enough that client-go's token bucket (float32) keeps it exact enough.
const maxQPS = 100000

// Read reads the pair as it is set (unset variables stay zero: the run applies its default,
// and the settings' writer and reader agree on what was written). Problems are recorded in r.
func Read(r *envconf.Reader, qpsName, burstName string) Limit {
	var l Limit
	if v, ok := r.Lookup(qpsName); ok {
		f, ok := envconf.Float(v)
		if !ok || f <= 0 || f > maxQPS {
			r.Fail(qpsName, v, "must be a number of requests a second, greater than 0 and at most %d", maxQPS)
		} else {
			l.QPS = f
		}
	}
	if v, ok := r.Lookup(burstName); ok {
		n, err := envconf.Int(v)
		if err != nil || n < 1 || n > maxQPS {
			r.Fail(burstName, v, "must be an integer from 1 to %d (requests sent at once before %s applies)", maxQPS, qpsName)
		} else {
			l.Burst = n
		}
	}
	return l
}

// Write sets what l sets; Read reads it back.
func (l Limit) Write(w *envconf.Writer, qpsName, burstName string) {
	if l.QPS > 0 && !math.IsInf(l.QPS, 0) {
		w.Set(qpsName, envconf.FormatFloat(l.QPS))
	}
	if l.Burst > 0 {
		w.Set(burstName, envconf.FormatInt(l.Burst))
	}
}
