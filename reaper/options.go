package reaper

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/depwatch/depwatch/internal/podstate"
	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Options is a validated reaper configuration. Build it with LoadOptions.
type Options struct {
	Namespace string // "" = all namespaces
	NodeName  string // "" = all nodes
	// Selectors are OR-ed; each already holds LABEL_SELECTOR and the KEY/VALUES filters. Never
	// empty after LoadOptions.
	Selectors []labels.Selector

	ScheduleSpec string
	Schedule     cron.Schedule
	RunDuration  time.Duration // 0 = forever
	Watch        bool
	// ReapAtStart runs the first cycle at start instead of at SCHEDULE's first tick (REAP_AT_START;
	// WATCH and START_WHEN_READY imply it, see Run).
	ReapAtStart bool
	DryRun      bool
	Evict       bool
	GracePeriod *int64 // seconds; nil = the pod's own
	MaxPods     int    // 0 = unlimited
	// ReapCooldown: once pods of an owner (their controller, or a bare pod itself) were
	// reaped, its pods created since are not reaped until this has passed; 0 = off.
	ReapCooldown time.Duration
	Sorting      SortingStrategy
	Rules        []Rule
	// StartWhenReady, if set, is the gate: nothing is reaped until this service has a ready
	// endpoint; RUN_DURATION counts from that moment. MaxWait bounds the wait.
	StartWhenReady *ServiceRef
	MaxWait        time.Duration
	// ReadyWhen (READY_WHEN) is when the gate's service counts as Ready: any (the default),
	// all, or a count of ready endpoints; a TARGETS target may set its own.
	ReadyWhen podstate.ReadyWhen
	// BackOffFloor (BACKOFF_FLOOR): a matched crash-looping pod whose kubelet restarts it
	// sooner than this is left to the kubelet (about a fresh pod's start to Ready); 0 = off.
	BackOffFloor time.Duration
	// Targets (TARGETS): one run over all these services (runBatch), each target gated on its
	// own service and reaping its own dependents.
	Targets []Target

	// Client: the run's API rate limits (KUBE_API_*), as set; ClientLimits.Effective fills
	// in the defaults.
	Client ClientLimits

	// Warnings are accepted values worth a word (pod-reaper accepts them with the same
	// meaning, but they look like slips): Run logs each at start.
	Warnings []string

	annotation *annotationFilter // REQUIRE_ANNOTATION_KEY/VALUES; nil = none
	// Test seams; zero values mean the real thing.
	now      func() time.Time
	shuffle  func(n int, swap func(i, j int))
	onSynced func() // the run's caches have synced
}

// ServiceRef names a Service: START_WHEN_READY's <namespace>/<service>.
type ServiceRef struct {
	Namespace, Name string
}

func (s ServiceRef) String() string { return s.Namespace + "/" + s.Name }

// LoadOptions reads every setting through lookup (os.LookupEnv in production). On bad input it
// returns a *envconf.ConfigError listing every problem at once; it never panics.
func LoadOptions(lookup func(string) (string, bool)) (Options, error) {
	e := newEnv(lookup)
	var o Options
	loadPlace(e, &o)
	o.Targets = loadTargets(e)
	o.StartWhenReady, o.MaxWait = loadGate(e, o.Namespace)
	o.ReadyWhen = loadReadyWhen(e)
	o.Selectors = loadSelectors(e)
	o.annotation = loadAnnotationFilter(e)
	loadTiming(e, &o)
	loadActions(e, &o)

	// pod-reaper's README documents the phase rule as POD_PHASE_STATUSES, but pod-reaper reads
	// POD_STATUS_PHASES and ignores the other name, so a manifest written from the README
	// silently reaped without the phase filter.
	if v, ok := e.Lookup("POD_PHASE_STATUSES"); ok {
		e.Fail("POD_PHASE_STATUSES", v, "not a variable: pod-reaper's README names it, but pod-reaper reads POD_STATUS_PHASES and ignores this one (so it reaped without the phase filter); rename it to POD_STATUS_PHASES")
	}
	o.Client = ClientLimits{
		API:    apilimit.Read(e, envKubeAPIQPS, envKubeAPIBurst),
		Events: apilimit.Read(e, envKubeAPIEventsQPS, envKubeAPIEventsBurst),
	}
	var anyRuleSet bool
	o.Rules, anyRuleSet = loadRules(e)
	if len(o.Rules) == 0 && !anyRuleSet {
		e.Add("no rule is enabled: set at least one of CHAOS_CHANCE, CONTAINER_STATUSES, POD_STATUSES, POD_STATUS_PHASES, MAX_DURATION, MAX_UNREADY")
	}

	if len(e.Problems) > 0 {
		return Options{}, &envconf.ConfigError{Problems: e.Problems}
	}
	o.Warnings = e.Warnings
	return o, nil
}

// loadPlace reads where the run looks: NAMESPACE and NODE_NAME.
func loadPlace(e *envconf.Reader, o *Options) {
	if v, ok := e.Get(envNamespace); ok && v != "" {
		if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
			e.Fail(envNamespace, v, "not a valid namespace name: %s", strings.Join(errs, "; "))
		}
		o.Namespace = v
	}
	if v, ok := e.Get("NODE_NAME"); ok {
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			e.Fail("NODE_NAME", v, "not a valid node name: %s", strings.Join(errs, "; "))
		}
		o.NodeName = v
	}
}

// loadTiming reads when the run reaps: SCHEDULE and RUN_DURATION.
func loadTiming(e *envconf.Reader, o *Options) {
	o.ScheduleSpec, _ = e.Get("SCHEDULE")
	o.Schedule = e.Schedule("SCHEDULE", o.ScheduleSpec, o.ScheduleSpec)
	o.RunDuration, _ = duration(e, envRunDuration) // empty: forever, as pod-reaper
}

// loadActions reads how the run reaps: WATCH, REAP_AT_START, DRY_RUN, EVICT, GRACE_PERIOD,
// MAX_PODS, REAP_COOLDOWN and POD_SORTING_STRATEGY.
func loadActions(e *envconf.Reader, o *Options) {
	o.Watch = e.Bool(envWatch)
	o.ReapAtStart = e.Bool("REAP_AT_START")
	o.DryRun = e.Bool(envDryRun)
	o.Evict = e.Bool(envEvict)
	if d, ok := duration(e, envGracePeriod); ok {
		secs := int64(d / time.Second) // whole seconds, rounded down, like pod-reaper
		o.GracePeriod = &secs
	}
	if v, ok := e.Get("MAX_PODS"); ok {
		switch n, err := envconf.Int(v); {
		case err != nil:
			e.Fail("MAX_PODS", v, "must be an integer")
		case n > 0:
			o.MaxPods = n // negative means unlimited, like 0 (pod-reaper)
		}
	}
	o.ReapCooldown, _ = duration(e, envReapCooldown)
	o.BackOffFloor, _ = duration(e, envBackOffFloor)
	if v, ok := e.Get("POD_SORTING_STRATEGY"); ok {
		if !slices.Contains(sortingStrategies, SortingStrategy(v)) {
			e.Fail("POD_SORTING_STRATEGY", v, "must be one of random, oldest-first, youngest-first, pod-deletion-cost")
		} else {
			o.Sorting = SortingStrategy(v)
		}
	}
}

// loadGate reads START_WHEN_READY (<service> in NAMESPACE, or <namespace>/<service>) and
// MAX_WAIT (> 0; only meaningful with START_WHEN_READY, so setting it alone is a mistake).
func loadGate(e *envconf.Reader, namespace string) (*ServiceRef, time.Duration) {
	var ref *ServiceRef
	if v, gated := e.Get(envStartWhenReady); gated {
		ns, name, qualified := strings.Cut(strings.TrimSpace(v), "/")
		if !qualified {
			ns, name = namespace, ns
		}
		switch nsErrs, nameErrs := validation.IsDNS1123Label(ns), validation.IsDNS1035Label(name); {
		case strings.Contains(name, "/"):
			e.Fail(envStartWhenReady, v, "must be <service> or <namespace>/<service>")
		case !qualified && ns == "":
			e.Fail(envStartWhenReady, v, "names no namespace and NAMESPACE is not set: use <namespace>/<service>")
		case len(nsErrs)+len(nameErrs) == 0:
			ref = &ServiceRef{Namespace: ns, Name: name}
		default:
			if len(nsErrs) > 0 {
				e.Fail(envStartWhenReady, v, "namespace %q is not a valid namespace name: %s", ns, strings.Join(nsErrs, "; "))
			}
			if len(nameErrs) > 0 {
				e.Fail(envStartWhenReady, v, "service %q is not a valid service name: %s", name, strings.Join(nameErrs, "; "))
			}
		}
	}
	if withoutGate(e, envMaxWait) {
		return ref, 0
	}
	d, ok := duration(e, envMaxWait)
	if ok && d == 0 {
		v, _ := e.Get(envMaxWait)
		e.Fail(envMaxWait, v, "must be positive (the longest wait for START_WHEN_READY's service)")
		return ref, 0
	}
	return ref, d
}

// fieldSelector is the server-side field filter: spec.nodeName and what the rules can express.
func (o Options) fieldSelector() string {
	var sels []fields.Selector
	if o.NodeName != "" {
		sels = append(sels, fields.OneTermEqualSelector("spec.nodeName", o.NodeName))
	}
	for _, r := range o.Rules {
		if s, ok := r.(serverSideRule); ok {
			sels = append(sels, s.FieldSelector())
		}
	}
	if len(sels) == 0 {
		return ""
	}
	return fields.AndSelectors(sels...).String()
}

// validate guards Run against an Options that did not come from LoadOptions.
func (o Options) validate() error {
	var problems []string
	if len(o.Rules) == 0 {
		problems = append(problems, "no rule is enabled")
	}
	if len(o.Selectors) == 0 {
		problems = append(problems, "no label selector (use labels.Everything() to mean all pods)")
	}
	if o.Schedule == nil {
		problems = append(problems, "no schedule")
	}
	if o.ReapCooldown < 0 {
		problems = append(problems, fmt.Sprintf("REAP_COOLDOWN=%q: must not be negative", o.ReapCooldown))
	}
	if (o.StartWhenReady != nil || len(o.Targets) > 0) && o.MaxWait <= 0 {
		problems = append(problems, "START_WHEN_READY or TARGETS without a positive MAX_WAIT")
	}
	if len(problems) > 0 {
		return fmt.Errorf("reaper options: %w", &envconf.ConfigError{Problems: problems})
	}
	return nil
}

// withoutGate refuses name, a setting of the gate, when it is set without START_WHEN_READY or
// TARGETS.
func withoutGate(e *envconf.Reader, name string) bool {
	raw, set := e.Lookup(name)
	if set && !e.IsSet(envStartWhenReady) && !e.IsSet(envTargets) {
		e.Fail(name, raw, "only means something with START_WHEN_READY or TARGETS, neither of which is set")
		return true
	}
	return false
}

// loadReadyWhen reads READY_WHEN ("any", "all" or a count of ready endpoints), which only
// means something with START_WHEN_READY or TARGETS (for the targets without a readyWhen).
func loadReadyWhen(e *envconf.Reader) podstate.ReadyWhen {
	v, set := e.Lookup(envReadyWhen) // the default ("any") is no mistake without a gate
	if !set || strings.TrimSpace(v) == "" || withoutGate(e, envReadyWhen) {
		return podstate.ReadyAny
	}
	w, err := podstate.ParseReadyWhen(v)
	if err != nil {
		e.Fail(envReadyWhen, v, "%v", err)
		return podstate.ReadyAny
	}
	return w
}
