package reaper

import (
	"io"
	"slices"
	"strings"
	"time"

	"github.com/depwatch/depwatch/internal/envconf"
)

// settings are the environment variables of `depwatch reap`: the single source for the
// reader (defaults, what an empty value means; newEnv) and Usage, so the help text cannot
// drift from the parser. A variable whose empty value pod-reaper read as "match everything"
// refuses it; one where pod-reaper read it as "unset" (RUN_DURATION: forever) reads it so.
// The order is the order of Usage and of the problems LoadOptions reports. Job marks what a
// weeder Job the coordinator launches may carry (JobEnvNames); the rest is pod-reaper's.
var settings = []envconf.Var{
	{Name: envNamespace, Job: true, Desc: "only pods in this namespace; empty or unset = all namespaces"},
	{Name: "NODE_NAME", Empty: envconf.EmptyRefused, Desc: "only pods on this node (server-side field selector spec.nodeName)"},
	{Name: "LABEL_SELECTOR", Empty: envconf.EmptyRefused, Desc: "Kubernetes label selector, e.g. `a=b,c in (x,y),!d`; ANDed with the KEY/VALUES filters"},
	{Name: envLabelSelectors, Job: true, Desc: "JSON list of label selectors, OR-ed, e.g. `[\"app=a\",\"app=b\"]`; each is ANDed with the other filters; no entry may be empty"},
	{Name: "EXCLUDE_LABEL_KEY", Empty: envconf.EmptyRefused, Desc: "skip pods whose label KEY has one of EXCLUDE_LABEL_VALUES (label selector `notin`)"},
	{Name: "EXCLUDE_LABEL_VALUES", Desc: "comma-separated values for EXCLUDE_LABEL_KEY"},
	{Name: "REQUIRE_LABEL_KEY", Empty: envconf.EmptyRefused, Desc: "only pods whose label KEY has one of REQUIRE_LABEL_VALUES (label selector `in`)"},
	{Name: "REQUIRE_LABEL_VALUES", Desc: "comma-separated values for REQUIRE_LABEL_KEY"},
	{Name: "REQUIRE_ANNOTATION_KEY", Empty: envconf.EmptyRefused, Desc: "only pods whose annotation KEY has one of REQUIRE_ANNOTATION_VALUES"},
	{Name: "REQUIRE_ANNOTATION_VALUES", Desc: "comma-separated values for REQUIRE_ANNOTATION_KEY"},
	{Name: envStartWhenReady, Job: true, Empty: envconf.EmptyRefused, Desc: "gate: `<service>` (in NAMESPACE) or `<namespace>/<service>`; reap nothing until the service has a ready endpoint (its EndpointSlices), then run as configured with RUN_DURATION counted from that moment; reaping pauses while the service is not Ready again, and each return starts a full RUN_DURATION afresh"},
	{Name: envTargets, Job: true, Empty: envconf.EmptyRefused, Desc: "several gated runs in one: a JSON list of `{\"namespace\",\"service\",\"selectors\":[...]}`; each target reaps its selectors' pods in its namespace (or in `\"podNamespace\"` when its dependents are in another) once its service is Ready, as START_WHEN_READY does, with its own RUN_DURATION and MAX_WAIT; NAMESPACE, START_WHEN_READY and LABEL_SELECTORS cannot be set with it (the coordinator uses it to cover a storm of outages with few Jobs)"},
	{Name: envMaxWait, Job: true, Default: "6h", Desc: "with START_WHEN_READY or TARGETS: the longest wait for the service; when it passes first, the run ends with exit code 0 and nothing reaped; must be positive"},
	{Name: envReadyWhen, Job: true, Default: "any", Empty: envconf.EmptyUnset, Desc: "with START_WHEN_READY or TARGETS: when the service counts as Ready: `any` (one ready endpoint, dependency-watchdog v1.5's), `all` (every endpoint that is not terminating is ready, dependency-watchdog v1.6+'s), or a count of ready endpoints such as `2`; an endpoint whose ready condition is not set counts as ready, one listed by several EndpointSlices counts once; a TARGETS target's own `readyWhen` wins"},
	{Name: "SCHEDULE", Default: "@every 1m", Desc: "cron spec (optional seconds field; descriptors such as @every 5m, @hourly); cycles run on its ticks, the first at its first tick (as pod-reaper: @every 1m first reaps one minute after start), unless REAP_AT_START; cycles never overlap"},
	{Name: "REAP_AT_START", Default: "false", Desc: "run the first cycle at start (it always completes, so with RUN_DURATION=1s the run is one-shot), then follow SCHEDULE; implied by WATCH and by START_WHEN_READY (a cycle the moment the service is Ready)"},
	{Name: envRunDuration, Job: true, Default: "0s", Empty: envconf.EmptyUnset, Desc: "stop after this long, finishing the pod in hand; 0s or empty = run forever; a RUN_DURATION that ends before SCHEDULE's first tick reaps nothing (pod-reaper), unless REAP_AT_START"},
	{Name: envWatch, Job: true, Default: "false", Desc: "also watch matching pods and reap a pod the moment it matches (e.g. enters CrashLoopBackOff)"},
	{Name: envDryRun, Job: true, Default: "false", Desc: "only log what would be reaped (same MAX_PODS cap); change nothing, record no Events"},
	{Name: envEvict, Job: true, Default: "false", Desc: "use the policy/v1 Eviction API (honours PodDisruptionBudgets) instead of delete"},
	{Name: envGracePeriod, Job: true, Desc: "termination grace period, Go duration rounded down to whole seconds; unset = the pod's own"},
	{Name: "MAX_PODS", Default: "0", Desc: "reap at most this many pods per cycle (failed and skipped pods do not count); 0 or negative = unlimited"},
	{Name: envReapCooldown, Job: true, Default: "0s", Desc: "bound per owner (the pod's controller, e.g. its ReplicaSet; a bare pod is its own): once its pods were reaped, its pods created since (their replacements) are not reaped until this Go duration has passed; pods it already had are still reaped with that round. At most 1 + floor(RUN_DURATION / REAP_COOLDOWN) rounds per owner (per return of START_WHEN_READY's service: each return starts the cooldown and RUN_DURATION afresh), each pod of the owner reaped at most once per round; 0s = off (pod-reaper)"},
	{Name: envBackOffFloor, Job: true, Default: "0s", Desc: "a matched pod in crash-loop back-off that the kubelet restarts by itself sooner than this Go duration (from its waiting message `back-off 40s restarting ...` and last finish, or its restart count) is left to the kubelet, logged and counted as backoff-skipped: a fresh pod would not be Ready sooner; every restart logs the back-off it saved; 0s = off (pod-reaper: a plain reap run reaps what its rules match); the coordinator's weeder Jobs carry the config's backOffFloor (default 2s: the lab's measured create to Ready of a fresh pod, at most 1.46 s, docs/benchmarks.md (a), rounded up); a back-off depwatch cannot read is reaped as before, said once per run"},
	// The client's rate limits: their defaults are applied by ClientLimits.Effective, not
	// read from this table, so what a Job's environment leaves unset reads back as unset.
	{Name: envKubeAPIQPS, Job: true, Default: "5", Desc: "client-side rate limit of the run's API requests (lists, watches, deletes, evictions), requests a second, > 0; the coordinator raises it for a batch weeder Job by its number of services; a run the coordinator carries out in its own process ignores it and the other KUBE_API_* settings: it shares the process's one budget (--kube-api-qps, --kube-api-burst)"},
	{Name: envKubeAPIBurst, Job: true, Default: "10", Desc: "requests sent at once before KUBE_API_QPS applies, an integer >= 1"},
	{Name: envKubeAPIEventsQPS, Job: true, Default: "5", Desc: "the Events' own rate limit (Reaped, ReapSkipped), requests a second, > 0: an Event never delays a delete; an Event that cannot be written is counted, logged once per run, and not retried; once RBAC refuses one (no events create, as under pod-reaper's RBAC), none is sent again"},
	{Name: envKubeAPIEventsBurst, Job: true, Default: "10", Desc: "Events sent at once before KUBE_API_EVENTS_QPS applies, an integer >= 1"},
	{Name: "POD_SORTING_STRATEGY", Desc: "order in which matched pods are reaped: random, oldest-first, youngest-first, pod-deletion-cost (lowest first; pods without a start time go last in the age orders); unset = by namespace and name, the API's list order (as pod-reaper)"},
	{Name: "CHAOS_CHANCE", Desc: "rule: reap a matching pod with this probability, a float in [0,1]"},
	{Name: envContainerStatuses, Job: true, Desc: "rule: comma-separated waiting/terminated reasons of any container or init container, e.g. CrashLoopBackOff,OOMKilled; CrashLoopBackOff also matches a container that exited after at least one restart and will be restarted"},
	{Name: "POD_STATUSES", Desc: "rule: comma-separated pod status reasons, e.g. Evicted"},
	{Name: "POD_STATUS_PHASES", Desc: "rule: comma-separated pod phases: Pending, Running, Succeeded, Failed, Unknown"},
	{Name: "POD_PHASE_STATUSES", Desc: "refused: pod-reaper's README names the phase rule so, but pod-reaper reads POD_STATUS_PHASES and ignores this name"},
	{Name: "MAX_DURATION", Desc: "rule: pods running longer than this Go duration since status.startTime"},
	{Name: "MAX_UNREADY", Desc: "rule: pods whose Ready condition has not been True for longer than this Go duration"},
}

// Configured reports whether the environment sets any of reap's variables, even to an empty
// value. pod-reaper's image is configured by them alone, so depwatch started with no command
// runs reap when one is set (cmd/depwatch); when none is, reap would have no rule to run
// (pod-reaper stops then too: "no rules were loaded").
func Configured(lookup func(string) (string, bool)) bool {
	return slices.ContainsFunc(settings, func(s envconf.Var) bool {
		_, ok := lookup(s.Name)
		return ok
	})
}

// Usage writes every setting with its default and a one-line description.
func Usage(w io.Writer) {
	envconf.Usage(w, settings,
		"\nRules are ANDed: a pod is reaped only when every enabled rule matches; at least one rule must be enabled.",
		"A variable that is set must hold a valid value: an empty value is an error (never a silent \"match everything\"),",
		"except NAMESPACE (empty = all namespaces) and RUN_DURATION (empty = forever).",
		"With START_WHEN_READY the service account also needs list/watch on discovery.k8s.io endpointslices.")
}

// newEnv is the reader of reap's variables (the settings table): an empty value is read as
// pod-reaper reads it, handed to the variable's parser, unless the table says otherwise;
// booleans are read exactly as pod-reaper does; values are quoted whole in problems, as they
// always were. Its warnings are values pod-reaper accepts and depwatch accepts with the same
// meaning, but that are odd enough to say so (Run logs them at start).
func newEnv(lookup func(string) (string, bool)) *envconf.Reader {
	return &envconf.Reader{Lookup: lookup, Vars: settings, Empty: envconf.EmptyParsed}
}

// The typed readers below return ok=false when the variable is unset or its value is bad (the
// problem is then recorded); ok=true means the value is set and valid.

// duration parses a non-negative Go duration.
func duration(e *envconf.Reader, name string) (time.Duration, bool) {
	v, ok := e.Get(name)
	if !ok {
		return 0, false
	}
	d, err := envconf.Duration(v)
	switch {
	case err != nil:
		e.Fail(name, v, "must be a Go duration such as 90s, 10m or 1h30m")
		return 0, false
	case d < 0:
		e.Fail(name, v, "must not be negative")
		return 0, false
	}
	return d, true
}

// emptyItem says what an empty item of a comma-separated list means (a trailing comma, ",,"
// or an empty value all make one: pod-reaper splits on "," and keeps every piece).
type emptyItem int

const (
	// emptyIsAValue: the empty string is a value like any other, as in pod-reaper: for label
	// and annotation values it means "set to the empty value". Kept.
	emptyIsAValue emptyItem = iota
	// emptyMatchesNothing: in pod-reaper the empty item matches a reason or phase the API
	// practically never reports empty, so it changes nothing. Dropped.
	emptyMatchesNothing
	// emptyRefused: in pod-reaper the empty item matches almost every pod (POD_STATUSES: a
	// running pod has no status reason), surely not what a trailing comma meant. Refused.
	emptyRefused
)

// list splits a comma-separated value the way pod-reaper does, with two tolerances: spaces
// around an item are ignored (pod-reaper kept them, so "A, B" never matched B and a label
// value " b" failed), and an empty item means what the variable's emptyItem says. ok=false
// means unset or refused.
func list(e *envconf.Reader, name string, empty emptyItem) ([]string, bool) {
	v, ok := e.Get(name)
	if !ok {
		return nil, false
	}
	parts := strings.Split(v, ",")
	out := make([]string, 0, len(parts))
	spaced, blank := false, false
	for _, p := range parts {
		t := strings.TrimSpace(p)
		spaced = spaced || t != p
		if t == "" {
			blank = true
			switch empty {
			case emptyRefused:
				e.Fail(name, v, "has an empty item (a trailing comma, \",,\" or an empty value): pod-reaper reads it as \"no status reason\", which matches almost every running pod; remove it")
				return nil, false
			case emptyMatchesNothing:
				continue
			}
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if spaced {
		e.Warn(name, v, "spaces around items are ignored")
	}
	if blank {
		switch {
		case empty == emptyIsAValue:
			e.Warn(name, v, "has an empty item (a trailing comma or an empty value): it stands for the empty value, as in pod-reaper (a label or annotation that is set to \"\")")
		case len(out) == 0:
			e.Warn(name, v, "lists nothing: the rule matches no pod, so nothing is reaped (as in pod-reaper)")
		default:
			e.Warn(name, v, "has an empty item (a trailing comma?): ignored")
		}
	}
	return out, true
}
