package weeder

import (
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// declared is what one annotated workload declares: the services its pods depend on (none
// when its annotation is absent or malformed) and the annotation's value, so that a problem
// is told once per change.
type declared struct {
	value    string
	services []string
	dep      dependent
}

// dependsOnIndex is service key → the workloads that declare a dependency on it, built from
// the workloads' annotations. It is not safe for concurrent use; dependsOn guards it.
type dependsOnIndex struct {
	byWorkload map[string]declared
	byService  map[string]map[string]dependent
}

func newDependsOnIndex() dependsOnIndex {
	return dependsOnIndex{byWorkload: map[string]declared{}, byService: map[string]map[string]dependent{}}
}

// set replaces what workload declares (a zero declared: nothing) and returns the service keys
// that gained their first dependent (followed) and those that lost their last (unfollowed).
func (x dependsOnIndex) set(workload string, d declared) (followed, unfollowed []string) {
	old := x.byWorkload[workload]
	for _, svc := range old.services {
		deps := x.byService[svc]
		delete(deps, workload)
		if len(deps) == 0 {
			delete(x.byService, svc)
			unfollowed = append(unfollowed, svc)
		}
	}
	for _, svc := range d.services {
		deps, ok := x.byService[svc]
		if !ok {
			deps = map[string]dependent{}
			x.byService[svc] = deps
			followed = append(followed, svc)
		}
		deps[workload] = d.dep
	}
	if d.value == "" && len(d.services) == 0 {
		delete(x.byWorkload, workload)
	} else {
		x.byWorkload[workload] = d
	}
	// A service both dropped and declared again by the same workload stays followed.
	return minus(followed, unfollowed), minus(unfollowed, followed)
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// follows: a workload declares a dependency on the service key.
func (x dependsOnIndex) follows(key string) bool { return len(x.byService[key]) > 0 }

// selectors are the pod selectors of the service's dependents in the service's own namespace,
// ordered by workload. Dependents in another namespace are not among them: a weeder Job
// restarts pods in its service's namespace (see docs/coordinator.md).
func (x dependsOnIndex) selectors(key string) []metav1.LabelSelector {
	ns, _, _ := strings.Cut(key, "/")
	deps := x.byService[key]
	var out []metav1.LabelSelector
	for _, w := range slices.Sorted(maps.Keys(deps)) {
		if d := deps[w]; d.namespace == ns {
			out = append(out, *d.selector.DeepCopy())
		}
	}
	return out
}

// nameInUse: a followed service key has that name (in any namespace).
func (x dependsOnIndex) nameInUse(name string) bool {
	for key := range x.byService {
		if _, n, _ := strings.Cut(key, "/"); n == name {
			return true
		}
	}
	return false
}
