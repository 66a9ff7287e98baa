package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	goyaml "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/coordinator/prober"
	"github.com/depwatch/depwatch/coordinator/weeder"
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
type Config struct {
	weeder.Config
	JobTemplate jobs.Template `json:"jobTemplate,omitempty"`
	// Prober is dependency-watchdog's prober config plus depwatch's additions; nil: no probe Jobs.
	Prober *prober.Config `json:"prober,omitempty"`

	// proberRefused: the prober section was given but refused (its problems are reported),
	// so a config without services is not also told it lacks a prober section.
	proberRefused bool
}

// LoadConfig reads and validates the config file.
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		return nil, errors.New("--config-file: required (a dependency-watchdog weeder config or depwatch's extension of it)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config-file=%q: %w", path, err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("config file %s:\n%w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses YAML or JSON strictly: an unknown or mistyped field is an error that
// names it. Every problem found is reported, one per line.
func ParseConfig(data []byte) (*Config, error) {
	var top map[string]json.RawMessage
	if err := yaml.Unmarshal(data, &top); err != nil {
		if lines := nonFinite(data); len(lines) > 0 {
			return nil, errors.New(strings.Join(lines, "\n"))
		}
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	cfg := &Config{}
	var errs []error
	var proberRaw json.RawMessage
	fields := map[string]any{
		"watchDuration":                 &cfg.WatchDuration,
		"servicesAndDependantSelectors": nil, // per service below, for precise messages
		"namespaces":                    &cfg.Namespaces,
		"useEndpoints":                  &cfg.UseEndpoints,
		"gracePeriod":                   &cfg.GracePeriod,
		"armWeeder":                     &cfg.ArmWeeder,
		"armedMaxWait":                  &cfg.ArmedMaxWait,
		"reapCooldown":                  &cfg.ReapCooldown,
		"jobTemplate":                   &cfg.JobTemplate,
		"prober":                        &proberRaw,
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		target, known := fields[k]
		if !known {
			errs = append(errs, fmt.Errorf("%s: unknown field (known: watchDuration, servicesAndDependantSelectors, namespaces, useEndpoints, gracePeriod, armWeeder, armedMaxWait, reapCooldown, jobTemplate, prober)", ctrl.PathKey(k)))
			continue
		}
		if target == nil {
			continue
		}
		if err := ctrl.StrictJSON(top[k], target); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s", k, ctrl.CleanJSONError(err)))
		}
	}
	if raw, ok := top["servicesAndDependantSelectors"]; ok {
		var services map[string]json.RawMessage
		if err := json.Unmarshal(raw, &services); err != nil {
			errs = append(errs, fmt.Errorf("servicesAndDependantSelectors: must be a map of service name to {podSelectors: [...]}: %s", ctrl.CleanJSONError(err)))
		} else {
			cfg.ServicesAndDependantSelectors = map[string]weeder.DependantSelectors{}
			for name, raw := range services {
				var d weeder.DependantSelectors
				if err := ctrl.StrictJSON(raw, &d); err != nil {
					errs = append(errs, fmt.Errorf("servicesAndDependantSelectors.%s: %s", ctrl.PathKey(name), ctrl.CleanJSONError(err)))
					continue
				}
				cfg.ServicesAndDependantSelectors[name] = d
			}
		}
	}
	var proberErrs []error
	if len(proberRaw) > 0 {
		cfg.Prober, proberErrs = prober.Parse(proberRaw)
		cfg.proberRefused = len(proberErrs) > 0
	}
	// The rest is validated only when it decoded, but a refused prober section must not hide
	// its problems: every problem is reported at once.
	if len(errs) == 0 {
		errs = append(errs, cfg.Validate()...)
	}
	errs = append(errs, proberErrs...)
	if len(errs) > 0 {
		return nil, joinLines(errs)
	}
	return cfg, nil
}

// Validate checks every field and names each invalid one.
func (c *Config) Validate() []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	errs = append(errs, c.Config.Validate()...)
	if len(c.ServicesAndDependantSelectors) == 0 && c.Prober == nil && !c.proberRefused {
		add("servicesAndDependantSelectors: required: at least one service with its dependents' podSelectors (or a prober section)")
	}
	errs = append(errs, c.JobTemplate.Validate("jobTemplate")...)
	return errs
}

// nonFinite finds the YAML floats .nan, .inf and -.inf, which JSON cannot hold: the YAML to
// JSON conversion refuses them without saying where, so they are named here by their path.
func nonFinite(data []byte) []string {
	var doc any
	if goyaml.Unmarshal(data, &doc) != nil {
		return nil
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
			keys := make([]string, 0, len(v))
			byKey := map[string]any{}
			for k, item := range v {
				key := ctrl.PathKey(fmt.Sprint(k))
				keys = append(keys, key)
				byKey[key] = item
			}
			sort.Strings(keys)
			for _, k := range keys {
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
	walk("", doc)
	return lines
}

func joinLines(errs []error) error {
	lines := make([]string, 0, len(errs))
	for _, e := range errs {
		lines = append(lines, e.Error())
	}
	return errors.New(strings.Join(lines, "\n"))
}
