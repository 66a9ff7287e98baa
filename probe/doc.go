// Package probe is the engine behind `depwatch probe`: meltdown protection for one hosted
// control plane (dependency-watchdog's "prober"), run as a Kubernetes Job.
//
// A probe works like this:
//
//   - LoadOptions reads every setting at once and reports every problem at once; nothing is
//     read from the cluster, let alone scaled, when the configuration is bad.
//   - The kubeconfig of the control plane ("shoot") is read from the Secret
//     KUBECONFIG_SECRET_NAME (key "kubeconfig") in NAMESPACE of the cluster the Job runs in
//     ("seed"). A missing Secret or an unusable kubeconfig is an error: nothing is scaled.
//   - API-server probe: discovery's ServerVersion through that kubeconfig, within
//     PROBE_TIMEOUT. Unreachable, timed out or throttled (HTTP 429): no scaling decision at
//     all (the dependents cannot do harm through an API server nobody reaches).
//   - Lease probe: the Leases in kube-node-lease of the nodes dependency-watchdog counts: the
//     Node exists and, where the seed serves MCM's Machine kind (a Gardener seed), is managed
//     by MCM, has none of its pool's unhealthy conditions True (NODE_CONDITIONS, else the
//     defaults), a Machine in NAMESPACE that is not Failed or Terminating names it, and it is
//     not in an in-place update (candidates.go). Decide (a pure function) turns them into scale-down, scale-up
//     or no decision, and counts the leases left out by reason. An API server that answers
//     429 makes the probe "throttled": no decision, and the next probe backs off.
//   - Scaling goes through the scale subresource of any kind (resolved by a RESTMapper), level
//     by level in ascending order; the resources of one level are scaled concurrently, and a
//     level starts when the previous one has finished; after a level in which a resource
//     failed, the later levels do not run. Scale-down stores the replicas in the
//     dependency-watchdog.gardener.cloud/replicas annotation (together with
//     .../meltdown-protection-active, in one patch) before replicas are set to 0, so a Job
//     killed half-way never loses the count; scale-up restores it and removes both annotations
//     once a replica is ready.
//   - With SCHEDULE (and RUN_DURATION), one Job probes repeatedly; probes never overlap.
//
// The decision is pure (decide.go); the Kubernetes I/O lives in shoot.go (reading the Secret,
// the probes) and scale.go (the dependents).
package probe
