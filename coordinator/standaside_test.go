package coordinator

import (
	"strings"
	"testing"

	"github.com/depwatch/depwatch/coordinator/config"
	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/coordinator/roles"
)

// The prober stands aside for dependency-watchdog's prober Lease in garden, except where the
// process is dependency-watchdog's prober in its place: there the Lease it would stand aside
// for is the one it elects through, and it never does.
func TestProberStandsAsideForDependencyWatchdogsLeaseButNeverItsOwn(t *testing.T) {
	cfg, err := config.Parse([]byte("prober:\n" + indentLines(gardenletProberConfig)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		opts   Options
		want   prober.LeaseRef
		itself bool // the Lease is the one the process elects through
		says   string
	}{
		{name: "the coordinator, elected", opts: Options{EnableLeaderElection: true, LeaderElectionNamespace: "depwatch"},
			want: prober.LeaseRef{Namespace: "garden", Name: roles.ProberLeaseName}, says: "Probes nothing while dependency-watchdog's prober holds its Lease garden/dwd-prober-leader-election"},
		{name: "the coordinator, alone", opts: Options{},
			want: prober.LeaseRef{Namespace: "garden", Name: roles.ProberLeaseName}, says: "Probes nothing while"},
		{name: "dependency-watchdog prober, as gardenlet starts it", opts: Options{Role: roles.Prober, EnableLeaderElection: true, LeaderElectionNamespace: "garden"},
			want: prober.LeaseRef{Namespace: "garden", Name: roles.ProberLeaseName}, itself: true, says: "Elects through dependency-watchdog's prober Lease garden/dwd-prober-leader-election itself"},
		{name: "dependency-watchdog prober in another namespace", opts: Options{Role: roles.Prober, EnableLeaderElection: true, LeaderElectionNamespace: "dwd-home"},
			want: prober.LeaseRef{Namespace: "dwd-home", Name: roles.ProberLeaseName}, itself: true, says: "itself"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dwdNS, own, self := proberLeases(tt.opts, func(string) (string, bool) { return "", false })
			got, on := cfg.Prober.StandAsideLease(dwdNS)
			if got != tt.want || !on {
				t.Errorf("stands aside for %s (on %t), want %s", got, on, tt.want)
			}
			if itself := own != nil && *own == got; itself != tt.itself {
				t.Errorf("the Lease is its own: %t, want %t (own %v)", itself, tt.itself, own)
			}
			if tt.opts.EnableLeaderElection && (self == nil || self.Kind != "Lease" || self.Name != tt.opts.Lease()) {
				t.Errorf("Events go to %v, want its Lease %s", self, tt.opts.Lease())
			}
			if s := standAsideSummary(tt.opts, cfg.Prober); !strings.Contains(s, tt.says) {
				t.Errorf("--check-config says %q, want %q in it", s, tt.says)
			}
		})
	}
}

func indentLines(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString("  " + line)
	}
	return b.String()
}
