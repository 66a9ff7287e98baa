// Package ctrl is what the coordinator's controllers (weeder, prober) share and nothing else:
// what they run with (Shared), the one worker loop that drains a controller's queue, the one
// namespace informer both read, the Job-launch metrics both report under their kind, and the
// config-file helpers both sections parse with. It sits below coordinator/weeder and
// coordinator/prober and imports neither.
package ctrl

import (
	"time"

	"github.com/sirupsen/logrus"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/depwatch/depwatch/jobs"
)

// Shared is what the coordinator runs with and hands to both controllers as it is: one
// client, log, clock, Job template and executor, namespace informer and Event recorder.
type Shared struct {
	Client kubernetes.Interface
	Log    logrus.FieldLogger
	// Template is the config's jobTemplate with Namespace and Image resolved.
	Template jobs.Template
	// Executor carries the weeder and probe runs out; nil: Jobs through Client
	// (jobs.InCluster), one for both controllers, which share its watches.
	Executor jobs.Executor
	// Namespaces is the cluster's namespace informer (Namespaces), one for both controllers;
	// nil: one of the controller's own.
	Namespaces cache.SharedIndexInformer
	// Recorder records Events; nil: they are dropped (the coordinator's Run builds one that
	// writes to the API server).
	Recorder record.EventRecorder
	// Now is the clock (tests).
	Now func() time.Time
}

// WithDefaults fills in what s leaves out: the wall clock, Jobs through its client, and,
// unless the controller may not read namespaces, a namespace informer of its own.
func (s Shared) WithDefaults(readsNamespaces bool) Shared {
	if s.Now == nil {
		s.Now = time.Now
	}
	if s.Executor == nil {
		s.Executor = jobs.InCluster(s.Client)
	}
	if s.Namespaces == nil && readsNamespaces {
		s.Namespaces = Namespaces(s.Client)
	}
	return s
}

// Namespaces is the one informer on the cluster's namespaces that both controllers read: the
// weeder for which namespaces are going away and which the config's selector takes, the prober
// for which match its own selector (each filters what it reads). The coordinator builds it
// once and runs it once; managedFields are not kept.
func Namespaces(client kubernetes.Interface) cache.SharedIndexInformer {
	inf := coreinformers.NewNamespaceInformer(client, 0, cache.Indexers{})
	_ = inf.SetTransform(jobs.StripManagedFields)
	return inf
}
