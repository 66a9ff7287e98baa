package roles

import (
	"testing"
)

// One namespace rule for the runs and the Lease, under every command: the process's own
// namespace (the pod's, else its service account's, as gardener-resource-manager projects it
// with the token), else the command's default, dependency-watchdog's garden under its
// commands and depwatch under the coordinator.
func TestRunsAndLeaseShareOneHomeNamespaceUnderEveryCommand(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		role                      Role
		podNamespace, saNamespace string
		want                      string
	}{
		{name: "weeder command, POD_NAMESPACE", role: Weeder, podNamespace: "seed-system", saNamespace: "garden", want: "seed-system"},
		{name: "prober command, the projected namespace file alone", role: Prober, saNamespace: "garden\n", want: "garden"},
		{name: "weeder command, nothing known: dependency-watchdog's default", role: Weeder, want: DWDLeaseNamespace},
		{name: "prober command, nothing known: dependency-watchdog's default", role: Prober, want: DWDLeaseNamespace},
		{name: "coordinator, the namespace file", role: Coordinator, saNamespace: "ops", want: "ops"},
		{name: "coordinator, nothing known: depwatch's default", role: Coordinator, want: DefaultNamespace},
		{name: "blank values count as unknown", role: Prober, podNamespace: " ", saNamespace: "\n", want: DWDLeaseNamespace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := homeNamespace(tc.role, tc.podNamespace, tc.saNamespace); got != tc.want {
				t.Errorf("home namespace %q, want %q", got, tc.want)
			}
		})
	}
}
