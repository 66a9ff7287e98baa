package ctrl

import (
	"maps"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/test/upstream"
)

// The fields whose misspelling is forgiven (a warning, as dependency-watchdog would ignore
// it) are exactly dependency-watchdog's own, as its types name them: the top-level fields of
// its weeder and prober configs and a service's podSelectors (dependentResourceInfos is
// parsed by the probe's own lenient parser, below this policy).
func TestDependencyWatchdogFieldsAreItsOwn(t *testing.T) {
	var weeder struct {
		Services map[string]map[string]any `json:"servicesAndDependantSelectors"`
	}
	var weederTop, proberTop map[string]any
	for _, d := range []struct {
		data []byte
		into any
	}{{upstream.WeederConfig(), &weeder}, {upstream.WeederConfig(), &weederTop}, {upstream.ProberConfig(), &proberTop}} {
		if err := yaml.Unmarshal(d.data, d.into); err != nil {
			t.Fatal(err)
		}
	}
	dwd := map[string]bool{}
	for _, m := range append([]map[string]any{weederTop, proberTop}, slices.Collect(maps.Values(weeder.Services))...) {
		for k := range m {
			dwd[k] = true
		}
	}
	if got, want := slices.Sorted(maps.Keys(dependencyWatchdogFields)), slices.Sorted(maps.Keys(dwd)); !slices.Equal(got, want) {
		t.Errorf("dependencyWatchdogFields = %v, dependency-watchdog %s's fields are %v", got, upstream.DependencyWatchdogVersion, want)
	}
}
