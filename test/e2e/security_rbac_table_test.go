package e2e

// This file has no build tag: its tests run with the unit tests (go test ./...) and need no
// cluster. It holds the one table of depwatch's RBAC rights. docs/security.md shows it (checked
// here, so the doc cannot drift), the RBAC manifests must grant exactly it (checked here by
// reading the YAML), and security_rbac_test.go (e2e) checks that a real API server grants
// exactly it to each service account.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// rbacGrant is one row of the rights table.
type rbacGrant struct {
	Account  string // namespace/name of the service account
	Where    string // scopeCluster (ClusterRole + ClusterRoleBinding) or the namespace of a Role
	Resource string // as `kubectl auth can-i --list` prints it: resource[.group][/subresource]
	Names    string // the one resourceName the row is limited to; "" = every object
	Verbs    []string
	Why      string // the calls in the code that need it
}

const scopeCluster = "cluster"

// Service accounts (namespace/name) as installed by manifests/ and the reaper examples.
const (
	saCoordinator     = "depwatch/depwatch-coordinator"
	saWeeder          = "depwatch/depwatch-weeder"
	saProbe           = "depwatch/depwatch-probe"
	saReaper          = "depwatch/depwatch-reaper"
	saReaperNamespace = "my-app/depwatch-reaper"
	// probeSecretBase is the base prober config's kubeConfigSecretName (the local overlay
	// replaces it with its own).
	probeSecretBase = "shoot-access-dependency-watchdog-probe"
)

// rbacTable is every right depwatch's RBAC grants. Nothing else is granted beyond what every
// authenticated client has (discovery, self-reviews).
var rbacTable = []rbacGrant{
	{saCoordinator, scopeCluster, "endpointslices.discovery.k8s.io", "", []string{"list", "watch"},
		"informer on the configured services' EndpointSlices (`coordinator/weeder/endpoints.go`)"},
	{saCoordinator, scopeCluster, "endpoints", "", []string{"list", "watch"},
		"the same on legacy Endpoints with `useEndpoints` (`coordinator/weeder/endpoints.go`)"},
	{saCoordinator, scopeCluster, "services", "", []string{"get"},
		"is a service that went down being deleted (`coordinator/weeder/sync.go`: `serviceGoing`)"},
	{saCoordinator, scopeCluster, "namespaces", "", []string{"get", "list", "watch"},
		"namespace selectors of the weeder and the prober (informers), is a namespace being deleted (get)"},
	{saCoordinator, scopeCluster, "pods", "", []string{"list", "watch"},
		"catch-up: informers on the configured dependents' pods, filtered by their selectors (`coordinator/weeder/caches.go`); a list of an annotation's dependents on a catch-up edge (`coordinator/weeder/caches.go`)"},
	{saCoordinator, scopeCluster, "deployments.apps", "", []string{"list", "watch"},
		"the `depwatch.io/depends-on` annotation: an informer on the workloads, cut down to the annotation and their selector (`coordinator/weeder/dependson.go`)"},
	{saCoordinator, scopeCluster, "statefulsets.apps", "", []string{"list", "watch"},
		"the `depwatch.io/depends-on` annotation: an informer on the workloads, cut down to the annotation and their selector (`coordinator/weeder/dependson.go`)"},
	{saCoordinator, scopeCluster, "daemonsets.apps", "", []string{"list", "watch"},
		"the `depwatch.io/depends-on` annotation: an informer on the workloads, cut down to the annotation and their selector (`coordinator/weeder/dependson.go`)"},
	{saCoordinator, scopeCluster, "clusters.extensions.gardener.cloud", "", []string{"list", "watch"},
		"prober: informer on Gardener's Cluster resources, when the kind is installed (`coordinator/prober/clusters.go`)"},
	{saCoordinator, scopeCluster, "leases.coordination.k8s.io", "dwd-prober-leader-election", []string{"get", "list", "watch"},
		"prober: stand aside while dependency-watchdog's prober holds its Lease; an informer on that one Lease by name (`coordinator/prober/standaside_watch.go`)"},
	{saCoordinator, scopeCluster, "events", "", []string{"create", "patch"},
		"client-go's event recorder (WeederStarted, InvalidDependsOn on workloads, leader election); it patches repeated Events"},
	{saCoordinator, "depwatch", "pods", "", []string{"get", "watch"},
		"its own pod for the Jobs' image (`ResolveTemplate`); one informer on the weeder and probe Jobs' pods (their reports, and why a Job has not started), from the Job executor's shared informer factory (`jobs/executor.go`)"},
	{saCoordinator, "depwatch", "jobs.batch", "", []string{"create", "delete", "get", "list", "watch"},
		"weeder and probe Jobs (`jobs/executor.go`: Launch, Delete; one informer on the Jobs for both controllers, from the same shared factory)"},
	{saCoordinator, "depwatch", "configmaps", "", []string{"create", "delete", "list", "update", "watch"},
		"each probe shard's membership ConfigMap, which its running Job follows (`jobs/membership.go`, its informer from the same shared factory); and `depwatch-scale-targets`, the parameters of the admission policy `depwatch-probe-targets`: the prober config's dependents, listed by name and added to the names there (create, update; never deleted) each time it takes the lead (`jobs/scaletargets.go`)"},
	{saCoordinator, "depwatch", "leases.coordination.k8s.io", "", []string{"create"},
		"leader election: the first replica creates the Lease"},
	{saCoordinator, "depwatch", "leases.coordination.k8s.io", "depwatch-coordinator", []string{"get", "update"},
		"leader election: read and renew its own Lease, and no other"},
	{saCoordinator, "depwatch", "networkpolicies.networking.k8s.io", "depwatch-jobs-apiserver", []string{"create", "patch"},
		"`--job-egress-policy`: the Jobs' egress to the API server's addresses, written by server-side apply, which is authorized as a create of that name when the policy does not exist yet (`coordinator/egress`)"},

	{saWeeder, scopeCluster, "pods", "", []string{"delete", "list", "watch"},
		"find crash-looping dependents (`reaper/list.go`, WATCH informers in `reaper/batch_caches.go`) and delete them (`reaper/act.go`); deletes of crash-looping pods only, by the admission policy `depwatch-weeder-deletes`, and no evictions"},
	{saWeeder, scopeCluster, "endpointslices.discovery.k8s.io", "", []string{"list", "watch"},
		"START_WHEN_READY: a weeder reaps only while its service is Ready (`reaper/batch_caches.go`)"},
	{saWeeder, scopeCluster, "events", "", []string{"create"},
		"Reaped / ReapSkipped Events, created once each (`reaper/act.go`)"},

	{saProbe, scopeCluster, "secrets", probeSecretBase, []string{"get"},
		"the shoot kubeconfig, by the name `prober.kubeConfigSecretName` gives (`probe/shoot.go`); no other Secret"},
	{saProbe, scopeCluster, "deployments.apps", "", []string{"get", "patch"},
		"dependents: readiness, the replicas / meltdown annotations, and their replicas (a merge patch of `spec.replicas` on the object itself, `probe/scale.go` setReplicas, dynamic client); only the config's dependents, only to 0 and back to the stored count, by the admission policies `depwatch-probe-scales` and `depwatch-probe-targets`"},
	{saProbe, scopeCluster, "deployments.apps/scale", "", []string{"get", "patch"},
		"dependents: their replicas read through the scale subresource (`probe/scale.go`); written there only for kinds outside `apps` (for a Deployment or StatefulSet `depwatch-probe-scales` refuses it)"},
	{saProbe, scopeCluster, "statefulsets.apps", "", []string{"get", "patch"},
		"the same for StatefulSet dependents"},
	{saProbe, scopeCluster, "statefulsets.apps/scale", "", []string{"get", "patch"},
		"the same for StatefulSet dependents"},
	{saProbe, scopeCluster, "events", "", []string{"create"},
		"ScaledDown / ScaledUp Events, created once each (`probe/scale.go`)"},
	{saProbe, scopeCluster, "machines.machine.sapcloud.io", "", []string{"get", "list", "watch"},
		"MCM's Machines in the probed namespace: which node leases count, as dependency-watchdog counts them (`probe/shoot.go` listMachines)"},
	{saProbe, "depwatch", "configmaps", "", []string{"get", "list", "watch"},
		"a shard's Job follows its membership ConfigMap (NAMESPACES_CONFIGMAP; a watch on it by name, `probe/membership.go`)"},

	{saReaper, scopeCluster, "pods", "", []string{"delete", "list", "watch"},
		"`examples/reaper-rbac.yaml`: list and delete (watch: WATCH=true)"},
	{saReaper, scopeCluster, "pods/eviction", "", []string{"create"},
		"EVICT=true (the Deployment example)"},
	{saReaper, scopeCluster, "events", "", []string{"create"},
		"Reaped / ReapSkipped Events"},
	{saReaper, scopeCluster, "endpointslices.discovery.k8s.io", "", []string{"list", "watch"},
		"START_WHEN_READY: reap only while the service is Ready (`reaper/batch_caches.go`)"},

	{saReaperNamespace, "my-app", "pods", "", []string{"delete", "list", "watch"},
		"`examples/reaper-namespaced.yaml`: the same, in its own namespace only"},
	{saReaperNamespace, "my-app", "pods/eviction", "", []string{"create"},
		"EVICT=true"},
	{saReaperNamespace, "my-app", "events", "", []string{"create"},
		"Reaped / ReapSkipped Events"},
}

// rbacManifests are the files that grant rbacTable, with the namespace their namespaced
// objects get when the file leaves it out (manifests/base's kustomization sets depwatch).
var rbacManifests = map[string]string{
	"manifests/base/rbac-coordinator.yaml": "depwatch",
	"manifests/base/rbac-weeder.yaml":      "depwatch",
	"manifests/base/rbac-probe.yaml":       "depwatch",
	"examples/reaper-rbac.yaml":            "",
	"examples/reaper-namespaced.yaml":      "",
}

const (
	rbacTableBegin = "<!-- rbac-table: generated from test/e2e/security_rbac_table_test.go; do not edit by hand -->"
	rbacTableEnd   = "<!-- /rbac-table -->"
)

// markdownRBACTable renders rbacTable as docs/security.md shows it.
func markdownRBACTable() string {
	var b strings.Builder
	b.WriteString("| Service account | Where | Resource | Only | Verbs | Needed by |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, g := range rbacTable {
		only := ""
		if g.Names != "" {
			only = "`" + g.Names + "`"
		}
		verbs := append([]string(nil), g.Verbs...)
		sort.Strings(verbs)
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s | %s | %s |\n", g.Account, g.Where, g.Resource, only, strings.Join(verbs, ", "), g.Why)
	}
	return b.String()
}

// rightKey is one (service account, where, resource, name, verb) right; name "" = all.
type rightKey struct{ account, where, resource, name, verb string }

func (k rightKey) String() string {
	name := k.name
	if name == "" {
		name = "*"
	}
	return fmt.Sprintf("%s in %s: %s %s/%s", k.account, k.where, k.verb, k.resource, name)
}

// tableRights expands rbacTable into single rights.
func tableRights() map[rightKey]bool {
	out := map[rightKey]bool{}
	for _, g := range rbacTable {
		for _, v := range g.Verbs {
			out[rightKey{g.Account, g.Where, g.Resource, g.Names, v}] = true
		}
	}
	return out
}

// resourceName is kubectl's form of a rule's resource: resource[.group][/subresource].
func resourceName(group, resource string) string {
	res, sub, _ := strings.Cut(resource, "/")
	if group != "" {
		res += "." + group
	}
	if sub != "" {
		res += "/" + sub
	}
	return res
}

func diffRights(t *testing.T, what string, got, want map[rightKey]bool) {
	t.Helper()
	var extra, missing []string
	for k := range got {
		if !want[k] {
			extra = append(extra, k.String())
		}
	}
	for k := range want {
		if !got[k] {
			missing = append(missing, k.String())
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	if len(extra) > 0 {
		t.Errorf("%s grants rights the table does not list:\n  %s", what, strings.Join(extra, "\n  "))
	}
	if len(missing) > 0 {
		t.Errorf("%s lacks rights the table lists:\n  %s", what, strings.Join(missing, "\n  "))
	}
}

func TestSecurityDocRBACTableIsTheTestedTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), rbacTableBegin+"\n")
	if !ok {
		t.Fatalf("docs/security.md has no line %q", rbacTableBegin)
	}
	got, _, ok := strings.Cut(rest, rbacTableEnd)
	if !ok {
		t.Fatalf("docs/security.md has no line %q after the table", rbacTableEnd)
	}
	if want := markdownRBACTable(); got != want {
		t.Errorf("the table in docs/security.md differs from rbacTable; it should read:\n%s", want)
	}
}

func TestSecurityRBACManifestsGrantExactlyTheTable(t *testing.T) {
	type role struct {
		namespace string // "" for a ClusterRole
		rules     []rbacv1.PolicyRule
	}
	roles := map[string]role{} // kind/namespace/name
	var roleBindings []rbacv1.RoleBinding
	var clusterBindings []rbacv1.ClusterRoleBinding
	for file, defaultNS := range rbacManifests {
		data, err := os.ReadFile(filepath.Join("..", "..", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			ns := meta.Metadata.Namespace
			if ns == "" {
				ns = defaultNS
			}
			switch meta.Kind {
			case "ClusterRole":
				var r rbacv1.ClusterRole
				mustUnmarshal(t, file, doc, &r)
				roles["ClusterRole//"+r.Name] = role{rules: r.Rules}
			case "Role":
				var r rbacv1.Role
				mustUnmarshal(t, file, doc, &r)
				roles["Role/"+ns+"/"+r.Name] = role{namespace: ns, rules: r.Rules}
			case "RoleBinding":
				var b rbacv1.RoleBinding
				mustUnmarshal(t, file, doc, &b)
				b.Namespace = ns
				roleBindings = append(roleBindings, b)
			case "ClusterRoleBinding":
				var b rbacv1.ClusterRoleBinding
				mustUnmarshal(t, file, doc, &b)
				clusterBindings = append(clusterBindings, b)
			}
		}
	}
	got := map[rightKey]bool{}
	grant := func(file string, subjects []rbacv1.Subject, where string, r role) {
		for _, s := range subjects {
			if s.Kind != rbacv1.ServiceAccountKind {
				t.Errorf("%s: binding subject %s %s is not a service account", file, s.Kind, s.Name)
				continue
			}
			for _, rule := range r.rules {
				names := rule.ResourceNames
				if len(names) == 0 {
					names = []string{""}
				}
				for _, grp := range rule.APIGroups {
					for _, res := range rule.Resources {
						for _, n := range names {
							for _, v := range rule.Verbs {
								got[rightKey{s.Namespace + "/" + s.Name, where, resourceName(grp, res), n, v}] = true
							}
						}
					}
				}
			}
		}
	}
	for _, b := range clusterBindings {
		r, ok := roles["ClusterRole//"+b.RoleRef.Name]
		if !ok {
			t.Errorf("ClusterRoleBinding %s refers to ClusterRole %s, which no manifest defines", b.Name, b.RoleRef.Name)
		}
		grant("ClusterRoleBinding "+b.Name, b.Subjects, scopeCluster, r)
	}
	for _, b := range roleBindings {
		key := "Role/" + b.Namespace + "/" + b.RoleRef.Name
		if b.RoleRef.Kind == "ClusterRole" {
			key = "ClusterRole//" + b.RoleRef.Name
		}
		r, ok := roles[key]
		if !ok {
			t.Errorf("RoleBinding %s/%s refers to %s, which no manifest defines", b.Namespace, b.Name, key)
		}
		grant("RoleBinding "+b.Name, b.Subjects, b.Namespace, r)
	}
	diffRights(t, "the RBAC manifests", got, tableRights())
}

func mustUnmarshal(t *testing.T, file string, doc []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
