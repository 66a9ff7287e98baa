package probe

import (
	"testing"
	"time"

	"github.com/depwatch/depwatch/internal/apilimit"
)

// A shard's Job may send each of its clients two requests per namespace per probeInterval
// (one per probe, doubled for the jitter and a scaling), so a shard of any size probes every
// namespace every interval; a small one keeps client-go's default.
func TestShardClientLimitGrowsWithTheShard(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namespaces int
		interval   time.Duration
		want       apilimit.Limit
	}{
		{"one namespace: the default", 1, 10 * time.Second, DefaultClientLimit},
		{"25 every 10s: still the default", 25, 10 * time.Second, apilimit.Limit{QPS: 5, Burst: 25}},
		{"125 every 10s (the default shard)", 125, 10 * time.Second, apilimit.Limit{QPS: 25, Burst: 125}},
		{"175 every 10s (the largest)", 175, 10 * time.Second, apilimit.Limit{QPS: 35, Burst: 175}},
		{"125 every minute", 125, time.Minute, apilimit.Limit{QPS: 5, Burst: 125}},
		{"100 probed once each", 100, 0, apilimit.Limit{QPS: 100, Burst: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShardClientLimit(tc.namespaces, tc.interval); got != tc.want {
				t.Errorf("ShardClientLimit(%d, %s) = %v, want %v", tc.namespaces, tc.interval, got, tc.want)
			}
		})
	}
}
