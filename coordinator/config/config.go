// Package config is the coordinator's config file: what it holds (Config), how it is read
// (Parse: every problem named by its path; unknown fields ignored with a warning), how
// dependency-watchdog's prober ConfigMap becomes its prober section (ComposeProber), what
// the command decides in it (DefaultReadyWhen) and how two configs differ (Changes).
// Reading the files and flags stays in package coordinator (Options.LoadConfig).
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	goyaml "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/coordinator/roles"
	"github.com/depwatch/depwatch/coordinator/weeder"
	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/jobs"
)

// Config is the coordinator's config file: the weeder's section at the top level (it is
// dependency-watchdog's weeder ConfigMap data, read as it is, plus depwatch's additions), the
// Job template both controllers' Jobs are made from, and the prober's section.
//
//	watchDuration: 5m0s                     # the weeder's fields: see weeder.Config
//	servicesAndDependantSelectors: {...}
//	jobTemplate: {...}                      # see jobs.Template
//	prober: {...}                           # dependency-watchdog's prober config: see prober.Config
//
// Loaded with package coordinator's Options.LoadConfig, useEndpoints holds the effective
// value: the file's or --use-endpoints (Options.applyTo), so that nothing else reads the flag.
type Config struct {
	weeder.Config
	JobTemplate jobs.Template `json:"jobTemplate,omitempty"`
	// Prober is dependency-watchdog's prober config plus depwatch's additions; nil: no probe Jobs.
	Prober *prober.Config `json:"prober,omitempty"`

	warnings []string // fields ignored, by path (see Warnings)
	// proberRefused: the prober section was given but refused (its problems are reported),
	// so a config without services is not also told it lacks a prober section.
	proberRefused bool
}

// Parse parses YAML or JSON. A field the config does not know is ignored with a
// warning naming its path (Warnings), anywhere in the file, as ctrl.Decode decides; a
// known field with a wrong value is an error that names it. Every problem found is reported,
// one per line.
func Parse(data []byte) (*Config, error) {
	top, err := decodeDoc(data, "")
	if err != nil {
		return nil, err
	}
	proberDoc, hasProber := top["prober"]
	delete(top, "prober") // the section is the prober's to parse, warnings and all
	cfg := &Config{}
	rest, _ := json.Marshal(top) // decoded from JSON: cannot fail
	var errs []error
	var invalid field.ErrorList
	cfg.warnings, errs, invalid = ctrl.Decode(nil, rest, cfg, nil)
	var proberErrs []error
	if hasProber {
		raw, _ := json.Marshal(proberDoc) // decoded from JSON: cannot fail
		cfg.Prober, proberErrs = prober.Parse(raw)
		cfg.proberRefused = len(proberErrs) > 0
	}
	// Every problem is reported at once: the fields that decoded are validated even when
	// others did not, leaving out what validation says about a field that did not decode.
	for _, err := range cfg.Validate() {
		if !ctrl.Undecoded(err, invalid) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, proberErrs...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// Warnings name the fields that were ignored, by path, the prober section's included: the
// coordinator logs them in one place, with one wording.
func (c *Config) Warnings() []string {
	if c.Prober == nil {
		return c.warnings
	}
	return slices.Concat(c.warnings, c.Prober.Warnings())
}

// notAMap is what a document whose top level is not a map of fields is told.
const notAMap = "not valid YAML: the top level must be a map of fields"

// decodeDoc reads a YAML or JSON document whose top level is a map; nil for an empty one.
// YAML that JSON cannot hold (.nan, .inf) is named by its path under path, since the YAML
// to JSON conversion refuses it without saying where.
func decodeDoc(data []byte, path string) (map[string]any, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		if lines := nonFinite(data, path); len(lines) > 0 {
			return nil, errors.New(strings.Join(lines, "\n"))
		}
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	var top map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber() // numbers stay as written until decoded into their field
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("%s: %s", notAMap, strings.TrimPrefix(err.Error(), "json: "))
	}
	return top, nil
}

// Validate checks every field and names each invalid one.
func (c *Config) Validate() []error {
	errs := c.Config.Validate()
	if !c.Config.Weeds(false) && c.Prober == nil && !c.proberRefused {
		errs = append(errs, errors.New("servicesAndDependantSelectors: required: at least one service with its dependents' podSelectors (or a prober section, or dependsOnAnnotation left on with EndpointSlices)"))
	}
	errs = append(errs, c.JobTemplate.Validate("jobTemplate")...)
	return errs
}

// nonFinite finds the YAML floats .nan, .inf and -.inf, which JSON cannot hold, and names
// each by its path under path.
func nonFinite(data []byte, path string) []string {
	var doc any
	if goyaml.Unmarshal(data, &doc) != nil {
		return nil
	}
	if _, ok := doc.(map[any]any); !ok {
		// A number or a list at the top level is no config, finite or not.
		return []string{notAMap}
	}
	var lines []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				lines = append(lines, fmt.Sprintf("%s: %v: must be a finite number", path, v))
			}
		case map[any]any:
			byKey := map[string]any{}
			for k, item := range v {
				byKey[ctrl.PathKey(fmt.Sprint(k))] = item
			}
			for _, k := range slices.Sorted(maps.Keys(byKey)) {
				if path == "" {
					walk(k, byKey[k])
				} else {
					walk(path+"."+k, byKey[k])
				}
			}
		case []any:
			for i, item := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), item)
			}
		}
	}
	walk(path, doc)
	return lines
}

// FlagError names the flag and its value in err; nil when err is.
func FlagError(flag, value string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s=%q: %w", flag, value, err)
}

// ComposeProber puts dependency-watchdog's prober config (YAML or JSON, top level as in
// its ConfigMap; from the file proberFlag names) into the config as its prober section, and
// returns the result as JSON. A config that has a prober section of its own is refused: two
// sources for one section would leave the reader guessing which applies.
func ComposeProber(config, proberConfig []byte, proberFlag, proberFile string) ([]byte, error) {
	top, err := decodeDoc(config, "")
	if err != nil {
		return nil, fmt.Errorf("--config-file: %w", err)
	}
	if _, ok := top["prober"]; ok {
		return nil, errors.New("prober: given in --config-file and in --prober-config-file; keep one (the prober ConfigMap as it is in --prober-config-file, or the section in --config-file)")
	}
	prober, err := decodeDoc(proberConfig, "prober")
	if err == nil && len(prober) == 0 {
		err = errors.New("empty: it must hold dependency-watchdog's prober config (kubeConfigSecretName, dependentResourceInfos, ...)")
	}
	if err != nil {
		return nil, FlagError(proberFlag, proberFile, err)
	}
	if top == nil {
		top = map[string]any{}
	}
	top["prober"] = prober
	return json.Marshal(top)
}

// DefaultReadyWhen is when a service whose entry names no readyWhen counts as back:
//
//   - under dependency-watchdog's weeder command, as dependency-watchdog decides it, since
//     gardenlet owns the ConfigMap and nothing there can say otherwise: on EndpointSlices
//     (dependency-watchdog v1.6+, which gardenlet grants EndpointSlices) when every endpoint
//     is ready; on v1 Endpoints (dependency-watchdog up to v1.5, whose RBAC granted Endpoints
//     only) when one address is ready, which is all Endpoints can tell apart here;
//   - under depwatch's own coordinator, one ready endpoint (podstate.ReadyAny): a dependent
//     that crash-loops because it cannot reach its service can reach it again as soon as one
//     endpoint serves, and a three-member etcd serves with two. A service that needs more
//     says so in its entry (readyWhen: all, or a count).
func DefaultReadyWhen(role roles.Role, useEndpoints bool) podstate.ReadyWhen {
	if role == roles.Weeder && !useEndpoints {
		return podstate.ReadyAll
	}
	return podstate.ReadyAny
}

// Changes lists the top-level fields that differ between two configs. Values are
// compared as they take effect, so "5m" and "300s" are the same, and comments or order do
// not count.
func Changes(old, next *Config) []string {
	a, b := asMap(old), asMap(next)
	keys := maps.Clone(a)
	maps.Copy(keys, b)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	return out
}

// asMap is v as its JSON object: the form in which two configs compare as they take effect.
func asMap(v any) map[string]any {
	var m map[string]any
	data, _ := json.Marshal(v) // a decoded config: cannot fail
	_ = json.Unmarshal(data, &m)
	return m
}
