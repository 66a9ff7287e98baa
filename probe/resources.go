package probe

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/depwatch/depwatch/internal/decode"
	"github.com/depwatch/depwatch/internal/envconf"
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

// DependentResourceInfo is one entry of dependency-watchdog's dependentResourceInfos as its
// prober ConfigMap has it (its api/prober types), durations as Go duration strings.
type DependentResourceInfo struct {
	Ref       *autoscalingv1.CrossVersionObjectReference `json:"ref"`
	Optional  bool                                       `json:"optional"`
	ScaleUp   *ScaleInfoSpec                             `json:"scaleUp,omitempty"`
	ScaleDown *ScaleInfoSpec                             `json:"scaleDown,omitempty"`
}

// ScaleInfoSpec is dependency-watchdog's ScaleInfo as written; ScaleInfo is it resolved.
type ScaleInfoSpec struct {
	Level        int32            `json:"level"`
	InitialDelay *metav1.Duration `json:"initialDelay,omitempty"`
	Timeout      *metav1.Duration `json:"timeout,omitempty"`
}

// ParseDependentResources parses and validates a dependentResourceInfos JSON list, exactly the
// shape dependency-watchdog's prober ConfigMap has, refusing fields it does not have. The
// error lists every problem, one per line, each naming its path.
func ParseDependentResources(data []byte) ([]DependentResource, error) {
	res, problems := parseDependentResources(data, "dependentResourceInfos")
	if len(problems) > 0 {
		return nil, &envconf.ConfigError{Problems: problems}
	}
	return res, nil
}

func parseDependentResources(data []byte, root string) ([]DependentResource, []string) {
	var infos []*DependentResourceInfo
	unknown, errs := decode.Strict(field.NewPath(root), data, &infos)
	res, resolveErrs := ResolveDependentResources(field.NewPath(root), infos)
	problems := decode.Problems(append(errs, decode.Without(resolveErrs, errs)...))
	for _, u := range unknown {
		p := u.Path + ": unknown field"
		if u.Near != "" {
			p += " (did you mean " + u.Near + "?)"
		}
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return res, nil
}

// EncodeDependentResources writes resources in dependentResourceInfos' JSON form with every
// field explicit (durations as Go duration strings): what the coordinator hands its probe
// Jobs, free of any field the probe would not know.
func EncodeDependentResources(res []DependentResource) string {
	spec := func(s ScaleInfo) *ScaleInfoSpec {
		return &ScaleInfoSpec{Level: int32(s.Level), InitialDelay: &metav1.Duration{Duration: s.InitialDelay}, Timeout: &metav1.Duration{Duration: s.Timeout}}
	}
	out := make([]DependentResourceInfo, 0, len(res))
	for _, r := range res {
		out = append(out, DependentResourceInfo{
			Ref:      &autoscalingv1.CrossVersionObjectReference{Kind: r.Ref.Kind, Name: r.Ref.Name, APIVersion: r.Ref.APIVersion},
			Optional: r.Optional, ScaleUp: spec(r.ScaleUp), ScaleDown: spec(r.ScaleDown)})
	}
	b, _ := json.Marshal(out) // plain strings, ints and bools: cannot fail
	return string(b)
}

var kindPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)

// ResolveDependentResources validates dependentResourceInfos as decoded (nil entries are
// those the decoder left out, already reported) and applies dependency-watchdog's defaults.
// An absent scaleUp or scaleDown (or level) is level 0 (its zero value); levels only order
// the resources, so any integer is accepted, negative ones too (they run first).
func ResolveDependentResources(root *field.Path, infos []*DependentResourceInfo) ([]DependentResource, field.ErrorList) {
	if len(infos) == 0 {
		return nil, field.ErrorList{field.Required(root, "must list at least one dependent resource (kube-controller-manager, machine-controller-manager, ...)")}
	}
	var errs field.ErrorList
	out := make([]DependentResource, 0, len(infos))
	seen := map[string]int{}
	for i, info := range infos {
		path := root.Index(i)
		if info == nil {
			errs = append(errs, field.Required(path, "must be an object"))
			continue
		}
		r := DependentResource{Optional: info.Optional}
		before := len(errs)
		if r.Ref, errs = validateRef(path.Child("ref"), info.Ref, errs); len(errs) == before {
			key := r.Ref.GroupVersionKind().GroupKind().String() + "/" + r.Ref.Name
			if j, dup := seen[key]; dup {
				errs = append(errs, field.Duplicate(path.Child("ref"), fmt.Sprintf("%s is already listed as %s", r.Ref, root.Index(j))))
			} else {
				seen[key] = i
			}
		}
		r.ScaleUp, errs = resolveScale(path.Child("scaleUp"), info.ScaleUp, errs)
		r.ScaleDown, errs = resolveScale(path.Child("scaleDown"), info.ScaleDown, errs)
		out = append(out, r)
	}
	return out, errs
}

func validateRef(path *field.Path, ref *autoscalingv1.CrossVersionObjectReference, errs field.ErrorList) (ResourceRef, field.ErrorList) {
	if ref == nil {
		return ResourceRef{}, append(errs, field.Required(path, "must be an object"))
	}
	nonEmpty := func(name, v string) bool {
		if strings.TrimSpace(v) == "" {
			errs = append(errs, field.Required(path.Child(name), "must be a non-empty string"))
			return false
		}
		return true
	}
	if nonEmpty("kind", ref.Kind) && !kindPattern.MatchString(ref.Kind) {
		errs = append(errs, field.Invalid(path.Child("kind"), ref.Kind, "not a valid kind (letters and digits, e.g. Deployment)"))
	}
	if nonEmpty("name", ref.Name) {
		for _, m := range validation.IsDNS1123Subdomain(ref.Name) {
			errs = append(errs, field.Invalid(path.Child("name"), ref.Name, "not a valid object name: "+m))
		}
	}
	if nonEmpty("apiVersion", ref.APIVersion) {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		switch {
		case err != nil || gv.Version == "":
			errs = append(errs, field.Invalid(path.Child("apiVersion"), ref.APIVersion, "not a valid apiVersion (e.g. apps/v1)"))
		case gv.Group != "" && len(validation.IsDNS1123Subdomain(gv.Group)) > 0:
			errs = append(errs, field.Invalid(path.Child("apiVersion"), ref.APIVersion, "the group is not a valid DNS subdomain"))
		case len(validation.IsDNS1035Label(gv.Version)) > 0:
			errs = append(errs, field.Invalid(path.Child("apiVersion"), ref.APIVersion, "the version is not valid (e.g. v1, v1beta1)"))
		}
	}
	return ResourceRef{Kind: ref.Kind, Name: ref.Name, APIVersion: ref.APIVersion}, errs
}

// resolveScale applies the defaults: no delay, a 30s timeout.
func resolveScale(path *field.Path, spec *ScaleInfoSpec, errs field.ErrorList) (ScaleInfo, field.ErrorList) {
	si := ScaleInfo{InitialDelay: DefaultScaleInitialDelay, Timeout: DefaultScaleTimeout}
	if spec == nil {
		return si, errs
	}
	si.Level = int(spec.Level)
	if d := spec.InitialDelay; d != nil && d.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("initialDelay"), d.Duration.String(), "must not be negative"))
	} else if d != nil {
		si.InitialDelay = d.Duration
	}
	if d := spec.Timeout; d != nil && d.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("timeout"), d.Duration.String(), "must be greater than 0"))
	} else if d != nil {
		si.Timeout = d.Duration
	}
	return si, errs
}
