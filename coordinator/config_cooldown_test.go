package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/depwatch/depwatch/jobs"
)

func TestConfigReapCooldownIsReadValidatedAndReachesTheWeederJob(t *testing.T) {
	svc := "servicesAndDependantSelectors: {svc: {podSelectors: [{matchLabels: {app: x}}]}}\n"
	cases := []struct {
		name, yaml string
		wantEnv    string // the weeder's REAP_COOLDOWN
		wantErr    string
	}{
		{"absent: the weeder's default", svc, jobs.DefaultWeederReapCooldown.String(), ""},
		{"configured", svc + "reapCooldown: 30s", "30s", ""},
		{"zero turns the bound off", svc + "reapCooldown: 0s", "0s", ""},
		{"negative", svc + "reapCooldown: -1s", "", "reapCooldown: -1s: must not be negative"},
		{"not a duration", svc + "reapCooldown: a minute", "", "reapCooldown: "},
		{"a bare number", svc + "reapCooldown: 60", "", "reapCooldown: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v\nwant it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			l := &live{cfg: cfg}
			for _, armed := range []bool{false, true} {
				spec, err := weederSpec(l, "ns/svc", &pendingLaunch{reason: jobs.TriggerReady, at: time.Now()}, armed)
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
