package ctrl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agnivade/levenshtein"
)

// MaxDuration bounds every duration of the config file. A Job's activeDeadlineSeconds is the
// sum of several of them (watchDuration + armedMaxWait + deadlineMargin; a probe Job's run, its
// timeouts and its scale chain): unbounded, a sum of huge values overflows time.Duration and
// turns into a negative deadline or a 1 ms probe interval. A year is far above any sane value.
const MaxDuration = 365 * 24 * time.Hour

// PathKey is a map key as it appears in a field path: as it is when it is plain, quoted when it
// holds spaces, quotes or control characters, so that a problem stays on one line and its
// field is recognisable.
func PathKey(k string) string {
	if k == "" || strings.IndexFunc(k, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' }) >= 0 {
		return strconv.Quote(k)
	}
	return k
}

// StrictJSON decodes raw into into, refusing unknown fields.
func StrictJSON(raw json.RawMessage, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// CleanJSONError turns encoding/json's messages into ones about the config file.
func CleanJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %s: a %s cannot be a %s", te.Field, te.Value, te.Type)
		}
		return fmt.Sprintf("a %s cannot be a %s", te.Value, te.Type)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

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

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// DropUnknown is the config file's one policy for fields it does not know, at every depth.
// It removes from doc (JSON decoded into any: maps, slices, scalars) each object key that the
// matching Go type of typ has no json field for, so that a strict decode afterwards reports
// only wrong values. Each removed key is a warning naming its path under path, because a
// ConfigMap written by a newer gardenlet may carry fields depwatch does not know yet; a key that
// is a near miss of a known field outside dependencyWatchdogFields is an error instead.
func DropUnknown(doc any, typ reflect.Type, path string) (warnings []string, errs []error) {
	var walk func(v any, t reflect.Type, path string)
	walk = func(v any, t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if reflect.PointerTo(t).Implements(unmarshalerType) {
			return // decodes itself: durations, quantities, raw JSON
		}
		switch t.Kind() {
		case reflect.Struct:
			m, _ := v.(map[string]any)
			fields := JSONFields(t)
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if f, ok := fields[k]; ok {
					walk(m[k], f.Type, joinPath(path, k))
					continue
				}
				delete(m, k)
				at := joinPath(path, PathKey(k))
				if near, lenient := nearMiss(k, fields); near != "" && !lenient {
					errs = append(errs, fmt.Errorf("%s: unknown field; did you mean %s? (refused: only dependency-watchdog's own fields are ignored when misspelt)", at, near))
				} else if near != "" {
					warnings = append(warnings, fmt.Sprintf("%s: unknown field, ignored (did you mean %s? dependency-watchdog ignores it too)", at, near))
				} else {
					warnings = append(warnings, at+": unknown field, ignored (dependency-watchdog ignores it too)")
				}
			}
		case reflect.Map:
			m, _ := v.(map[string]any)
			for _, k := range slices.Sorted(maps.Keys(m)) {
				walk(m[k], t.Elem(), joinPath(path, PathKey(k)))
			}
		case reflect.Slice, reflect.Array:
			s, _ := v.([]any)
			for i, item := range s {
				walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(doc, typ, path)
	return warnings, errs
}

// JSONFields maps the json names of struct type t's fields to the fields, embedded structs
// without a name of their own inlined (Index is then the path through them), as
// encoding/json decodes them.
func JSONFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || (!f.IsExported() && !f.Anonymous):
		case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
			for n, inner := range JSONFields(f.Type) {
				inner.Index = append(slices.Clone(f.Index), inner.Index...)
				out[n] = inner
			}
		case name == "":
			out[f.Name] = f
		default:
			out[name] = f
		}
	}
	return out
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// nearMiss returns the known field that k most likely misspells (the same letters but for
// case, or a few edits away: one per four letters of the field, at most two, so that a short
// new field is not taken for a short known one), preferring one that is checked strictly, and whether it is
// one of dependency-watchdog's.
func nearMiss(k string, fields map[string]reflect.StructField) (string, bool) {
	lenient := ""
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if !strings.EqualFold(k, f) && levenshtein.ComputeDistance(strings.ToLower(k), strings.ToLower(f)) > min(2, len(f)/4) {
			continue
		}
		if !dependencyWatchdogFields[f] {
			return f, false
		}
		lenient = f
	}
	return lenient, lenient != ""
}
