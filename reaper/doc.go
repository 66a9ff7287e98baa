// Package reaper is the engine behind `depwatch reap`: rules-based pod killing configured by
// environment variables, compatible with pod-reaper's contract (same names, same meanings).
//
// A run works like this:
//
//   - LoadOptions reads every setting at once and reports every problem at once; nothing is
//     listed or killed when the configuration is bad.
//   - Every run is a batch (batch.go): a plain run is a batch of one target with no gate,
//     START_WHEN_READY one target whose gate follows that service, TARGETS one target per
//     service. A target's gate and window are one pure step (gatestep.go).
//   - With START_WHEN_READY, Run first waits (at most MAX_WAIT) for that service to have a ready
//     endpoint, following its EndpointSlices; nothing is listed for reaping or reaped before,
//     though WATCH's pod informers already start, so their cache is warm when the gate opens.
//     Everything below then starts at that moment (RUN_DURATION included); while the service is
//     down again, reaping pauses, and it resumes with a cycle when the service is Ready, with
//     a full RUN_DURATION counted afresh from that return. With a pod cache (WATCH, TARGETS) a
//     gated run's cycles read it instead of listing.
//   - Run runs a cycle on every SCHEDULE tick, the first at the schedule's first tick, as
//     pod-reaper does; with REAP_AT_START, WATCH or START_WHEN_READY (when the gate opens) the
//     first cycle runs at once instead. A cycle
//     lists candidate pods page by page (filtered server-side by label and field selectors),
//     keeps only the pods every enabled rule agrees on, sorts them by POD_SORTING_STRATEGY and
//     reaps them one at a time until MAX_PODS pods were actually reaped.
//   - Cycles never overlap: a target's cycles and its WATCH-mode pods are handled one at a
//     time (the batch's workqueue never hands a target to two workers). A tick that falls
//     inside a running cycle is one cycle after it, not a queue of them.
//   - A first cycle run at start always runs to completion, even when RUN_DURATION is shorter,
//     so REAP_AT_START=true with RUN_DURATION=1s is a one-shot run; without it, a RUN_DURATION
//     that ends before the first tick reaps nothing (pod-reaper). After that, when RUN_DURATION elapses or the context is
//     cancelled (SIGTERM), the run stops between two pods: the pod in hand is finished.
//   - With WATCH=true, pod informers (one whose label selector every OR-ed selector's pods
//     pass, when they share a label; else one per selector) record every added or updated pod
//     for its target's next turn, which judges it as their cache holds it then and reaps it
//     the moment it matches. A UID is reaped (or reported by a
//     dry run) at most once; a replacement pod has a new UID and is reaped again if it matches
//     again. Terminating pods are left alone. A pod whose eviction was refused (HTTP 429) or
//     whose delete failed is tried again on a later cycle or update.
//   - With REAP_COOLDOWN, once pods of an owner (the pod's controller, or a bare pod) were
//     reaped, the pods it creates since are deferred until the cooldown has passed; its older
//     pods are still reaped in that round. At most 1 + floor(RUN_DURATION / REAP_COOLDOWN)
//     rounds per owner, each pod once per round (cooldown.go); the gate's reopening starts the
//     cooldown afresh.
//
// Decisions (filters, rules, sorting, the MAX_PODS quota, the REAP_COOLDOWN rounds) are pure functions; the Kubernetes I/O
// is confined to list.go, act.go and batch_caches.go.
package reaper
