package probe

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/sirupsen/logrus"
)

// scaleAll scales every resource in its level's turn: levels ascending, the resources of one
// level concurrently, a level starting when the previous one has finished. When a resource of
// a level fails (an API error, a timeout, a required resource missing), the later levels do
// not run (OutcomeBlocked), as in dependency-watchdog: the order exists because a later level
// is only safe once the earlier one is done (machine-controller-manager must not run while
// kube-controller-manager still marks nodes; cluster-autoscaler must not come up before the
// controllers that serve it). The next probe tries again from level 0. When ctx is
// cancelled, no further level starts and the resources waiting for their initial delay are
// not started. The results are in the order of resources.
func (s *scaler) scaleAll(ctx context.Context, resources []DependentResource) []result {
	results := make([]result, len(resources))
	byLevel := map[int][]int{}
	for i, r := range resources {
		results[i] = result{res: r, outcome: OutcomeNotStarted}
		lv := s.info(r).Level
		byLevel[lv] = append(byLevel[lv], i)
	}
	failedAt, failed := 0, false
	for _, lv := range slices.Sorted(maps.Keys(byLevel)) {
		idx := byLevel[lv]
		if failed {
			for _, i := range idx {
				results[i].outcome = OutcomeBlocked
			}
			s.log.WithFields(logrus.Fields{"namespace": s.namespace, "decision": string(s.direction), "scale_level": lv, "action": string(OutcomeBlocked),
				"reason": fmt.Sprintf("level %d failed", failedAt)}).
				Warnf("Level %d (%d resources) is not started because level %d failed; the next probe starts again from the first level.", lv, len(idx), failedAt)
			continue
		}
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
		for _, i := range idx {
			if results[i].outcome.failure() {
				failedAt, failed = lv, true
			}
		}
	}
	return results
}
