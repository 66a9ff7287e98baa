//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/depwatch/depwatch/coordinator"
)

// TestSecurityServiceAccountsHaveExactlyTheDocumentedRights: with depwatch installed (the local
// overlay) and the reaper examples' RBAC applied, `kubectl auth can-i --list --as=<sa>` on the
// real API server lists, beyond what every service account may do, exactly the rows of
// rbacTable (docs/security.md) for that account: cluster-wide rows everywhere, a Role's rows
// in its namespace only. Then explicit checks of what must be refused (the coordinator may not
// delete pods, scale, or read Secrets), each next to a right that must be granted, so a check
// that always says "no" cannot pass. It runs in the quiet phase, beside the storm (which
// measures only the coordinator): it removes the examples' RBAC at its end, which the reap
// tests apply and use.
func TestSecurityServiceAccountsHaveExactlyTheDocumentedRights(t *testing.T) {
	quiet(t, "storm")
	ensureCoordinator(t)
	ns := newNamespace(t, "sec-rbac")
	other := newNamespace(t, "sec-rbac-other")

	// examples/reaper-rbac.yaml as it is (service account depwatch/depwatch-reaper).
	rbacFile := filepath.Join(repoRoot, "examples", "reaper-rbac.yaml")
	mustKubectl(t, "apply", "-f", rbacFile)
	t.Cleanup(func() { _, _ = kubectl(t, "delete", "-f", rbacFile, "--ignore-not-found", "--wait=false") })
	// examples/reaper-namespaced.yaml's RBAC (not its Deployment), moved from my-app to ns.
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples", "reaper-namespaced.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rbacDocs []string
	for _, doc := range splitYAML(data) {
		switch kindOf(t, doc) {
		case "ServiceAccount", "Role", "RoleBinding":
			rbacDocs = append(rbacDocs, strings.ReplaceAll(string(doc), "namespace: my-app", "namespace: "+ns))
		}
	}
	if len(rbacDocs) != 3 {
		t.Fatalf("examples/reaper-namespaced.yaml: want a ServiceAccount, a Role and a RoleBinding, found %d of them", len(rbacDocs))
	}
	nsFile := filepath.Join(t.TempDir(), "reaper-namespaced-rbac.yaml")
	if err := os.WriteFile(nsFile, []byte(strings.Join(rbacDocs, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, "apply", "-f", nsFile)

	// What the installation changes from the table: the local overlay's probe Secret name,
	// and the namespaced example's namespace.
	cfg, err := coordinator.Options{ConfigFile: filepath.Join(repoRoot, "manifests/overlays/local/config.yaml")}.LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	localSecret := cfg.Prober.KubeConfigSecretName
	installed := func(g rbacGrant) rbacGrant {
		if g.Account == saProbe && g.Resource == "secrets" && g.Names == probeSecretBase {
			g.Names = localSecret
		}
		if g.Account == saReaperNamespace {
			g.Account = ns + "/depwatch-reaper"
		}
		if g.Where == "my-app" {
			g.Where = ns
		}
		return g
	}

	// Every service account may do some things through the default bindings (discovery,
	// self-reviews): an account bound to nothing shows them.
	baseline := map[string]map[string]bool{}
	for _, n := range []string{ns, other, depwatchNS} {
		baseline[n] = canIList(t, ns+"/nobody", n)
	}

	accounts := []string{saCoordinator, saWeeder, saProbe, saReaper, ns + "/depwatch-reaper"}
	for _, account := range accounts {
		for _, where := range []string{depwatchNS, ns, other} {
			t.Run(strings.ReplaceAll(account, "/", ":")+"/in-"+where, func(t *testing.T) {
				want := map[string]bool{}
				for _, g := range rbacTable {
					g = installed(g)
					if g.Account != account || (g.Where != scopeCluster && g.Where != where) {
						continue
					}
					for _, v := range g.Verbs {
						want[rightString(g.Resource, g.Names, v)] = true
					}
				}
				got := map[string]bool{}
				for r := range canIList(t, account, where) {
					if !baseline[where][r] {
						got[r] = true
					}
				}
				var extra, missing []string
				for r := range got {
					if !want[r] {
						extra = append(extra, r)
					}
				}
				for r := range want {
					if !got[r] {
						missing = append(missing, r)
					}
				}
				sort.Strings(extra)
				sort.Strings(missing)
				if len(extra) > 0 {
					t.Errorf("%s may, in %s, more than docs/security.md says: %v", account, where, extra)
				}
				if len(missing) > 0 {
					t.Errorf("%s may not, in %s, what docs/security.md says it may: %v", account, where, missing)
				}
			})
		}
	}

	// Explicit questions, as an operator would ask them.
	for _, c := range []struct {
		account string
		args    []string // verb resource [flags]
		allowed bool
	}{
		// The coordinator: no pod deletion, no scaling, no Secrets, no pods of its own.
		{saCoordinator, []string{"delete", "pods", "-n", ns}, false},
		{saCoordinator, []string{"delete", "pods", "-n", depwatchNS}, false},
		{saCoordinator, []string{"delete", "pods", "--all-namespaces"}, false},
		{saCoordinator, []string{"create", "pods/eviction", "-n", ns}, false},
		{saCoordinator, []string{"create", "pods", "-n", depwatchNS}, false},
		{saCoordinator, []string{"update", "deployments.apps", "--subresource=scale", "-n", ns}, false},
		{saCoordinator, []string{"patch", "deployments.apps", "--subresource=scale", "-n", ns}, false},
		{saCoordinator, []string{"update", "deployments.apps", "-n", ns}, false},
		{saCoordinator, []string{"patch", "deployments.apps", "-n", ns}, false},
		{saCoordinator, []string{"patch", "statefulsets.apps", "--subresource=scale", "-n", ns}, false},
		{saCoordinator, []string{"get", "secrets", "-n", ns}, false},
		{saCoordinator, []string{"list", "secrets", "-n", ns}, false},
		{saCoordinator, []string{"get", "secrets", "-n", depwatchNS}, false},
		{saCoordinator, []string{"list", "secrets", "--all-namespaces"}, false},
		{saCoordinator, []string{"get", "secret/" + localSecret, "-n", ns}, false},
		{saCoordinator, []string{"create", "jobs.batch", "-n", ns}, false}, // Jobs only in its own namespace
		{saCoordinator, []string{"update", "leases.coordination.k8s.io/other-lease", "-n", depwatchNS}, false},
		// ... while it may do its own work.
		{saCoordinator, []string{"create", "jobs.batch", "-n", depwatchNS}, true},
		{saCoordinator, []string{"list", "pods", "--all-namespaces"}, true},
		{saCoordinator, []string{"update", "leases.coordination.k8s.io/depwatch-coordinator", "-n", depwatchNS}, true},
		// The weeder deletes pods and reads no Secrets, scales nothing.
		{saWeeder, []string{"delete", "pods", "-n", ns}, true},
		{saWeeder, []string{"get", "secrets", "-n", ns}, false},
		{saWeeder, []string{"patch", "deployments.apps", "--subresource=scale", "-n", ns}, false},
		{saWeeder, []string{"create", "jobs.batch", "-n", depwatchNS}, false},
		// The probe scales through the scale subresource and reads one Secret by name.
		{saProbe, []string{"patch", "deployments.apps", "--subresource=scale", "-n", ns}, true},
		{saProbe, []string{"update", "deployments.apps", "--subresource=scale", "-n", ns}, false},
		{saProbe, []string{"get", "secret/" + localSecret, "-n", ns}, true},
		{saProbe, []string{"get", "secret/some-other-secret", "-n", ns}, false},
		{saProbe, []string{"list", "secrets", "-n", ns}, false},
		{saProbe, []string{"delete", "pods", "-n", ns}, false},
		// The namespaced reaper: its namespace only.
		{ns + "/depwatch-reaper", []string{"delete", "pods", "-n", ns}, true},
		{ns + "/depwatch-reaper", []string{"delete", "pods", "-n", other}, false},
		{ns + "/depwatch-reaper", []string{"list", "pods", "--all-namespaces"}, false},
	} {
		name := strings.ReplaceAll(c.account, "/", ":") + "/" + strings.Join(c.args, " ")
		t.Run("can-i/"+name, func(t *testing.T) {
			if got := canI(t, c.account, c.args...); got != c.allowed {
				t.Errorf("kubectl auth can-i %s --as=%s: %v, want %v", strings.Join(c.args, " "), serviceAccountUser(c.account), got, c.allowed)
			}
		})
	}
}

func serviceAccountUser(account string) string {
	ns, name, _ := strings.Cut(account, "/")
	return "system:serviceaccount:" + ns + ":" + name
}

func rightString(resource, name, verb string) string {
	if name == "" {
		name = "*"
	}
	return verb + " " + resource + "/" + name
}

// canIRow is one line of `kubectl auth can-i --list`: Resources, Non-Resource URLs, Resource
// Names, Verbs (the last three as [a b c]).
var canIRow = regexp.MustCompile(`^(\S*)\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s+\[([^\]]*)\]\s*$`)

// canIList returns `kubectl auth can-i --list` for the account in namespace ns as single
// rights ("verb resource/name"; non-resource URLs as "verb url").
func canIList(t *testing.T, account, ns string) map[string]bool {
	t.Helper()
	out := mustKubectl(t, "auth", "can-i", "--list", "--as="+serviceAccountUser(account), "-n", ns)
	rights := map[string]bool{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "Resources") {
		t.Fatalf("kubectl auth can-i --list printed no table:\n%s", out)
	}
	for _, line := range lines[1:] {
		m := canIRow.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("cannot read this line of kubectl auth can-i --list: %q", line)
		}
		resource, urls, names, verbs := m[1], strings.Fields(m[2]), strings.Fields(m[3]), strings.Fields(m[4])
		for _, v := range verbs {
			if resource == "" {
				for _, u := range urls {
					rights[v+" "+u] = true
				}
				continue
			}
			if len(names) == 0 {
				rights[rightString(resource, "", v)] = true
			}
			for _, n := range names {
				rights[rightString(resource, n, v)] = true
			}
		}
	}
	return rights
}

// canI asks `kubectl auth can-i <args> --as=<account>`: exit 0 "yes", exit 1 "no".
func canI(t *testing.T, account string, args ...string) bool {
	t.Helper()
	out, err := kubectl(t, append([]string{"auth", "can-i", "--as=" + serviceAccountUser(account)}, args...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	answer := lines[len(lines)-1] // after any warning kubectl prints first
	switch {
	case err == nil && strings.HasPrefix(answer, "yes"):
		return true
	case err != nil && strings.HasPrefix(answer, "no"):
		return false
	}
	t.Fatalf("kubectl auth can-i %s: unexpected answer (%v):\n%s", strings.Join(args, " "), err, out)
	return false
}
