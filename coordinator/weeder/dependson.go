package weeder

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AnnotationDependsOn on a Deployment, StatefulSet or DaemonSet names the Services its pods
// depend on, comma-separated: `postgres, redis` (Services in the workload's namespace) or
// `other/db` (a Service in namespace other). Its pods, chosen by the workload's own selector,
// become dependents of those Services, as if servicesAndDependantSelectors named them.
const AnnotationDependsOn = "depwatch.io/depends-on"

// EventInvalidDependsOn: the workload's depends-on annotation has an entry that is not a
// Service's name; the annotation is ignored.
const EventInvalidDependsOn = "InvalidDependsOn"

// ParseDependsOn reads a depends-on annotation of a workload in namespace ns: the keys
// (<namespace>/<service>) of the Services it names, sorted and without duplicates, and a field
// error (with the bad entry as its value) for each entry that is not a Service. An empty
// value names none. It is pure.
func ParseDependsOn(ns, value string) ([]string, field.ErrorList) {
	path := field.NewPath("metadata", "annotations").Key(AnnotationDependsOn)
	var errs field.ErrorList
	seen := map[string]bool{}
	for _, raw := range strings.Split(value, ",") {
		entry := strings.TrimSpace(raw)
		if entry == "" {
			if strings.TrimSpace(value) != "" && len(strings.Split(value, ",")) > 1 {
				errs = append(errs, field.Invalid(path, raw, "empty entry between commas"))
			}
			continue
		}
		key, err := dependsOnKey(ns, entry)
		if err != "" {
			errs = append(errs, field.Invalid(path, entry, err))
			continue
		}
		seen[key] = true
	}
	return slices.Sorted(maps.Keys(seen)), errs
}

// dependsOnKey is one entry's service key, or why it is not a Service ("" when it is).
func dependsOnKey(ns, entry string) (string, string) {
	svcNS, name := ns, entry
	if before, after, ok := strings.Cut(entry, "/"); ok {
		svcNS, name = before, after
		if m := validation.IsDNS1123Label(svcNS); len(m) > 0 {
			return "", "not a namespace name: " + strings.Join(m, "; ")
		}
	}
	if m := validation.IsDNS1035Label(name); len(m) > 0 {
		return "", "not a service name: " + strings.Join(m, "; ")
	}
	return svcNS + "/" + name, ""
}

// dependent is one workload's pods as the dependents of a Service named by its annotation.
type dependent struct {
	// workload is <kind>/<namespace>/<name>, the annotated workload.
	workload string
	// namespace is the workload's, where its pods are.
	namespace string
	selector  metav1.LabelSelector
}

// DependsOnProblem is the message of an InvalidDependsOn Event: each bad entry with what is
// wrong with it.
func DependsOnProblem(errs field.ErrorList) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, fmt.Sprintf("%q: %s", e.BadValue, e.Detail))
	}
	return fmt.Sprintf("The %s annotation is ignored: %s", AnnotationDependsOn, strings.Join(parts, "; "))
}
