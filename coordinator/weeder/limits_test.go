package weeder

import (
	"testing"

	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/reaper"
)

func TestBatchClientLimitsGrowWithTheServicesWithinTheCap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		services int
		b        Batching
		want     reaper.ClientLimits
	}{
		{"a small batch keeps a lone weeder's limits", 2, DefaultBatching(),
			reaper.ClientLimits{API: apilimit.Limit{QPS: 5, Burst: 10}, Events: apilimit.Limit{QPS: 5, Burst: 10}}},
		{"ten services: per service × services", 10, DefaultBatching(),
			reaper.ClientLimits{API: apilimit.Limit{QPS: 20, Burst: 50}, Events: apilimit.Limit{QPS: 10, Burst: 20}}},
		{"a full batch of 100", 100, DefaultBatching(),
			reaper.ClientLimits{API: apilimit.Limit{QPS: 200, Burst: 500}, Events: apilimit.Limit{QPS: 100, Burst: 200}}},
		{"500 services stop at the cap", 500, DefaultBatching(),
			reaper.ClientLimits{API: apilimit.Limit{QPS: 200, Burst: 500}, Events: apilimit.Limit{QPS: 200, Burst: 500}}},
		{"the operator's lower cap wins", 100, Batching{MaxQPS: 50, MaxBurst: 100},
			reaper.ClientLimits{API: apilimit.Limit{QPS: 50, Burst: 100}, Events: apilimit.Limit{QPS: 50, Burst: 100}}},
		{"an unset cap is the default cap", 1000, Batching{},
			reaper.ClientLimits{API: apilimit.Limit{QPS: 200, Burst: 500}, Events: apilimit.Limit{QPS: 200, Burst: 500}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BatchClientLimits(tc.services, tc.b); got != tc.want {
				t.Errorf("BatchClientLimits(%d) = %+v, want %+v", tc.services, got, tc.want)
			}
		})
	}
}
