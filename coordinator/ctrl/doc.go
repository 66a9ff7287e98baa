// Package ctrl is what the coordinator's controllers (weeder, prober) share and nothing else:
// what they run with (Shared), the one worker loop that drains a controller's queue, the one
// namespace informer both read, the Job-launch metrics both report under their kind, and the
// config-file helpers both sections parse with. It sits below coordinator/weeder and
// coordinator/prober and imports neither.
package ctrl
