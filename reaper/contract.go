package reaper

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/depwatch/depwatch/internal/apilimit"
	"github.com/depwatch/depwatch/internal/envconf"
	"github.com/depwatch/depwatch/internal/podstate"
)

// The variables of a reap run that depwatch's coordinator writes into its weeder Jobs:
// JobSettings.Env writes them and LoadOptions (with its loaders) reads them, both through
// these names, so the two sides cannot name a variable differently.
const (
	envNamespace         = "NAMESPACE"
	envLabelSelectors    = "LABEL_SELECTORS"
	envContainerStatuses = "CONTAINER_STATUSES"
	envWatch             = "WATCH"
	envRunDuration       = "RUN_DURATION"
	envGracePeriod       = "GRACE_PERIOD"
	envReapCooldown      = "REAP_COOLDOWN"
	envStartWhenReady    = "START_WHEN_READY"
	envMaxWait           = "MAX_WAIT"
	envTargets           = "TARGETS"
	envDryRun            = "DRY_RUN"
	envReadyWhen         = "READY_WHEN"
	envBackOffFloor      = "BACKOFF_FLOOR"
	envEvict             = "EVICT"
)

// DefaultBackOffFloor is the weeder Jobs' BACKOFF_FLOOR unless the coordinator's config says
// otherwise: a fresh pod's create to Ready as measured on the lab (docs/benchmarks.md, row
// (a): at most 1.46 s), rounded up. A plain reap run's default is 0 (off), as pod-reaper.
const DefaultBackOffFloor = 2 * time.Second

// JobSettings are a reap run's settings as plain values, the part of the environment a Job
// made by the coordinator carries (a weeder: WATCH, CONTAINER_STATUSES, the selectors, the
// gate). Env writes them; LoadOptions reads them back into the Options they mean, which the
// round-trip test proves for generated values.
type JobSettings struct {
	Watch             bool     // WATCH, written when true
	ContainerStatuses []string // CONTAINER_STATUSES, comma-separated
	// Selectors are label selectors in their string form, OR-ed (LABEL_SELECTORS, a JSON
	// list); none may be empty.
	Selectors   []string
	Namespace   string         // NAMESPACE; "" = every namespace
	RunDuration time.Duration  // RUN_DURATION; 0 = forever, not written
	GracePeriod *time.Duration // GRACE_PERIOD; nil = the pod's own
	// ReapCooldown (REAP_COOLDOWN) is always written, even 0s: the run's value is
	// authoritative like the rest of its environment, so a Job template's env cannot loosen
	// the bound.
	ReapCooldown   time.Duration
	StartWhenReady *ServiceRef   // START_WHEN_READY, <namespace>/<service>
	MaxWait        time.Duration // MAX_WAIT, written when > 0 (only valid with a gate)
	Targets        []Target      // TARGETS, a JSON list
	DryRun         bool          // DRY_RUN, written when true
	// ReadyWhen (READY_WHEN) is when START_WHEN_READY's service counts as back, written when
	// not any (a TARGETS run carries each target's own in TARGETS).
	ReadyWhen podstate.ReadyWhen
	// BackOffFloor (BACKOFF_FLOOR) is always written, like REAP_COOLDOWN: a crash-looping pod
	// the kubelet restarts sooner than this is left to it; 0 = off.
	BackOffFloor time.Duration
	// Client: the run's API rate limits (KUBE_API_*), each written when set.
	Client ClientLimits
	// Evict (EVICT) is always written, false for every weeder the coordinator launches: the
	// admission policy on a weeder's own actions (manifests/admission/weeder-deletes.yaml)
	// admits the delete of a crash-looping pod, which it can read, and refuses every eviction,
	// whose pod it cannot; written, so a jobTemplate.env EVICT=true cannot reach the run.
	Evict bool
}

// Env is the environment that LoadOptions reads back as s: each variable in this order,
// written when its condition holds.
func (s JobSettings) Env() []corev1.EnvVar {
	var w envconf.Writer
	for _, v := range []struct {
		name, value string
		write       bool
	}{
		{envWatch, envconf.FormatBool(true), s.Watch},
		{envContainerStatuses, strings.Join(s.ContainerStatuses, ","), len(s.ContainerStatuses) > 0},
		{envLabelSelectors, LabelSelectorsValue(s.Selectors), len(s.Selectors) > 0},
		{envNamespace, s.Namespace, s.Namespace != ""},
		{envRunDuration, envconf.FormatDuration(s.RunDuration), s.RunDuration > 0},
		{envGracePeriod, envconf.FormatDuration(ptr.Deref(s.GracePeriod, 0)), s.GracePeriod != nil},
		{envReapCooldown, envconf.FormatDuration(s.ReapCooldown), true},
		{envStartWhenReady, ptr.Deref(s.StartWhenReady, ServiceRef{}).String(), s.StartWhenReady != nil},
		{envMaxWait, envconf.FormatDuration(s.MaxWait), s.MaxWait > 0},
		{envTargets, TargetsValue(s.Targets), len(s.Targets) > 0},
		{envDryRun, envconf.FormatBool(true), s.DryRun},
		{envReadyWhen, s.ReadyWhen.String(), s.ReadyWhen != podstate.ReadyAny},
		{envBackOffFloor, envconf.FormatDuration(s.BackOffFloor), true},
		{envEvict, envconf.FormatBool(s.Evict), true},
	} {
		if v.write {
			w.Set(v.name, v.value)
		}
	}
	s.Client.API.Write(&w, envKubeAPIQPS, envKubeAPIBurst)
	s.Client.Events.Write(&w, envKubeAPIEventsQPS, envKubeAPIEventsBurst)
	return w.Env()
}

// JobEnvNames are the variables Env can write, in the settings table's order (its Job
// entries): all of a weeder Job's environment that is its run's own. The admission policy
// that keeps the coordinator to launching depwatch's Jobs admits no other name in a weeder Job
// (manifests/admission/jobs.yaml; a test keeps the two equal), so a Job's environment cannot
// point the run anywhere its contract does not.
func JobEnvNames() []string {
	var names []string
	for _, s := range settings {
		if s.Job {
			names = append(names, s.Name)
		}
	}
	return names
}

// StartsWhenReady reports whether a Job's environment gates its run on a service
// (START_WHEN_READY set): how an armed weeder written by hand is told from its env.
func StartsWhenReady(env []corev1.EnvVar) bool {
	v, ok := envconf.LookupIn(env)(envStartWhenReady)
	return ok && v != ""
}

// The client-side rate limits of a run: one for what it reads and deletes, one of its own for
// its Events, so a delete never waits behind an Event (each reaped pod gets one).
const (
	envKubeAPIQPS         = "KUBE_API_QPS"
	envKubeAPIBurst       = "KUBE_API_BURST"
	envKubeAPIEventsQPS   = "KUBE_API_EVENTS_QPS"
	envKubeAPIEventsBurst = "KUBE_API_EVENTS_BURST"
)

// ClientLimits are a run's API rate limits; an unset (zero) half takes its default
// (DefaultClientLimits), so a run for one service needs none of them.
type ClientLimits struct {
	API    apilimit.Limit // KUBE_API_QPS, KUBE_API_BURST
	Events apilimit.Limit // KUBE_API_EVENTS_QPS, KUBE_API_EVENTS_BURST
}

// DefaultClientLimits are a run's limits where the environment sets none: client-go's
// default, which pod-reaper runs with, for each of the two clients.
var DefaultClientLimits = ClientLimits{API: apilimit.Default, Events: apilimit.Default}

// Effective is what the run's clients use: l with DefaultClientLimits where unset.
func (l ClientLimits) Effective() ClientLimits {
	return ClientLimits{API: l.API.Or(DefaultClientLimits.API), Events: l.Events.Or(DefaultClientLimits.Events)}
}
