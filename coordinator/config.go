package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	goyaml "go.yaml.in/yaml/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/depwatch/depwatch/jobs"
)

// DefaultWatchDuration is dependency-watchdog's default for watchDuration.
const DefaultWatchDuration = 5 * time.Minute

// MaxDuration bounds every duration of the config file. A Job's activeDeadlineSeconds is the
// sum of several of them (watchDuration + armedMaxWait + deadlineMargin; a probe Job's run, its
// timeouts and its scale chain): unbounded, a sum of huge values overflows time.Duration and
// turns into a negative deadline or a 1 ms probe interval. A year is far above any sane value.
const MaxDuration = 365 * 24 * time.Hour

// Config is the coordinator's config file. Its first two fields are dependency-watchdog's
// weeder ConfigMap data, read as they are; the rest are depwatch's additions, all optional.
//
//	watchDuration: 5m0s                     # how long a weeder Job keeps restarting dependents
//	servicesAndDependantSelectors:          # service name → its dependents' pod selectors (OR-ed)
//	  etcd-main-client:
//	    podSelectors:
//	      - matchLabels: {app: kubernetes, role: apiserver}
//	namespaces:                             # which namespaces to watch; absent: all
//	  selector: {matchLabels: {gardener.cloud/role: shoot}}
//	  names: [shoot--a]                     # optional: only these (AND-ed with the selector)
//	useEndpoints: false                     # legacy v1 Endpoints instead of EndpointSlices
//	gracePeriod: 30s                        # weeder's GRACE_PERIOD; absent: each pod's own
//	armWeeder: true                         # launch the weeder armed when the outage begins
//	armedMaxWait: 6h                        # an armed weeder's MAX_WAIT for its service
//	reapCooldown: 1m                        # weeder's REAP_COOLDOWN per controller; 0s: off
//	jobTemplate: {...}                      # see jobs.Template
//	prober: {...}                           # dependency-watchdog's prober config: see ProberConfig
type Config struct {
	WatchDuration                 *metav1.Duration              `json:"watchDuration,omitempty"`
	ServicesAndDependantSelectors map[string]DependantSelectors `json:"servicesAndDependantSelectors"`

	Namespaces   *NamespaceSelection `json:"namespaces,omitempty"`
	UseEndpoints bool                `json:"useEndpoints,omitempty"`
	GracePeriod  *metav1.Duration    `json:"gracePeriod,omitempty"`
	// ArmWeeder (default true): on Ready → notReady launch the service's weeder armed, so it
	// reaps the moment the service is Ready again; false: launched on the return only (stop on the
	// outage, launch on the return). A service's own `arm` overrides it.
	ArmWeeder *bool `json:"armWeeder,omitempty"`
	// ArmedMaxWait is an armed weeder's MAX_WAIT (default 6h): after it, the Job ends and the
	// service's return launches an unarmed weeder.
	ArmedMaxWait *metav1.Duration `json:"armedMaxWait,omitempty"`
	// ReapCooldown is the weeder's REAP_COOLDOWN (default 1m, jobs.DefaultWeederReapCooldown):
	// once it restarted pods of a controller, that controller's new pods are restarted again
	// only after this long, so a dependent broken for another reason is restarted at most
	// 1 + floor(watchDuration / reapCooldown) times per weeder run. 0s turns the bound off.
	ReapCooldown *metav1.Duration `json:"reapCooldown,omitempty"`
	JobTemplate  jobs.Template    `json:"jobTemplate,omitempty"`
	// Prober is dependency-watchdog's prober config plus depwatch's additions; nil: no probe Jobs.
	Prober *ProberConfig `json:"prober,omitempty"`

	// proberRefused: the prober section was given but refused (its problems are reported),
	// so a config without services is not also told it lacks a prober section.
	proberRefused bool
}

// DependantSelectors is dependency-watchdog's per-service entry.
type DependantSelectors struct {
	PodSelectors []*metav1.LabelSelector `json:"podSelectors"`
	// Arm (depwatch's addition) overrides armWeeder for this service.
	Arm *bool `json:"arm,omitempty"`
}

// Arm reports whether the service's weeder is launched armed when an outage begins.
func (c *Config) Arm(service string) bool {
	if d, ok := c.ServicesAndDependantSelectors[service]; ok && d.Arm != nil {
		return *d.Arm
	}
	return c.ArmWeeder == nil || *c.ArmWeeder
}

// MaxWait returns an armed weeder's MAX_WAIT (default 6h).
func (c *Config) MaxWait() time.Duration {
	if c.ArmedMaxWait == nil || c.ArmedMaxWait.Duration == 0 {
		return jobs.DefaultArmedMaxWait
	}
	return c.ArmedMaxWait.Duration
}

// Cooldown returns the weeder's REAP_COOLDOWN: nil when unset (the weeder's default), else
// the configured value (0 = off).
func (c *Config) Cooldown() *time.Duration {
	if c.ReapCooldown == nil {
		return nil
	}
	d := c.ReapCooldown.Duration
	return &d
}

// NamespaceSelection chooses the namespaces whose services are watched.
type NamespaceSelection struct {
	// Selector on the namespaces' labels; nil: every namespace. An empty selector is refused.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Names, if set, limits the watch to these namespaces.
	Names []string `json:"names,omitempty"`
}

// Watch returns the effective watch duration (default 5m0s).
func (c *Config) Watch() time.Duration {
	if c.WatchDuration == nil || c.WatchDuration.Duration == 0 {
		return DefaultWatchDuration
	}
	return c.WatchDuration.Duration
}

// Services returns the configured service names, sorted.
func (c *Config) Services() []string {
	out := make([]string, 0, len(c.ServicesAndDependantSelectors))
	for s := range c.ServicesAndDependantSelectors {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Selectors returns a service's pod selectors as values.
func (c *Config) Selectors(service string) []metav1.LabelSelector {
	d := c.ServicesAndDependantSelectors[service]
	out := make([]metav1.LabelSelector, 0, len(d.PodSelectors))
	for _, s := range d.PodSelectors {
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}

// NamespaceSelector returns the label selector for namespaces (Everything when unset).
func (c *Config) NamespaceSelector() labels.Selector {
	if c.Namespaces == nil || c.Namespaces.Selector == nil {
		return labels.Everything()
	}
	s, err := metav1.LabelSelectorAsSelector(c.Namespaces.Selector)
	if err != nil { // validated at load
		return labels.Nothing()
	}
	return s
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
			errs = append(errs, fmt.Errorf("%s: unknown field (known: watchDuration, servicesAndDependantSelectors, namespaces, useEndpoints, gracePeriod, armWeeder, armedMaxWait, reapCooldown, jobTemplate, prober)", pathKey(k)))
			continue
		}
		if target == nil {
			continue
		}
		if err := strictJSON(top[k], target); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s", k, cleanJSONError(err)))
		}
	}
	if raw, ok := top["servicesAndDependantSelectors"]; ok {
		var services map[string]json.RawMessage
		if err := json.Unmarshal(raw, &services); err != nil {
			errs = append(errs, fmt.Errorf("servicesAndDependantSelectors: must be a map of service name to {podSelectors: [...]}: %s", cleanJSONError(err)))
		} else {
			cfg.ServicesAndDependantSelectors = map[string]DependantSelectors{}
			for name, raw := range services {
				var d DependantSelectors
				if err := strictJSON(raw, &d); err != nil {
					errs = append(errs, fmt.Errorf("servicesAndDependantSelectors.%s: %s", pathKey(name), cleanJSONError(err)))
					continue
				}
				cfg.ServicesAndDependantSelectors[name] = d
			}
		}
	}
	var proberErrs []error
	if len(proberRaw) > 0 {
		cfg.Prober, proberErrs = parseProber(proberRaw)
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
	for _, d := range []struct {
		field string
		value *metav1.Duration
	}{{"watchDuration", c.WatchDuration}, {"armedMaxWait", c.ArmedMaxWait}, {"gracePeriod", c.GracePeriod}, {"reapCooldown", c.ReapCooldown}} {
		switch {
		case d.value == nil:
		case d.value.Duration < 0:
			add("%s: %s: must not be negative", d.field, d.value.Duration)
		case d.value.Duration > MaxDuration:
			add("%s: %s: must be at most %s", d.field, d.value.Duration, MaxDuration)
		}
	}
	if len(c.ServicesAndDependantSelectors) == 0 && c.Prober == nil && !c.proberRefused {
		add("servicesAndDependantSelectors: required: at least one service with its dependents' podSelectors (or a prober section)")
	}
	for _, name := range c.Services() {
		field := "servicesAndDependantSelectors." + pathKey(name)
		for _, m := range validation.IsDNS1035Label(name) {
			add("%s: %q is not a service name: %s", field, name, m)
		}
		d := c.ServicesAndDependantSelectors[name]
		if len(d.PodSelectors) == 0 {
			add("%s.podSelectors: required: at least one pod selector", field)
		}
		for i, s := range d.PodSelectors {
			f := fmt.Sprintf("%s.podSelectors[%d]", field, i)
			if s == nil {
				add("%s: must not be null", f)
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(s)
			switch {
			case err != nil:
				add("%s: %v", f, err)
			case sel.Empty():
				add("%s: empty selector: it would select every pod in the namespace", f)
			}
		}
	}
	if c.Namespaces != nil {
		if c.Namespaces.Selector != nil {
			// Absent means every namespace; a selector that is written but empty is more
			// likely a templating slip than a choice, so it is refused like an empty pod selector.
			switch s, err := metav1.LabelSelectorAsSelector(c.Namespaces.Selector); {
			case err != nil:
				add("namespaces.selector: %v", err)
			case s.Empty():
				add("namespaces.selector: empty: it would select every namespace (leave namespaces.selector out to mean every namespace)")
			}
		}
		for i, n := range c.Namespaces.Names {
			for _, m := range validation.IsDNS1123Label(n) {
				add("namespaces.names[%d]: %q: %s", i, n, m)
			}
		}
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
				key := pathKey(fmt.Sprint(k))
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

// pathKey is a map key as it appears in a field path: as it is when it is plain, quoted when it
// holds spaces, quotes or control characters, so that a problem stays on one line and its
// field is recognisable.
func pathKey(k string) string {
	if k == "" || strings.IndexFunc(k, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' }) >= 0 {
		return strconv.Quote(k)
	}
	return k
}

func strictJSON(raw json.RawMessage, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(into)
}

// cleanJSONError turns encoding/json's messages into ones about the config file.
func cleanJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %s: a %s cannot be a %s", te.Field, te.Value, te.Type)
		}
		return fmt.Sprintf("a %s cannot be a %s", te.Value, te.Type)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func joinLines(errs []error) error {
	lines := make([]string, 0, len(errs))
	for _, e := range errs {
		lines = append(lines, e.Error())
	}
	return errors.New(strings.Join(lines, "\n"))
}
