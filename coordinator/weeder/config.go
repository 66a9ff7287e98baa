package weeder

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/coordinator/ctrl"
	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/depwatch/depwatch/jobs"
	"github.com/depwatch/depwatch/reaper"
)

// DefaultWatchDuration is dependency-watchdog's default for watchDuration.
const DefaultWatchDuration = 5 * time.Minute

// Config is the weeder's section of the coordinator's config file: the top-level fields. Its
// first two are dependency-watchdog's weeder ConfigMap data, read as they are; the rest are
// depwatch's additions, all optional. Its getters (Watch, MaxWait, Cooldown, Floor, Grace)
// are the one place a weeder Job's defaults are applied: jobs.WeederSpec takes their values
// as they are.
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
//	backOffFloor: 2s                        # weeder's BACKOFF_FLOOR; 0s: off
//	dependsOnAnnotation: true               # follow workloads' depwatch.io/depends-on
//
// A service's entry may add `arm: false` and `readyWhen: any | all | <count>`.
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
	// BackOffFloor is the weeder's BACKOFF_FLOOR (default reaper.DefaultBackOffFloor, 2s): a
	// crash-looping dependent the kubelet restarts sooner than this is left to it. 0s: off.
	BackOffFloor *metav1.Duration `json:"backOffFloor,omitempty"`
	// DependsOnAnnotation (default true) follows the depwatch.io/depends-on annotation of
	// Deployments, StatefulSets and DaemonSets (dependson.go); false: the config alone.
	DependsOnAnnotation *bool `json:"dependsOnAnnotation,omitempty"`

	// ReadyWhenDefault is when a service whose entry says no readyWhen counts as back. It is
	// not read from the file: the command decides it (config.DefaultReadyWhen), since
	// under dependency-watchdog's weeder command nothing in gardenlet's ConfigMap can say it.
	ReadyWhenDefault podstate.ReadyWhen `json:"-"`
}

// DependantSelectors is dependency-watchdog's per-service entry.
type DependantSelectors struct {
	PodSelectors []*metav1.LabelSelector `json:"podSelectors"`
	// Arm (depwatch's addition) overrides armWeeder for this service.
	Arm *bool `json:"arm,omitempty"`
	// ReadyWhen (depwatch's addition) is when the service counts as back: "any" (one ready
	// endpoint, the default, dependency-watchdog v1.5's), "all" (every endpoint that is not
	// terminating is ready, dependency-watchdog v1.6+'s) or a count of ready endpoints (2).
	ReadyWhen *intstr.IntOrString `json:"readyWhen,omitempty"`
}

// ReadyWhenOf is when the service counts as back: its entry's readyWhen, else
// ReadyWhenDefault (Validate refuses a value it cannot read).
func (c *Config) ReadyWhenOf(service string) podstate.ReadyWhen {
	d := c.ServicesAndDependantSelectors[service]
	if d.ReadyWhen == nil {
		return c.ReadyWhenDefault
	}
	w, _ := d.readyWhen()
	return w
}

func (d DependantSelectors) readyWhen() (podstate.ReadyWhen, error) {
	if d.ReadyWhen == nil {
		return podstate.ReadyAny, nil
	}
	return podstate.ParseReadyWhen(d.ReadyWhen.String())
}

// Floor returns the weeder's BACKOFF_FLOOR (default reaper.DefaultBackOffFloor; 0 = off).
func (c *Config) Floor() time.Duration { return orDefault(c.BackOffFloor, reaper.DefaultBackOffFloor) }

// orDefault is d's duration, def when d is unset.
func orDefault(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// Arm reports whether the service's weeder is launched armed when an outage begins.
func (c *Config) Arm(service string) bool {
	if d, ok := c.ServicesAndDependantSelectors[service]; ok && d.Arm != nil {
		return *d.Arm
	}
	return c.ArmWeeder == nil || *c.ArmWeeder
}

// MaxWait returns an armed weeder's MAX_WAIT (default 6h, also for 0s).
func (c *Config) MaxWait() time.Duration {
	return cmp.Or(orDefault(c.ArmedMaxWait, 0), jobs.DefaultArmedMaxWait)
}

// Cooldown returns the weeder's REAP_COOLDOWN (default jobs.DefaultWeederReapCooldown; 0 =
// off).
func (c *Config) Cooldown() time.Duration {
	return orDefault(c.ReapCooldown, jobs.DefaultWeederReapCooldown)
}

// Grace returns the weeder's GRACE_PERIOD: nil when unset (each pod's own).
func (c *Config) Grace() *time.Duration {
	if c.GracePeriod == nil {
		return nil
	}
	return ptr.To(c.GracePeriod.Duration)
}

// NamespaceSelection chooses the namespaces whose services are watched.
type NamespaceSelection struct {
	// Selector on the namespaces' labels; nil: every namespace. An empty selector is refused.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Names, if set, limits the watch to these namespaces.
	Names []string `json:"names,omitempty"`
}

// Watch returns the effective watch duration (default 5m0s, also for 0s).
func (c *Config) Watch() time.Duration {
	return cmp.Or(orDefault(c.WatchDuration, 0), DefaultWatchDuration)
}

// Services returns the configured service names, sorted.
func (c *Config) Services() []string {
	return slices.Sorted(maps.Keys(c.ServicesAndDependantSelectors))
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

// NeedsNamespaceInformer: namespaces are chosen by their labels, so they are watched.
func (c *Config) NeedsNamespaceInformer() bool {
	return c.Namespaces != nil && c.Namespaces.Selector != nil && !c.NamespaceSelector().Empty()
}

// Configured: the service has an entry in the config.
func (c *Config) Configured(svc string) bool {
	_, ok := c.ServicesAndDependantSelectors[svc]
	return ok
}

// Validate checks every field of the section and names each invalid one.
func (c *Config) Validate() []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	c.validateDurations(add)
	for _, name := range c.Services() {
		c.validateService(name, add)
	}
	c.validateNamespaces(add)
	return errs
}

func (c *Config) validateDurations(add func(format string, a ...any)) {
	for _, d := range []struct {
		field string
		value *metav1.Duration
	}{{"watchDuration", c.WatchDuration}, {"armedMaxWait", c.ArmedMaxWait}, {"gracePeriod", c.GracePeriod}, {"reapCooldown", c.ReapCooldown}, {"backOffFloor", c.BackOffFloor}} {
		switch {
		case d.value == nil:
		case d.value.Duration < 0:
			add("%s: %s: must not be negative", d.field, d.value.Duration)
		case d.value.Duration > ctrl.MaxDuration:
			add("%s: %s: must be at most %s", d.field, d.value.Duration, ctrl.MaxDuration)
		}
	}
}

func (c *Config) validateService(name string, add func(format string, a ...any)) {
	field := "servicesAndDependantSelectors." + ctrl.PathKey(name)
	for _, m := range validation.IsDNS1035Label(name) {
		add("%s: %q is not a service name: %s", field, name, m)
	}
	d := c.ServicesAndDependantSelectors[name]
	switch w, err := d.readyWhen(); {
	case err != nil:
		add("%s.readyWhen: %s: %v", field, d.ReadyWhen.String(), err)
	case w != podstate.ReadyAny && c.UseEndpoints:
		add("%s.readyWhen: %s: needs EndpointSlices; with useEndpoints: true only \"any\" is supported", field, w)
	}
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

func (c *Config) validateNamespaces(add func(format string, a ...any)) {
	if c.Namespaces == nil {
		return
	}
	if c.Namespaces.Selector != nil {
		// Absent means every namespace; a selector that is written but empty is more likely
		// a templating slip than a choice, so it is refused like an empty pod selector.
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
