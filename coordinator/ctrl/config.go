package ctrl

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/depwatch/depwatch/internal/decode"
)

// MaxDuration bounds every duration of the config file. A Job's activeDeadlineSeconds is the
// sum of several of them (watchDuration + armedMaxWait + deadlineMargin; a probe Job's run, its
// timeouts and its scale chain): unbounded, a sum of huge values overflows time.Duration and
// turns into a negative deadline or a 1 ms probe interval. A year is far above any sane value.
const MaxDuration = 365 * 24 * time.Hour

// PathKey is a map key as it appears in a field path (decode.PathKey).
func PathKey(k string) string { return decode.PathKey(k) }

// dependencyWatchdogFields are the fields dependency-watchdog itself reads (its weeder and
// prober ConfigMaps). A misspelling of one of them is ignored with a warning, as
// dependency-watchdog ignores it; a near miss of any other known field (depwatch's own, or a
// Kubernetes type's) is refused, since silently falling back to a default there changes what
// depwatch does (a misspelt dryRun scales for real).
var dependencyWatchdogFields = map[string]bool{
	"watchDuration": true, "servicesAndDependantSelectors": true, "podSelectors": true,
	"kubeConfigSecretName": true, "probeInterval": true, "initialDelay": true, "probeTimeout": true,
	"backoffJitterFactor": true, "dependentResourceInfos": true, "kcmNodeMonitorGraceDuration": true,
	"nodeLeaseFailureFraction": true,
}

// Decode is the config file's one policy for what it reads: data decoded strictly into into
// (decode.Strict), every value that does not decode an error naming its path (invalid, so the
// caller can leave validation's word on those out). A field the config does not know is a
// warning naming its path, because a ConfigMap written by a newer gardenlet may carry fields
// depwatch does not know yet; one that is a near miss of a known field outside
// dependencyWatchdogFields is refused instead. Under a path that lenient says is
// dependency-watchdog's alone (its dependentResourceInfos), every unknown field is a warning.
func Decode(path *field.Path, data []byte, into any, lenient func(path string) bool) (warnings []string, refused []error, invalid field.ErrorList) {
	unknown, invalid := decode.Strict(path, data, into)
	for _, u := range unknown {
		switch {
		case u.Near != "" && !dependencyWatchdogFields[u.Near] && (lenient == nil || !lenient(u.Path)):
			refused = append(refused, fmt.Errorf("%s: unknown field; did you mean %s? (refused: only dependency-watchdog's own fields are ignored when misspelt)", u.Path, u.Near))
		case u.Near != "":
			warnings = append(warnings, fmt.Sprintf("%s: unknown field, ignored (did you mean %s? dependency-watchdog ignores it too)", u.Path, u.Near))
		default:
			warnings = append(warnings, u.Path+": unknown field, ignored (dependency-watchdog ignores it too)")
		}
	}
	for _, e := range invalid {
		refused = append(refused, fmt.Errorf("%s", decode.Problem(e)))
	}
	return warnings, refused, invalid
}

// Undecoded says whether a validation problem is about a field in invalid (or inside one):
// validation would only repeat that it is wrong, or call it missing.
func Undecoded(problem error, invalid field.ErrorList) bool {
	return slices.ContainsFunc(invalid, func(e *field.Error) bool {
		rest, ok := strings.CutPrefix(problem.Error(), e.Field)
		return ok && strings.IndexAny(rest, ":.=") == 0
	})
}
