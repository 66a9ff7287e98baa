package ctrl

import (
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/depwatch/depwatch/jobs"
)

// Namespaces is the one informer on the cluster's namespaces that both controllers read: the
// weeder for which namespaces are going away and which the config's selector takes, the prober
// for which match its own selector (each filters what it reads). The coordinator builds it
// once and runs it once; managedFields are not kept.
func Namespaces(client kubernetes.Interface) cache.SharedIndexInformer {
	inf := coreinformers.NewNamespaceInformer(client, 0, cache.Indexers{})
	_ = inf.SetTransform(jobs.StripManagedFields)
	return inf
}
