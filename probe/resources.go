package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DependentResource is one entry of dependency-watchdog's dependentResourceInfos: a workload
// with a scale subresource that is scaled down when the node leases expire and back up when
// they are renewed.
type DependentResource struct {
	Ref       ResourceRef
	Optional  bool // true: a missing resource is skipped; false: it is an error
	ScaleUp   ScaleInfo
	ScaleDown ScaleInfo
}

// ResourceRef names the resource like autoscaling/v1's CrossVersionObjectReference.
type ResourceRef struct {
	Kind, Name, APIVersion string
}

func (r ResourceRef) String() string { return r.Kind + "/" + r.Name }

// GroupVersionKind of the reference; the apiVersion was validated by LoadOptions.
func (r ResourceRef) GroupVersionKind() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	return gv.WithKind(r.Kind)
}

// ScaleInfo is the scaling of one resource in one direction.
type ScaleInfo struct {
	Level        int           // ascending: level 0 first; one level's resources concurrently
	InitialDelay time.Duration // waited before the resource is touched (default 0s)
	Timeout      time.Duration // bound of the scale and of the wait for readiness (default 30s)
}

// Defaults of dependency-watchdog's ScaleInfo.
const (
	DefaultScaleInitialDelay = 0 * time.Second
	DefaultScaleTimeout      = 30 * time.Second
)

// ParseDependentResources parses and validates a dependentResourceInfos JSON list, exactly the
// shape dependency-watchdog's prober ConfigMap has (with durations as Go duration strings).
// The error lists every problem, one per line, each naming its path.
func ParseDependentResources(data []byte) ([]DependentResource, error) {
	res, problems := parseDependentResources(data, "dependentResourceInfos")
	if len(problems) > 0 {
		return nil, &envconf.ConfigError{Problems: problems}
	}
	return res, nil
}

// ParseDependentResourcesLenient parses dependentResourceInfos as dependency-watchdog reads
// them from its ConfigMap: a field it does not know is ignored, and named in warnings (one
// per field, with its path) instead of refused, so a ConfigMap written for a newer
// dependency-watchdog still starts the coordinator. Everything else is as strict as
// ParseDependentResources.
func ParseDependentResourcesLenient(data []byte) ([]DependentResource, []string, error) {
	p := &resourceParser{lenient: true}
	res := p.parse(data, "dependentResourceInfos")
	if len(p.problems) > 0 {
		return nil, nil, &envconf.ConfigError{Problems: p.problems}
	}
	return res, p.warnings, nil
}

// EncodeDependentResources writes resources in dependentResourceInfos' JSON form with every
// field explicit (durations as Go duration strings): what the coordinator hands its probe
// Jobs, free of any field the probe would not know.
func EncodeDependentResources(res []DependentResource) string {
	type scaleInfo struct {
		Level        int    `json:"level"`
		InitialDelay string `json:"initialDelay"`
		Timeout      string `json:"timeout"`
	}
	type ref struct {
		Kind       string `json:"kind"`
		Name       string `json:"name"`
		APIVersion string `json:"apiVersion"`
	}
	type info struct {
		Ref       ref       `json:"ref"`
		Optional  bool      `json:"optional"`
		ScaleUp   scaleInfo `json:"scaleUp"`
		ScaleDown scaleInfo `json:"scaleDown"`
	}
	si := func(s ScaleInfo) scaleInfo {
		return scaleInfo{Level: s.Level, InitialDelay: s.InitialDelay.String(), Timeout: s.Timeout.String()}
	}
	out := make([]info, 0, len(res))
	for _, r := range res {
		out = append(out, info{Ref: ref{Kind: r.Ref.Kind, Name: r.Ref.Name, APIVersion: r.Ref.APIVersion},
			Optional: r.Optional, ScaleUp: si(r.ScaleUp), ScaleDown: si(r.ScaleDown)})
	}
	b, _ := json.Marshal(out) // plain strings, ints and bools: cannot fail
	return string(b)
}

// resourceParser walks the decoded JSON and records one problem per bad field. The format is
// PATH=<the value as JSON>: problem, or PATH: problem when the field is missing.
type resourceParser struct {
	problems []string
	lenient  bool     // unknown fields are warnings, not problems
	warnings []string // with lenient: the unknown fields, ignored
}

func (p *resourceParser) fail(path string, value any, format string, args ...any) {
	raw, err := json.Marshal(value)
	if err != nil {
		raw = []byte("?")
	}
	p.problems = append(p.problems, fmt.Sprintf("%s=%s: %s", path, shorten(string(raw)), fmt.Sprintf(format, args...)))
}

func (p *resourceParser) missing(path, what string) {
	p.problems = append(p.problems, fmt.Sprintf("%s: required, %s", path, what))
}

var kindPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

// The fields of dependentResourceInfos, as dependency-watchdog's api/prober types name them
// (DependentResourceInfo, autoscaling/v1 CrossVersionObjectReference, ScaleInfo); no more:
// TestDependentResourceFieldsAreDependencyWatchdogs holds them to its own.
var (
	dependentResourceFields = []string{"ref", "optional", "scaleUp", "scaleDown"}
	refFields               = []string{"kind", "name", "apiVersion"}
	scaleInfoFields         = []string{"level", "initialDelay", "timeout"}
)

func parseDependentResources(data []byte, root string) ([]DependentResource, []string) {
	p := &resourceParser{}
	res := p.parse(data, root)
	if len(p.problems) > 0 {
		return nil, p.problems
	}
	return res, nil
}

func (p *resourceParser) parse(data []byte, root string) []DependentResource {
	fail := func(format string, args ...any) []DependentResource {
		p.problems = append(p.problems, fmt.Sprintf(format, args...))
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return fail("%s=%q: not valid JSON: %v", root, shorten(string(data)), err)
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return fail("%s=%q: not valid JSON: unexpected data after the list", root, shorten(string(data)))
	}
	list, ok := doc.([]any)
	if !ok {
		return fail("%s=%q: must be a JSON list of dependentResourceInfos", root, shorten(string(data)))
	}
	if len(list) == 0 {
		return fail("%s=%q: must list at least one dependent resource", root, shorten(string(data)))
	}

	out := make([]DependentResource, 0, len(list))
	seen := map[string]int{}
	for i, item := range list {
		path := fmt.Sprintf("%s[%d]", root, i)
		obj, ok := p.object(path, item)
		if !ok {
			continue
		}
		p.unknown(path, obj, dependentResourceFields...)
		var r DependentResource
		r.Ref, ok = p.ref(path+".ref", obj["ref"])
		if ok {
			key := r.Ref.GroupVersionKind().GroupKind().String() + "/" + r.Ref.Name
			if j, dup := seen[key]; dup {
				p.problems = append(p.problems, fmt.Sprintf("%s.ref: %s is already listed as %s[%d]", path, r.Ref, root, j))
			} else {
				seen[key] = i
			}
		}
		if v, set := obj["optional"]; set && v != nil {
			b, isBool := v.(bool)
			if !isBool {
				p.fail(path+".optional", v, "must be true or false")
			}
			r.Optional = b
		}
		r.ScaleUp = p.scaleInfo(path+".scaleUp", obj["scaleUp"])
		r.ScaleDown = p.scaleInfo(path+".scaleDown", obj["scaleDown"])
		out = append(out, r)
	}
	return out
}

func (p *resourceParser) object(path string, v any) (map[string]any, bool) {
	if v == nil {
		p.missing(path, "must be an object")
		return nil, false
	}
	obj, ok := v.(map[string]any)
	if !ok {
		p.fail(path, v, "must be an object")
	}
	return obj, ok
}

// unknown reports fields the format does not have: a typo such as "initalDelay" must not
// silently fall back to a default.
func (p *resourceParser) unknown(path string, obj map[string]any, known ...string) {
	var extra []string
	for k := range obj {
		if !slices.Contains(known, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	for _, k := range extra {
		if p.lenient {
			p.warnings = append(p.warnings, fmt.Sprintf("%s.%s: unknown field, ignored (known: %s)", path, k, strings.Join(known, ", ")))
			continue
		}
		p.fail(path+"."+k, obj[k], "unknown field (known: %s)", strings.Join(known, ", "))
	}
}

func (p *resourceParser) ref(path string, v any) (ResourceRef, bool) {
	obj, ok := p.object(path, v)
	if !ok {
		return ResourceRef{}, false
	}
	p.unknown(path, obj, refFields...)
	before := len(p.problems)
	var r ResourceRef
	r.Kind, _ = p.str(path+".kind", obj["kind"])
	if r.Kind != "" && !kindPattern.MatchString(r.Kind) {
		p.fail(path+".kind", r.Kind, "not a valid kind (letters and digits, e.g. Deployment)")
	}
	r.Name, _ = p.str(path+".name", obj["name"])
	if r.Name != "" {
		if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
			p.fail(path+".name", r.Name, "not a valid object name: %s", strings.Join(errs, "; "))
		}
	}
	r.APIVersion, _ = p.str(path+".apiVersion", obj["apiVersion"])
	if r.APIVersion != "" {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		switch {
		case err != nil || gv.Version == "":
			p.fail(path+".apiVersion", r.APIVersion, "not a valid apiVersion (e.g. apps/v1)")
		case gv.Group != "" && len(validation.IsDNS1123Subdomain(gv.Group)) > 0:
			p.fail(path+".apiVersion", r.APIVersion, "the group is not a valid DNS subdomain")
		case len(validation.IsDNS1035Label(gv.Version)) > 0:
			p.fail(path+".apiVersion", r.APIVersion, "the version is not valid (e.g. v1, v1beta1)")
		}
	}
	return r, len(p.problems) == before
}

// str reads a required, non-empty string.
func (p *resourceParser) str(path string, v any) (string, bool) {
	if v == nil {
		p.missing(path, "must be a non-empty string")
		return "", false
	}
	s, ok := v.(string)
	if !ok || strings.TrimSpace(s) == "" {
		p.fail(path, v, "must be a non-empty string")
		return "", false
	}
	return s, true
}

// scaleInfo reads scaleUp or scaleDown. Absent (or null) means level 0 with the default delay
// and timeout; so does an absent level (dependency-watchdog's zero value). Levels only order
// the resources, so any integer is accepted, negative ones too (they run first).
func (p *resourceParser) scaleInfo(path string, v any) ScaleInfo {
	si := ScaleInfo{InitialDelay: DefaultScaleInitialDelay, Timeout: DefaultScaleTimeout}
	if v == nil {
		return si
	}
	obj, ok := p.object(path, v)
	if !ok {
		return si
	}
	p.unknown(path, obj, scaleInfoFields...)
	switch lv := obj["level"].(type) {
	case nil:
	case json.Number:
		n, err := strconv.ParseInt(lv.String(), 10, 32)
		if err != nil {
			p.fail(path+".level", lv, "must be an integer")
		}
		si.Level = int(n)
	default:
		p.fail(path+".level", lv, "must be an integer")
	}
	if d, ok := p.duration(path+".initialDelay", obj["initialDelay"], false); ok {
		si.InitialDelay = d
	}
	if d, ok := p.duration(path+".timeout", obj["timeout"], true); ok {
		si.Timeout = d
	}
	return si
}

// duration reads an optional Go duration string (metav1.Duration's JSON form); ok=false when
// unset (null or absent) or bad.
func (p *resourceParser) duration(path string, v any, positive bool) (time.Duration, bool) {
	if v == nil {
		return 0, false
	}
	s, isString := v.(string)
	if !isString {
		p.fail(path, v, "must be a Go duration string such as \"10s\" or \"1m30s\"")
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		p.fail(path, v, "must be a Go duration string such as \"10s\" or \"1m30s\"")
		return 0, false
	case positive && d <= 0:
		p.fail(path, v, "must be greater than 0")
		return 0, false
	case d < 0:
		p.fail(path, v, "must not be negative")
		return 0, false
	}
	return d, true
}
