package weeder

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator/ctrl"
)

// parseConfig reads a weeder section the way the coordinator's config file holds it (its
// top-level fields) and validates it; the coordinator's own parser is tested in its package.
func parseConfig(t *testing.T, data string) *Config {
	t.Helper()
	cfg := &Config{}
	if err := yaml.UnmarshalStrict([]byte(data), cfg); err != nil {
		t.Fatalf("weeder config: %v", err)
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatalf("weeder config: %v", errs)
	}
	return cfg
}

func newTestMetrics() *Metrics {
	m := NewMetrics(ctrl.NewJobMetrics())
	m.Init()
	return m
}
