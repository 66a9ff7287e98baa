package coordinator

import (
	"testing"

	"github.com/depwatch/depwatch/jobs"
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
		{name: "weeder command, POD_NAMESPACE", role: RoleWeeder, podNamespace: "seed-system", saNamespace: "garden", want: "seed-system"},
		{name: "prober command, the projected namespace file alone", role: RoleProber, saNamespace: "garden\n", want: "garden"},
		{name: "weeder command, nothing known: dependency-watchdog's default", role: RoleWeeder, want: DWDLeaseNamespace},
		{name: "prober command, nothing known: dependency-watchdog's default", role: RoleProber, want: DWDLeaseNamespace},
		{name: "coordinator, the namespace file", role: RoleCoordinator, saNamespace: "ops", want: "ops"},
		{name: "coordinator, nothing known: depwatch's default", role: RoleCoordinator, want: DefaultNamespace},
		{name: "blank values count as unknown", role: RoleProber, podNamespace: " ", saNamespace: "\n", want: DWDLeaseNamespace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := homeNamespace(tc.role, tc.podNamespace, tc.saNamespace); got != tc.want {
				t.Errorf("home namespace %q, want %q", got, tc.want)
			}
		})
	}
}

// The runs' namespace and the Lease's are HomeNamespace unless their own setting names
// another: jobTemplate.namespace for the runs, --leader-election-namespace for the Lease.
func TestRunsAndLeaseFollowTheirOwnSettingElseTheHomeNamespace(t *testing.T) {
	env := func(k string) (string, bool) {
		return map[string]string{"POD_NAMESPACE": "seed-system"}[k], k == "POD_NAMESPACE"
	}
	for _, role := range []Role{RoleCoordinator, RoleWeeder, RoleProber} {
		o := Options{Role: role}
		lease, runs := o.LeaseNamespace(env), RunNamespace(role, jobs.Template{}, env)
		inProcess := InProcessTemplate(role, jobs.Template{}, env).Namespace
		if lease != "seed-system" || runs != "seed-system" || inProcess != "seed-system" {
			t.Errorf("%s: Lease in %q, runs in %q (in-process %q); want all in the pod's namespace", role.Command(), lease, runs, inProcess)
		}
		o.LeaderElectionNamespace = "leases"
		if got := o.LeaseNamespace(env); got != "leases" {
			t.Errorf("%s: Lease in %q with --leader-election-namespace=leases", role.Command(), got)
		}
		if got := RunNamespace(role, jobs.Template{Namespace: "runs"}, env); got != "runs" {
			t.Errorf("%s: runs in %q with jobTemplate.namespace runs", role.Command(), got)
		}
	}
}
