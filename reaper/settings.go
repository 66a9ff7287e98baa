package reaper

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// setting is one environment variable of `depwatch reap`. The table below is the single source
// for both LoadOptions (defaults) and Usage, so the help text cannot drift from the parser.
type setting struct {
	name, def, desc string
}

// The order is the order of Usage and of the problems LoadOptions reports.
var settings = []setting{
	{envNamespace, "", "only pods in this namespace; empty or unset = all namespaces"},
	{"NODE_NAME", "", "only pods on this node (server-side field selector spec.nodeName)"},
	{"LABEL_SELECTOR", "", "Kubernetes label selector, e.g. `a=b,c in (x,y),!d`; ANDed with the KEY/VALUES filters"},
	{envLabelSelectors, "", "JSON list of label selectors, OR-ed, e.g. `[\"app=a\",\"app=b\"]`; each is ANDed with the other filters; no entry may be empty"},
	{"EXCLUDE_LABEL_KEY", "", "skip pods whose label KEY has one of EXCLUDE_LABEL_VALUES (label selector `notin`)"},
	{"EXCLUDE_LABEL_VALUES", "", "comma-separated values for EXCLUDE_LABEL_KEY"},
	{"REQUIRE_LABEL_KEY", "", "only pods whose label KEY has one of REQUIRE_LABEL_VALUES (label selector `in`)"},
	{"REQUIRE_LABEL_VALUES", "", "comma-separated values for REQUIRE_LABEL_KEY"},
	{"REQUIRE_ANNOTATION_KEY", "", "only pods whose annotation KEY has one of REQUIRE_ANNOTATION_VALUES"},
	{"REQUIRE_ANNOTATION_VALUES", "", "comma-separated values for REQUIRE_ANNOTATION_KEY"},
	{envStartWhenReady, "", "gate: `<service>` (in NAMESPACE) or `<namespace>/<service>`; reap nothing until the service has a ready endpoint (its EndpointSlices), then run as configured with RUN_DURATION counted from that moment; reaping pauses while the service is not Ready again, and each return starts a full RUN_DURATION afresh"},
	{envTargets, "", "several gated runs in one: a JSON list of `{\"namespace\",\"service\",\"selectors\":[...]}`; each target reaps its selectors' pods in its namespace (or in `\"podNamespace\"` when its dependents are in another) once its service is Ready, as START_WHEN_READY does, with its own RUN_DURATION and MAX_WAIT; NAMESPACE, START_WHEN_READY and LABEL_SELECTORS cannot be set with it (the coordinator uses it to cover a storm of outages with few Jobs)"},
	{envMaxWait, "6h", "with START_WHEN_READY or TARGETS: the longest wait for the service; when it passes first, the run ends with exit code 0 and nothing reaped; must be positive"},
	{envReadyWhen, "any", "with START_WHEN_READY or TARGETS: when the service counts as Ready: `any` (one ready endpoint, dependency-watchdog v1.5's), `all` (every endpoint that is not terminating is ready, dependency-watchdog v1.6+'s), or a count of ready endpoints such as `2`; an endpoint whose ready condition is not set counts as ready, one listed by several EndpointSlices counts once; a TARGETS target's own `readyWhen` wins"},
	{"SCHEDULE", "@every 1m", "cron spec (optional seconds field; descriptors such as @every 5m, @hourly); cycles run on its ticks, the first at its first tick (as pod-reaper: @every 1m first reaps one minute after start), unless REAP_AT_START; cycles never overlap"},
	{"REAP_AT_START", "false", "run the first cycle at start (it always completes, so with RUN_DURATION=1s the run is one-shot), then follow SCHEDULE; implied by WATCH and by START_WHEN_READY (a cycle the moment the service is Ready)"},
	{envRunDuration, "0s", "stop after this long, finishing the pod in hand; 0s or empty = run forever; a RUN_DURATION that ends before SCHEDULE's first tick reaps nothing (pod-reaper), unless REAP_AT_START"},
	{envWatch, "false", "also watch matching pods and reap a pod the moment it matches (e.g. enters CrashLoopBackOff)"},
	{envDryRun, "false", "only log what would be reaped (same MAX_PODS cap); change nothing, record no Events"},
	{"EVICT", "false", "use the policy/v1 Eviction API (honours PodDisruptionBudgets) instead of delete"},
	{envGracePeriod, "", "termination grace period, Go duration rounded down to whole seconds; unset = the pod's own"},
	{"MAX_PODS", "0", "reap at most this many pods per cycle (failed and skipped pods do not count); 0 or negative = unlimited"},
	{envReapCooldown, "0s", "bound per owner (the pod's controller, e.g. its ReplicaSet; a bare pod is its own): once its pods were reaped, its pods created since (their replacements) are not reaped until this Go duration has passed; pods it already had are still reaped with that round. At most 1 + floor(RUN_DURATION / REAP_COOLDOWN) rounds per owner (per return of START_WHEN_READY's service: each return starts the cooldown and RUN_DURATION afresh), each pod of the owner reaped at most once per round; 0s = off (pod-reaper)"},
	{envBackOffFloor, "0s", "a matched pod in crash-loop back-off that the kubelet restarts by itself sooner than this Go duration (from its waiting message `back-off 40s restarting ...` and last finish, or its restart count) is left to the kubelet, logged and counted as backoff-skipped: a fresh pod would not be Ready sooner; every restart logs the back-off it saved; 0s = off (pod-reaper: a plain reap run reaps what its rules match); the coordinator's weeder Jobs carry the config's backOffFloor (default 2s: the lab's measured create to Ready of a fresh pod, at most 1.46 s, docs/benchmarks.md (a), rounded up); a back-off depwatch cannot read is reaped as before, said once per run"},
	// The client's rate limits: their defaults are applied by ClientLimits.Effective, not
	// read from this table, so what a Job's environment leaves unset reads back as unset.
	{envKubeAPIQPS, "5", "client-side rate limit of the run's API requests (lists, watches, deletes, evictions), requests a second, > 0; the coordinator raises it for a batch weeder Job by its number of services; a run the coordinator carries out in its own process ignores it and the other KUBE_API_* settings: it shares the process's one budget (--kube-api-qps, --kube-api-burst)"},
	{envKubeAPIBurst, "10", "requests sent at once before KUBE_API_QPS applies, an integer >= 1"},
	{envKubeAPIEventsQPS, "5", "the Events' own rate limit (Reaped, ReapSkipped), requests a second, > 0: an Event never delays a delete; an Event that cannot be written is counted, logged once per run, and not retried; once RBAC refuses one (no events create, as under pod-reaper's RBAC), none is sent again"},
	{envKubeAPIEventsBurst, "10", "Events sent at once before KUBE_API_EVENTS_QPS applies, an integer >= 1"},
	{"POD_SORTING_STRATEGY", "", "order in which matched pods are reaped: random, oldest-first, youngest-first, pod-deletion-cost (lowest first; pods without a start time go last in the age orders); unset = by namespace and name, the API's list order (as pod-reaper)"},
	{"CHAOS_CHANCE", "", "rule: reap a matching pod with this probability, a float in [0,1]"},
	{envContainerStatuses, "", "rule: comma-separated waiting/terminated reasons of any container or init container, e.g. CrashLoopBackOff,OOMKilled; CrashLoopBackOff also matches a container that exited after at least one restart and will be restarted"},
	{"POD_STATUSES", "", "rule: comma-separated pod status reasons, e.g. Evicted"},
	{"POD_STATUS_PHASES", "", "rule: comma-separated pod phases: Pending, Running, Succeeded, Failed, Unknown"},
	{"POD_PHASE_STATUSES", "", "refused: pod-reaper's README names the phase rule so, but pod-reaper reads POD_STATUS_PHASES and ignores this name"},
	{"MAX_DURATION", "", "rule: pods running longer than this Go duration since status.startTime"},
	{"MAX_UNREADY", "", "rule: pods whose Ready condition has not been True for longer than this Go duration"},
}

// Configured reports whether the environment sets any of reap's variables, even to an empty
// value. pod-reaper's image is configured by them alone, so depwatch started with no command
// runs reap when one is set (cmd/depwatch); when none is, reap would have no rule to run
// (pod-reaper stops then too: "no rules were loaded").
func Configured(lookup func(string) (string, bool)) bool {
	for _, s := range settings {
		if _, ok := lookup(s.name); ok {
			return true
		}
	}
	return false
}

// Usage writes every setting with its default and a one-line description.
func Usage(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tDEFAULT\tDESCRIPTION")
	for _, s := range settings {
		def := s.def
		if def == "" {
			def = "(unset)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.name, def, s.desc)
	}
	fmt.Fprintln(tw, "\nRules are ANDed: a pod is reaped only when every enabled rule matches; at least one rule must be enabled.")
	fmt.Fprintln(tw, "A variable that is set must hold a valid value: an empty value is an error (never a silent \"match everything\"),")
	fmt.Fprintln(tw, "except NAMESPACE (empty = all namespaces) and RUN_DURATION (empty = forever).")
	fmt.Fprintln(tw, "With START_WHEN_READY the service account also needs list/watch on discovery.k8s.io endpointslices.")
	_ = tw.Flush()
}
