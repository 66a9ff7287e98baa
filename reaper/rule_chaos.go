package reaper

import (
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/depwatch/depwatch/internal/envconf"
)

// chaosRule (CHAOS_CHANCE) matches a pod with the given probability.
type chaosRule struct {
	chance float64
	// roll returns a number in [0,1); tests replace it. The default, rand.Float64, is safe for
	// concurrent use.
	roll func() float64
}

func loadChaosRule(e *envconf.Reader) Rule {
	chance, ok := probability(e, "CHAOS_CHANCE")
	if !ok {
		return nil
	}
	return chaosRule{chance: chance, roll: rand.Float64}
}

func (chaosRule) Name() string { return "CHAOS_CHANCE" }

func (r chaosRule) Decide(*corev1.Pod, time.Time) (bool, string) {
	roll := r.roll()
	if roll >= r.chance {
		return false, ""
	}
	return true, fmt.Sprintf("chaos chance %g was hit (rolled %.3f)", r.chance, roll)
}
