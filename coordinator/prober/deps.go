package prober

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"

	"github.com/depwatch/depwatch/coordinator/ctrl"
)

// Deps is what the prober runs with: what it shares with the weeder (of the Namespaces, it
// reads those its selector matches) and its own.
type Deps struct {
	ctrl.Shared
	// Dynamic reads Gardener's Cluster resources; nil: they are not looked for.
	Dynamic dynamic.Interface
	// Config is the running config's prober section.
	Config  *Config
	Metrics *Metrics
	// DWDLeaseNamespace is where dependency-watchdog's prober Lease is when the config names
	// no namespace ("": garden).
	DWDLeaseNamespace string
	// OwnLease is the Lease this coordinator elects through (nil: no leader election): the
	// prober never stands aside for it.
	OwnLease *LeaseRef
	// Self is what the prober's own Events (standing aside) are about: the coordinator's
	// Lease or pod; nil: they are dropped.
	Self *corev1.ObjectReference
	// NoScaleTargets: this service account may not write the probe admission policy's
	// parameters (gardenlet's, under the image swap), which are then not written.
	NoScaleTargets bool
}
