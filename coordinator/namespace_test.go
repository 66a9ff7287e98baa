package coordinator

import (
	"testing"

	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/jobs"
)

// The runs' namespace and the Lease's are roles.HomeNamespace unless their own setting names
// another: jobTemplate.namespace for the runs, --leader-election-namespace for the Lease.
func TestRunsAndLeaseFollowTheirOwnSettingElseTheHomeNamespace(t *testing.T) {
	env := func(k string) (string, bool) {
		return map[string]string{"POD_NAMESPACE": "seed-system"}[k], k == "POD_NAMESPACE"
	}
	for _, role := range []roles.Role{roles.Coordinator, roles.Weeder, roles.Prober} {
		o := Options{Role: role}
		lease, runs := o.LeaseNamespace(env), roles.RunNamespace(role, jobs.Template{}, env)
		inProcess := roles.InProcessTemplate(role, jobs.Template{}, env).Namespace
		if lease != "seed-system" || runs != "seed-system" || inProcess != "seed-system" {
			t.Errorf("%s: Lease in %q, runs in %q (in-process %q); want all in the pod's namespace", role.Command(), lease, runs, inProcess)
		}
		o.LeaderElectionNamespace = "leases"
		if got := o.LeaseNamespace(env); got != "leases" {
			t.Errorf("%s: Lease in %q with --leader-election-namespace=leases", role.Command(), got)
		}
		if got := roles.RunNamespace(role, jobs.Template{Namespace: "runs"}, env); got != "runs" {
			t.Errorf("%s: runs in %q with jobTemplate.namespace runs", role.Command(), got)
		}
	}
}
