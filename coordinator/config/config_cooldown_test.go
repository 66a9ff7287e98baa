package config

import (
	"strings"
	"testing"

	"github.com/depwatch/depwatch/jobs"
)

// The weeder Job side (REAP_COOLDOWN in its env) is proven in package weeder.
func TestConfigReapCooldownIsReadAndValidated(t *testing.T) {
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
		{"not a duration", svc + "reapCooldown: a minute", "", `reapCooldown="a minute": must be a Go duration`},
		{"a bare number", svc + "reapCooldown: 60", "", "reapCooldown=60: must be a Go duration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v\nwant it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Cooldown(); got.String() != tc.wantEnv {
				t.Errorf("Cooldown() = %v, want %s", got, tc.wantEnv)
			}
		})
	}
}
