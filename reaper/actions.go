package reaper

// What a pod's log line says was done with it: its "action" field, which dashboards and
// on-call people filter on. docs/pod-reaper.md lists them; a test keeps the two equal.
const (
	ActionDeleted = "deleted"
	ActionEvicted = "evicted"
	// ActionSkipped: an eviction refused by a PodDisruptionBudget; tried again later.
	ActionSkipped = "skipped"
	// ActionGone: the pod was deleted, or replaced by a namesake, before it could be reaped.
	ActionGone   = "gone"
	ActionFailed = "failed"
	// ActionRefused: an admission policy refused the delete or eviction; tried again later.
	ActionRefused = "refused"
	ActionDryRun  = "dry-run"
	// ActionMaxPods: matched, but MAX_PODS was reached in this cycle.
	ActionMaxPods = "max-pods"
	// ActionDeferred: held back by REAP_COOLDOWN.
	ActionDeferred = "deferred"
	// ActionBackOffSkipped: in crash-loop back-off that the kubelet ends sooner than
	// BACKOFF_FLOOR; left to the kubelet.
	ActionBackOffSkipped = "backoff-skipped"
)

// PodActions are every value of a pod log line's action field.
var PodActions = []string{ActionDeleted, ActionEvicted, ActionSkipped, ActionGone, ActionFailed, ActionRefused, ActionDryRun, ActionMaxPods, ActionDeferred, ActionBackOffSkipped}
