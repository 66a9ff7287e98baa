package probe

import (
	"context"
	"slices"
	"sync"

	"github.com/sirupsen/logrus"
)

// scaleAll scales every resource in its level's turn: levels ascending, the resources of one
// level concurrently, a level starting when the previous one has finished (whatever its
// outcome: a failure in one level never keeps the others from doing what they can). When ctx
// is cancelled, no further level starts and the resources waiting for their initial delay are
// not started. The results are in the order of resources.
func (s *scaler) scaleAll(ctx context.Context, resources []DependentResource) []result {
	results := make([]result, len(resources))
	byLevel := map[int][]int{}
	for i, r := range resources {
		results[i] = result{res: r, outcome: OutcomeNotStarted}
		lv := s.info(r).Level
		byLevel[lv] = append(byLevel[lv], i)
	}
	levels := make([]int, 0, len(byLevel))
	for lv := range byLevel {
		levels = append(levels, lv)
	}
	slices.Sort(levels)

	for _, lv := range levels {
		idx := byLevel[lv]
		if ctx.Err() != nil {
			s.log.WithFields(logrus.Fields{"namespace": s.namespace, "decision": string(s.direction), "scale_level": lv, "action": string(OutcomeNotStarted)}).
				Infof("The run is stopping: level %d (%d resources) is not started.", lv, len(idx))
			continue
		}
		s.log.WithFields(logrus.Fields{"namespace": s.namespace, "decision": string(s.direction), "scale_level": lv, "resources": len(idx)}).
			Debugf("Level %d: %d resources.", lv, len(idx))
		var wg sync.WaitGroup
		for _, i := range idx {
			wg.Go(func() {
				results[i].outcome = s.one(ctx, resources[i])
			})
		}
		wg.Wait()
	}
	return results
}
