package weeder

import (
	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/reaper"
)

// A batch weeder Job serves many services with one client: sized for one service, its
// hundredth service's delete would wait behind the first ninety-nine (client-go's 5 requests
// a second), so a storm would recover at the rate limiter's pace, not at the floor. Its limits
// grow with its services, within a cap the operator sets (--weeder-batch-max-qps,
// --weeder-batch-max-burst), so that a batch never becomes the load on the API server.
const (
	// Per service of a batch: its return costs a delete or two and their Events; the burst
	// lets every service of a storm that comes back at once be served in the same second.
	QPSPerService         = 2
	BurstPerService       = 5
	EventsQPSPerService   = 1
	EventsBurstPerService = 2

	DefaultBatchMaxQPS   = 200
	DefaultBatchMaxBurst = 500
)

// BatchClientLimits are the API rate limits of a batch weeder Job covering services: per
// service × services, never below the run's own defaults (one service's) and never above the
// cap, which applies to the Events' client too.
func BatchClientLimits(services int, b Batching) reaper.ClientLimits {
	maxQPS, maxBurst := b.MaxQPS, b.MaxBurst
	if maxQPS <= 0 {
		maxQPS = DefaultBatchMaxQPS
	}
	if maxBurst <= 0 {
		maxBurst = DefaultBatchMaxBurst
	}
	size := func(perQPS float64, perBurst int, floor apilimit.Limit) apilimit.Limit {
		return apilimit.Limit{
			QPS:   min(maxQPS, max(floor.QPS, perQPS*float64(services))),
			Burst: min(maxBurst, max(floor.Burst, perBurst*services)),
		}
	}
	def := reaper.DefaultClientLimits
	return reaper.ClientLimits{
		API:    size(QPSPerService, BurstPerService, def.API),
		Events: size(EventsQPSPerService, EventsBurstPerService, def.Events),
	}
}
