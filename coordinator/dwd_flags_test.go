package coordinator

import (
	"os"
	"strings"
	"testing"
)

// dwdFlagDefaults are dependency-watchdog v1.7.0's flags that the coordinator has too, with
// dependency-watchdog's defaults (cmd/command.go: SetSharedOpts, bindLeaderElectionFlags;
// client-go's rest.DefaultQPS and DefaultBurst), as the flag package prints them.
var dwdFlagDefaults = map[string]string{
	"config-file":                 "",
	"concurrent-reconciles":       "1",
	"kube-api-qps":                "5",
	"kube-api-burst":              "10",
	"metrics-bind-addr":           ":9643",
	"health-bind-addr":            ":9644",
	"enable-leader-election":      "false",
	"leader-election-namespace":   "garden",
	"leader-elect-lease-duration": "15s",
	"leader-elect-renew-deadline": "10s",
	"leader-elect-retry-period":   "2s",
}

// deliberateDefaults are the coordinator's defaults that differ from dependency-watchdog's,
// each on purpose; docs/migrating-from-dependency-watchdog.md lists them with both values.
var deliberateDefaults = map[string]string{
	"kube-api-qps":              "20",
	"kube-api-burst":            "100",
	"leader-election-namespace": "", // the coordinator's own namespace
}

// dependency-watchdog's flags keep their defaults in the coordinator except where the
// migration guide says otherwise, and the guide says it for every one that differs, with
// both values.
func TestDependencyWatchdogFlagDefaultsDifferOnlyWhereTheMigrationGuideSays(t *testing.T) {
	guide, err := os.ReadFile("../docs/migrating-from-dependency-watchdog.md")
	if err != nil {
		t.Fatal(err)
	}
	var o Options
	fs := newFlagSet(&o)
	for name, dwd := range dwdFlagDefaults {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("--%s: dependency-watchdog's flag is not a coordinator flag", name)
			continue
		}
		want, deliberate := deliberateDefaults[name]
		if !deliberate {
			want = dwd
		}
		if f.DefValue != want {
			t.Errorf("--%s defaults to %q; dependency-watchdog's is %q (a deliberate difference belongs in deliberateDefaults and the migration guide)", name, f.DefValue, dwd)
		}
		if !deliberate {
			continue
		}
		row := guideRow(string(guide), "`--"+name+"`")
		if row == "" || !strings.Contains(row, dwd) {
			t.Errorf("the migration guide has no row for --%s saying dependency-watchdog's default %q:\n%s", name, dwd, row)
		}
		if f.DefValue != "" && !strings.Contains(row, f.DefValue) {
			t.Errorf("the migration guide's row for --%s does not say depwatch's default %q:\n%s", name, f.DefValue, row)
		}
	}
}

// guideRow is the table row of the guide whose first column is flag.
func guideRow(guide, flagName string) string {
	for line := range strings.Lines(guide) {
		if strings.HasPrefix(strings.TrimSpace(line), "| "+flagName+" |") {
			return line
		}
	}
	return ""
}
