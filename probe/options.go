package probe

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Options is a validated probe configuration. Build it with LoadOptions.
type Options struct {
	Namespace                 string
	KubeconfigSecretName      string
	ProbeTimeout              time.Duration
	NodeMonitorGrace          time.Duration // KCM_NODE_MONITOR_GRACE_DURATION
	NodeLeaseFailureFraction  float64
	LeaseExpiryBufferFraction float64
	Resources                 []DependentResource
	DryRun                    bool
	// NodeConditions: worker pool → the node conditions that take its nodes out of the lease
	// count (NODE_CONDITIONS; pools not listed use DefaultUnhealthyNodeConditions).
	NodeConditions map[string][]string

	// Namespaces (NAMESPACES) are probed concurrently, each on its own, when set; Namespace
	// is then empty. Settings (NAMESPACE_SETTINGS) override the Job-wide ones per namespace.
	Namespaces []string
	Settings   map[string]NamespaceSettings
	// MembershipNamespace and MembershipName (NAMESPACES_CONFIGMAP): the ConfigMap whose
	// membership the run follows while it runs; empty = Namespaces stay as they are.
	MembershipNamespace string
	MembershipName      string
	Concurrency         int     // PROBE_CONCURRENCY
	Jitter              float64 // BACKOFF_JITTER_FACTOR, in [0,1)

	ScheduleSpec string        // "" = a single probe
	Schedule     cron.Schedule // nil = a single probe
	RunDuration  time.Duration // > 0 exactly when Schedule is set

	Client apilimit.Limit // KUBE_API_QPS, KUBE_API_BURST as set; zero: DefaultClientLimit
}

// LoadOptions reads every setting through lookup (os.LookupEnv in production). On bad input it
// returns a *envconf.ConfigError listing every problem at once, each as
// `NAME="value": problem`; it never panics.
func LoadOptions(lookup func(string) (string, bool)) (Options, error) {
	e := newEnv(lookup)
	var o Options
	// In this order, so that problems are listed as the settings table lists the variables.
	o.loadTargets(e)
	o.loadProbing(e)
	o.loadSchedule(e)
	if len(e.Problems) > 0 {
		return Options{}, &envconf.ConfigError{Problems: e.Problems}
	}
	return o, nil
}

// loadTargets reads which namespaces the run probes: NAMESPACE or NAMESPACES, and their
// settings.
func (o *Options) loadTargets(e *envconf.Reader) {
	single, hasSingle := e.Lookup(envNamespace)
	if hasSingle && strings.TrimSpace(single) == "" {
		e.Fail(envNamespace, single, "required, must not be empty")
		hasSingle = false
	} else if hasSingle {
		if errs := validation.IsDNS1123Label(single); len(errs) > 0 {
			e.Fail(envNamespace, single, "not a valid namespace name: %s", strings.Join(errs, "; "))
		}
		o.Namespace = single
	}
	if v, ok := e.Get(envNamespaces); ok {
		o.Namespaces = parseNamespaces(e, v)
	}
	switch {
	case hasSingle && o.Namespaces != nil:
		e.Fail(envNamespaces, strings.Join(o.Namespaces, ","), "set either NAMESPACE (one namespace) or NAMESPACES, not both (NAMESPACE=%q)", single)
	case !hasSingle && o.Namespaces == nil && !e.Has(envNamespace):
		e.Add("NAMESPACE: required (or NAMESPACES), not set")
	}
	if v, ok := e.Get(envNamespaceSettings); ok {
		o.Settings = parseNamespaceSettings(e, v, o.names())
	}
}

// loadProbing reads how each namespace is probed and scaled.
func (o *Options) loadProbing(e *envconf.Reader) {
	if v, ok := e.Get(envConcurrency); ok {
		n, err := envconf.Int(v)
		if err != nil || n <= 0 {
			e.Fail(envConcurrency, v, "must be an integer greater than 0")
		}
		o.Concurrency = n
	}
	if v, ok := e.Get(envJitter); ok {
		f, ok := envconf.Float(v)
		if !ok || f < 0 || f >= 1 {
			e.Fail(envJitter, v, "must be a number at least 0 and less than 1")
		}
		o.Jitter = f
	}
	if v, ok := e.Get(envKubeconfigSecret); ok {
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			e.Fail(envKubeconfigSecret, v, "not a valid Secret name: %s", strings.Join(errs, "; "))
		}
		o.KubeconfigSecretName = v
	}
	if v, ok := e.Get(envProbeTimeout); ok {
		o.ProbeTimeout, _ = positiveDuration(e, envProbeTimeout, v)
	}
	if v, ok := e.Get(envNodeMonitorGrace); ok {
		if d, valid := positiveDuration(e, envNodeMonitorGrace, v); valid && d < MinNodeMonitorGrace {
			e.Fail(envNodeMonitorGrace, v, "must be at least %s: %s", MinNodeMonitorGrace, whyMinNodeMonitorGrace)
		} else {
			o.NodeMonitorGrace = d
		}
	}
	o.NodeLeaseFailureFraction = fraction(e, envLeaseFailure)
	o.LeaseExpiryBufferFraction = fraction(e, envLeaseExpiryBuffer)
	if v, ok := e.Get(envDependentResources); ok {
		res, problems := parseDependentResources([]byte(v), envDependentResources)
		e.Problems = append(e.Problems, problems...)
		o.Resources = res
	}
	o.DryRun = e.Bool(envDryRun)
	o.Client = apilimit.Read(e, envKubeAPIQPS, envKubeAPIBurst)
	if v, ok := e.Get(envNodeConditions); ok {
		m, err := ParseNodeConditions(v)
		if err != nil {
			e.Fail(envNodeConditions, v, "%v", err)
		}
		o.NodeConditions = m
	}
}

// loadSchedule reads whether the run probes once or on a schedule, for how long, and the
// membership it follows.
func (o *Options) loadSchedule(e *envconf.Reader) {
	spec, hasSchedule := e.Get(envSchedule)
	if hasSchedule {
		o.ScheduleSpec = spec
		o.Schedule = e.Schedule(envSchedule, spec, strings.TrimSpace(spec))
	}
	if v, ok := e.Get(envRunDuration); ok {
		d, valid := positiveDuration(e, envRunDuration, v)
		switch {
		case valid && !hasSchedule:
			e.Fail(envRunDuration, v, "only valid with SCHEDULE (without SCHEDULE the Job probes once)")
		case valid:
			o.RunDuration = d
		}
	} else if hasSchedule {
		e.Add("RUN_DURATION: required with SCHEDULE (how long the Job keeps probing), not set")
	}
	if v, ok := e.Get(envNamespacesConfigMap); ok {
		o.MembershipNamespace, o.MembershipName = parseMembershipRef(e, v, o.Namespaces != nil, hasSchedule)
	}
}

// MinNodeMonitorGrace is the shortest node monitor grace period a run accepts, and the
// coordinator writes: a kubelet renews its node Lease every 10 s (a quarter of its 40 s lease
// duration), so with a shorter grace the leases of healthy nodes count as expired between two
// renewals, and a probe would scale a healthy control plane down. A shoot's own
// nodeMonitorGracePeriod below it is ignored by the coordinator; a Job's environment or a
// shard's membership ConfigMap below it is refused by the run, which then scales nothing.
const MinNodeMonitorGrace = 10 * time.Second

const whyMinNodeMonitorGrace = "kubelets renew their leases every 10s, so a shorter grace counts healthy nodes as expired"

// NamespaceSettings are one namespace's own settings in a multi-namespace run
// (NAMESPACE_SETTINGS): its shoot's nodeMonitorGracePeriod and worker pools' node conditions,
// and the earliest time of its first probe (the coordinator's initialDelay after it first saw
// the namespace, or the end of a throttling back-off).
type NamespaceSettings struct {
	NodeMonitorGrace time.Duration
	NodeConditions   map[string][]string
	NotBefore        time.Time
}

// namespaceSettingsWire is NamespaceSettings in NAMESPACE_SETTINGS.
type namespaceSettingsWire struct {
	NodeMonitorGrace string              `json:"nodeMonitorGrace,omitempty"`
	NodeConditions   map[string][]string `json:"nodeConditions,omitempty"`
	NotBefore        string              `json:"notBefore,omitempty"`
}

// NamespaceSettingsEnv is the value of NAMESPACE_SETTINGS for m ("" when there is nothing
// to say); LoadOptions reads it back.
func NamespaceSettingsEnv(m map[string]NamespaceSettings) string {
	w := map[string]namespaceSettingsWire{}
	for ns, s := range m {
		var e namespaceSettingsWire
		if s.NodeMonitorGrace > 0 {
			e.NodeMonitorGrace = s.NodeMonitorGrace.String()
		}
		if len(s.NodeConditions) > 0 {
			e.NodeConditions = s.NodeConditions
		}
		if !s.NotBefore.IsZero() {
			e.NotBefore = s.NotBefore.UTC().Format(time.RFC3339Nano)
		}
		if e.NodeMonitorGrace != "" || e.NodeConditions != nil || e.NotBefore != "" {
			w[ns] = e
		}
	}
	if len(w) == 0 {
		return ""
	}
	b, _ := json.Marshal(w) // strings only: cannot fail; keys sorted
	return string(b)
}

// NamespacesEnv is the value of NAMESPACES for a list of namespaces.
func NamespacesEnv(namespaces []string) string { return strings.Join(namespaces, ",") }

func parseNamespaces(e *envconf.Reader, v string) []string {
	seen := map[string]bool{}
	list := []string{}
	for _, ns := range strings.Split(v, ",") {
		ns = strings.TrimSpace(ns)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			e.Fail(envNamespaces, v, "%q is not a valid namespace name: %s", ns, strings.Join(errs, "; "))
			continue
		}
		if seen[ns] {
			e.Fail(envNamespaces, v, "%q is listed twice", ns)
			continue
		}
		seen[ns] = true
		list = append(list, ns)
	}
	return list
}

func parseNamespaceSettings(e *envconf.Reader, v string, known []string) map[string]NamespaceSettings {
	var w map[string]namespaceSettingsWire
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		e.Fail(envNamespaceSettings, v, "not a JSON object of namespace → {nodeMonitorGrace, nodeConditions, notBefore}: %v", err)
		return nil
	}
	out := map[string]NamespaceSettings{}
	for ns, s := range w {
		if !slices.Contains(known, ns) {
			e.Fail(envNamespaceSettings, v, "namespace %q is not one of NAMESPACE / NAMESPACES", ns)
			continue
		}
		var r NamespaceSettings
		if s.NodeMonitorGrace != "" {
			d, err := time.ParseDuration(s.NodeMonitorGrace)
			switch {
			case err != nil || d <= 0:
				e.Fail(envNamespaceSettings, v, "%s.nodeMonitorGrace %q: must be a Go duration greater than 0", ns, s.NodeMonitorGrace)
			case d < MinNodeMonitorGrace:
				e.Fail(envNamespaceSettings, v, "%s.nodeMonitorGrace %q: must be at least %s: %s", ns, s.NodeMonitorGrace, MinNodeMonitorGrace, whyMinNodeMonitorGrace)
			}
			r.NodeMonitorGrace = d
		}
		for pool, conds := range s.NodeConditions {
			if pool == "" || len(conds) == 0 || slices.Contains(conds, "") {
				e.Fail(envNamespaceSettings, v, "%s.nodeConditions: pool %q needs a non-empty list of condition types", ns, pool)
			}
		}
		r.NodeConditions = s.NodeConditions
		if s.NotBefore != "" {
			t, err := time.Parse(time.RFC3339Nano, s.NotBefore)
			if err != nil {
				e.Fail(envNamespaceSettings, v, "%s.notBefore %q: must be an RFC 3339 time", ns, s.NotBefore)
			}
			r.NotBefore = t
		}
		out[ns] = r
	}
	return out
}

// names are the namespaces the run probes, in the order given (validate lets only one of
// Namespace and Namespaces be set; a configuration with both names each).
func (o Options) names() []string {
	if o.Namespace != "" {
		return append([]string{o.Namespace}, o.Namespaces...)
	}
	return o.Namespaces
}

// target is the options of namespace ns of the run, with its own settings s applied.
func (o Options) target(ns string, s NamespaceSettings) Options {
	t := o
	t.Namespace, t.Namespaces, t.Settings = ns, nil, nil
	t.MembershipNamespace, t.MembershipName = "", ""
	if s.NodeMonitorGrace > 0 {
		t.NodeMonitorGrace = s.NodeMonitorGrace
	}
	if len(s.NodeConditions) > 0 {
		t.NodeConditions = s.NodeConditions
	}
	return t
}
