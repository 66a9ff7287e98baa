package weeder

import (
	"testing"
	"time"

	"github.com/depwatch/depwatch/jobs"
)

func TestConfigReapCooldownReachesTheWeederJob(t *testing.T) {
	svc := "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}\n"
	cases := []struct {
		name, yaml string
		wantEnv    string // the weeder's REAP_COOLDOWN
	}{
		{"absent: the weeder's default", svc, jobs.DefaultWeederReapCooldown.String()},
		{"configured", svc + "reapCooldown: 30s", "30s"},
		{"zero turns the bound off", svc + "reapCooldown: 0s", "0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseConfig(t, tc.yaml)
			for _, armed := range []bool{false, true} {
				spec, err := weederSpec(cfg, "ns/svc", &recordedEdge{trigger: jobs.TriggerReady, at: time.Now()}, armed)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range spec.Env {
					if e.Name == "REAP_COOLDOWN" {
						got = append(got, e.Value)
					}
				}
				if len(got) != 1 || got[0] != tc.wantEnv {
					t.Errorf("armed=%v: REAP_COOLDOWN = %v, want [%s]", armed, got, tc.wantEnv)
				}
			}
		})
	}
}
