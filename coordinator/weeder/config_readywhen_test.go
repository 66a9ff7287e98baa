package weeder

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/jobs"
)

// parseConfigUnchecked reads a weeder config without validating it.
func parseConfigUnchecked(t *testing.T, data string) *Config {
	t.Helper()
	cfg := &Config{}
	if err := yaml.UnmarshalStrict([]byte(data), cfg); err != nil {
		t.Fatalf("weeder config: %v", err)
	}
	return cfg
}

// envOf is the values of the Job's variable name.
func envOf(spec jobs.Spec, name string) []string {
	var got []string
	for _, e := range spec.Env {
		if e.Name == name {
			got = append(got, e.Value)
		}
	}
	return got
}

// TestConfigReadyWhenAndFloorReachTheWeederJob: a service's readyWhen becomes its weeder's
// READY_WHEN (absent for the default, any), backOffFloor its BACKOFF_FLOOR.
func TestConfigReadyWhenAndFloorReachTheWeederJob(t *testing.T) {
	cases := []struct {
		name, entry, top string
		readyWhen        []string
		floor            string
	}{
		{"defaults", "", "", nil, "2s"},
		{"all", ", readyWhen: all", "", []string{"all"}, "2s"},
		{"a count", ", readyWhen: 2", "backOffFloor: 5s\n", []string{"2"}, "5s"},
		{"any, written", ", readyWhen: any", "backOffFloor: 0s\n", nil, "0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			yaml := "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]" + tc.entry + "}}\n" + tc.top
			cfg := parseConfig(t, yaml)
			spec, err := weederSpec(cfg, "ns/svc", &recordedEdge{trigger: jobs.TriggerReady, at: time.Now()}, true)
			if err != nil {
				t.Fatal(err)
			}
			if got := envOf(spec, "READY_WHEN"); strings.Join(got, ",") != strings.Join(tc.readyWhen, ",") {
				t.Errorf("READY_WHEN = %v, want %v", got, tc.readyWhen)
			}
			if got := envOf(spec, "BACKOFF_FLOOR"); len(got) != 1 || got[0] != tc.floor {
				t.Errorf("BACKOFF_FLOOR = %v, want [%s]", got, tc.floor)
			}
		})
	}
}

// TestConfigRefusesABadReadyWhen: the field path and the value are named.
func TestConfigRefusesABadReadyWhen(t *testing.T) {
	for value, want := range map[string]string{
		"0":    "servicesAndDependantSelectors.svc.readyWhen: 0: must be",
		"most": "servicesAndDependantSelectors.svc.readyWhen: most: must be",
		"-2":   "servicesAndDependantSelectors.svc.readyWhen: -2: must be",
	} {
		cfg := parseConfigUnchecked(t, "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}], readyWhen: "+value+"}}\n")
		if errs := cfg.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("readyWhen %s: errors %v, want one containing %q", value, errs, want)
		}
	}
	cfg := parseConfigUnchecked(t, "useEndpoints: true\nservicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}], readyWhen: all}}\n")
	if errs := cfg.Validate(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "readyWhen: all: needs EndpointSlices") {
		t.Errorf("readyWhen all with useEndpoints: errors %v", errs)
	}
}
