package reaper

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/depwatch/depwatch/internal/podstate"
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

// loadSelectors builds the OR-ed label selectors: one per LABEL_SELECTORS entry (or a single
// one without LABEL_SELECTORS), each ANDed with LABEL_SELECTOR and the KEY/VALUES filters.
// The result is never empty; it may be labels.Everything() only when no label filter is set.
func loadSelectors(e *envconf.Reader) []labels.Selector {
	var base labels.Requirements
	if r := labelPair(e, "EXCLUDE_LABEL_KEY", "EXCLUDE_LABEL_VALUES", selection.NotIn); r != nil {
		base = append(base, *r)
	}
	if r := labelPair(e, "REQUIRE_LABEL_KEY", "REQUIRE_LABEL_VALUES", selection.In); r != nil {
		base = append(base, *r)
	}
	if v, ok := e.Get("LABEL_SELECTOR"); ok {
		if sel, err := labels.Parse(v); err != nil {
			e.Fail("LABEL_SELECTOR", v, "not a valid label selector: %v", err)
		} else {
			reqs, _ := sel.Requirements()
			base = append(base, reqs...)
		}
	}

	entries, set := parseLabelSelectors(e)
	if !set || len(entries) == 0 { // unset, or set but invalid (already reported)
		return []labels.Selector{labels.NewSelector().Add(base...)}
	}
	out := make([]labels.Selector, 0, len(entries))
	for _, reqs := range entries {
		out = append(out, labels.NewSelector().Add(base...).Add(reqs...))
	}
	return out
}

// LabelSelectorsValue writes the LABEL_SELECTORS variable that parseLabelSelectors reads back.
func LabelSelectorsValue(selectors []string) string {
	raw, _ := json.Marshal(selectors) // []string always marshals
	return string(raw)
}

// parseLabelSelectors reads LABEL_SELECTORS, a JSON list of selector strings (JSON rather than
// one-per-line so that an entry can never be split or merged by accident). Every entry must
// select something: an empty list or an empty entry is an error, because an empty selector
// means "every pod" and a templating slip must not turn a weeder into a cluster-wide reaper.
func parseLabelSelectors(e *envconf.Reader) ([]labels.Requirements, bool) {
	const name = envLabelSelectors
	v, ok := e.Get(name)
	if !ok {
		return nil, false
	}
	var raw []string
	if err := json.Unmarshal([]byte(v), &raw); err != nil {
		e.Fail(name, v, `must be a JSON list of label selectors, e.g. ["app=a","app=b"]: %v`, err)
		return nil, true
	}
	if len(raw) == 0 {
		e.Fail(name, v, "must list at least one label selector")
		return nil, true
	}
	out := make([]labels.Requirements, 0, len(raw))
	bad := false
	for i, s := range raw {
		sel, err := labels.Parse(s)
		switch {
		case err != nil:
			e.Fail(name, v, "entry %d (%q) is not a valid label selector: %v", i, s, err)
			bad = true
		case sel.Empty():
			e.Fail(name, v, "entry %d (%q) is empty and would select every pod", i, s)
			bad = true
		default:
			reqs, _ := sel.Requirements()
			out = append(out, reqs)
		}
	}
	if bad {
		return nil, true
	}
	return out, true
}

// labelPair turns a KEY/VALUES pair into a label requirement.
func labelPair(e *envconf.Reader, keyName, valuesName string, op selection.Operator) *labels.Requirement {
	key, values, ok := pair(e, keyName, valuesName)
	if !ok {
		return nil
	}
	r, err := labels.NewRequirement(key, op, values)
	if err != nil {
		e.Fail(keyName, key, "with %s=%q is not a valid label requirement: %v", valuesName, strings.Join(values, ","), err)
		return nil
	}
	return r
}

// pair reads a KEY/VALUES pair; ok=false when it is unset or bad. Setting only one half is an
// error (pod-reaper silently ignored the filter and so reaped more than intended).
func pair(e *envconf.Reader, keyName, valuesName string) (key string, values []string, ok bool) {
	keySet, valuesSet := e.IsSet(keyName), e.IsSet(valuesName)
	switch {
	case keySet && !valuesSet:
		v, _ := e.Lookup(keyName)
		e.Fail(keyName, v, "%s must be set too", valuesName)
	case !keySet && valuesSet:
		v, _ := e.Lookup(valuesName)
		e.Fail(valuesName, v, "%s must be set too", keyName)
	}
	if !keySet || !valuesSet {
		return "", nil, false
	}
	key, keyOK := e.Get(keyName)
	values, valuesOK := list(e, valuesName, emptyIsAValue)
	return key, values, keyOK && valuesOK
}

// annotationFilter is REQUIRE_ANNOTATION_KEY/VALUES. The API cannot filter on annotations, so
// it is checked client-side, before the rules.
type annotationFilter struct {
	key    string
	values []string
}

func loadAnnotationFilter(e *envconf.Reader) *annotationFilter {
	key, values, ok := pair(e, "REQUIRE_ANNOTATION_KEY", "REQUIRE_ANNOTATION_VALUES")
	if !ok {
		return nil
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		e.Fail("REQUIRE_ANNOTATION_KEY", key, "not a valid annotation key: %s", strings.Join(errs, "; "))
		return nil
	}
	return &annotationFilter{key: key, values: values}
}

func (a *annotationFilter) admits(pod *corev1.Pod) bool {
	if a == nil {
		return true
	}
	v, ok := pod.Annotations[a.key]
	return ok && slices.Contains(a.values, v)
}

func (a *annotationFilter) String() string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%s in (%s)", a.key, strings.Join(a.values, ","))
}

// Target is one service of a multi-service weeder run (TARGETS): the dependents selected by
// Selectors in PodNamespace (absent: Namespace) are reaped once Service in Namespace is Ready.
// A storm of outages is covered by a few Jobs, each watching many services, instead of one
// Job per service; a service with dependents in several namespaces is one target per
// namespace.
type Target struct {
	Namespace string   `json:"namespace"`
	Service   string   `json:"service"`
	Selectors []string `json:"selectors"`
	// PodNamespace is the dependents' namespace when it is not the service's (a workload's
	// depends-on annotation may name another namespace's Service).
	PodNamespace string `json:"podNamespace,omitempty"`
	// ReadyWhen is when Service counts as back ("any", "all" or a count); absent: the run's
	// READY_WHEN.
	ReadyWhen *podstate.ReadyWhen `json:"readyWhen,omitempty"`
}

func (t Target) ref() ServiceRef { return ServiceRef{Namespace: t.Namespace, Name: t.Service} }

// pods is the namespace of the target's dependents.
func (t Target) pods() string {
	if t.PodNamespace != "" {
		return t.PodNamespace
	}
	return t.Namespace
}

// String names the target in logs and errors: its service, and where its dependents are when
// that is another namespace.
func (t Target) String() string {
	if t.pods() != t.Namespace {
		return t.ref().String() + " (dependents in " + t.pods() + ")"
	}
	return t.ref().String()
}

// TargetsValue writes the TARGETS variable that ParseTargets reads back.
func TargetsValue(ts []Target) string {
	raw, _ := json.Marshal(ts) // strings and slices always marshal
	return string(raw)
}

// ParseTargets reads a TARGETS value: a JSON list of {namespace, service, selectors,
// podNamespace}. Every target needs a valid namespace and service name and at least one
// non-empty selector (an empty selector would reap every crash-looping pod of the namespace);
// a service listed twice for the same namespace of dependents is refused, because two runs
// for one service would restart its dependents twice.
func ParseTargets(v string) ([]Target, error) {
	var ts []Target
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ts); err != nil {
		return nil, fmt.Errorf(`must be a JSON list of {"namespace","service","selectors","podNamespace","readyWhen"}: %w`, err)
	}
	if len(ts) == 0 {
		return nil, errors.New("must list at least one target")
	}
	type place struct {
		ref  ServiceRef
		pods string
	}
	seen := map[place]bool{}
	var problems []string
	for i, t := range ts {
		if errs := validation.IsDNS1123Label(t.Namespace); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("target %d: namespace %q is not a valid namespace name: %s", i, t.Namespace, strings.Join(errs, "; ")))
		}
		if errs := validation.IsDNS1123Label(t.PodNamespace); t.PodNamespace != "" && len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("target %d: podNamespace %q is not a valid namespace name: %s", i, t.PodNamespace, strings.Join(errs, "; ")))
		}
		if errs := validation.IsDNS1035Label(t.Service); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("target %d: service %q is not a valid service name: %s", i, t.Service, strings.Join(errs, "; ")))
		}
		if p := (place{t.ref(), t.pods()}); seen[p] {
			problems = append(problems, fmt.Sprintf("target %d: service %s is listed twice", i, t))
		} else {
			seen[p] = true
		}
		if len(t.Selectors) == 0 {
			problems = append(problems, fmt.Sprintf("target %d (%s): needs at least one pod selector", i, t))
		}
		for j, s := range t.Selectors {
			sel, err := labels.Parse(s)
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("target %d (%s): selector %d (%q) is not a valid label selector: %v", i, t, j, s, err))
			case sel.Empty():
				problems = append(problems, fmt.Sprintf("target %d (%s): selector %d is empty and would select every pod", i, t, j))
			}
		}
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return ts, nil
}

// loadTargets reads TARGETS. A target names its own namespace, service and selectors, so
// NAMESPACE, START_WHEN_READY and LABEL_SELECTORS cannot be set beside it (which would win
// would be a guess); the label and annotation filters and every other setting apply to every
// target.
func loadTargets(e *envconf.Reader) []Target {
	v, ok := e.Get(envTargets)
	if !ok {
		return nil
	}
	ts, err := ParseTargets(v)
	if err != nil {
		e.Fail(envTargets, v, "%v", err)
		return nil
	}
	for _, name := range []string{envNamespace, envStartWhenReady, envLabelSelectors} {
		if w, set := e.NonEmpty(name); set {
			e.Fail(name, w, "cannot be set with TARGETS: each target names its own namespace, service and selectors")
		}
	}
	return ts
}

// forTarget is the single-service run of one target: the run's settings with the target's
// dependents' namespace, its service as START_WHEN_READY, and its selectors ANDed with the run's label
// filters (the only selector a TARGETS run has).
func (o Options) forTarget(t Target) Options {
	var base labels.Requirements
	if len(o.Selectors) > 0 {
		base, _ = o.Selectors[0].Requirements()
	}
	one := o
	one.Targets = nil
	one.Warnings = nil // logged once, by the run
	one.Namespace = t.pods()
	ref := t.ref()
	one.StartWhenReady = &ref
	if t.ReadyWhen != nil {
		one.ReadyWhen = *t.ReadyWhen
	}
	one.Selectors = make([]labels.Selector, 0, len(t.Selectors))
	for _, s := range t.Selectors {
		sel, _ := labels.Parse(s) // ParseTargets checked it
		reqs, _ := sel.Requirements()
		one.Selectors = append(one.Selectors, labels.NewSelector().Add(base...).Add(reqs...))
	}
	return one
}
