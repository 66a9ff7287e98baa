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

// dependentSelectors are a service's dependents: the pod selectors of those in its own namespace,
// and of those in each other namespace (an annotation may name another namespace's Service).
type dependentSelectors struct {
	own       []metav1.LabelSelector
	elsewhere map[string][]metav1.LabelSelector
}

func (d dependentSelectors) none() bool { return len(d.own) == 0 && len(d.elsewhere) == 0 }

// selectors are the pod selectors of the service's dependents, ordered by workload.
func (x dependsOnIndex) selectors(key string) dependentSelectors {
	ns, _, _ := strings.Cut(key, "/")
	deps := x.byService[key]
	var out dependentSelectors
	for _, w := range slices.Sorted(maps.Keys(deps)) {
		d := deps[w]
		if d.namespace == ns {
			out.own = append(out.own, *d.selector.DeepCopy())
			continue
		}
		if out.elsewhere == nil {
			out.elsewhere = map[string][]metav1.LabelSelector{}
		}
		out.elsewhere[d.namespace] = append(out.elsewhere[d.namespace], *d.selector.DeepCopy())
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
