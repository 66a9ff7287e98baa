package prober

import (
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/depwatch/depwatch/jobs"
)

// Deps is what the prober runs with.
type Deps struct {
	Client kubernetes.Interface
	// Dynamic reads Gardener's Cluster resources; nil: they are not looked for.
	Dynamic dynamic.Interface
	// Config is the running config's prober section.
	Config  *Config
	Log     logrus.FieldLogger
	Metrics *Metrics
	// Template is the config's jobTemplate with Namespace and Image resolved.
	Template jobs.Template
	// Executor carries the probe runs out; nil: Jobs through Client (jobs.InCluster).
	Executor jobs.Executor
	// Namespaces is the cluster's namespace informer, shared with the weeder (ctrl.Namespaces);
	// the prober reads those its selector matches. nil: one of its own.
	Namespaces cache.SharedIndexInformer
	// Recorder records the prober's Events; nil: they are dropped.
	Recorder record.EventRecorder
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
	// Now is the clock (tests).
	Now func() time.Time
}
