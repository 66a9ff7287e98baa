package prober

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/depwatch/depwatch/internal/fieldpath"
)

// ClusterGVR is Gardener's extensions Cluster resource: cluster-scoped, named after the
// shoot's control-plane namespace, with the Shoot embedded in spec.shoot. depwatch reads it
// unstructured (no Gardener Go dependency).
var ClusterGVR = schema.GroupVersionResource{Group: "extensions.gardener.cloud", Version: "v1alpha1", Resource: "clusters"}

// ClusterFields are the fields of a Gardener Cluster the prober reads, each declared once
// below and read only through its Field. The names are the JSON names of Gardener's types
// (extensions/v1alpha1 Cluster, core/v1beta1 Shoot): the Go field ShootStatus.IsHibernated,
// for one, is serialised as "hibernated". TestEveryClusterFieldIsInGardenersCluster checks
// each against a Cluster written from those types (test/upstream).
var ClusterFields fieldpath.Set

var (
	// ShootDeletionTimestamp is set once the shoot is being deleted.
	ShootDeletionTimestamp = ClusterFields.Field("spec", "shoot", "metadata", "deletionTimestamp")
	// ShootHibernationEnabled is the shoot's wish: true hibernates it, false or absent wakes it.
	ShootHibernationEnabled = ClusterFields.Field("spec", "shoot", "spec", "hibernation", "enabled")
	// ShootHibernated is the shoot's state: true until a wake-up has finished.
	ShootHibernated = ClusterFields.Field("spec", "shoot", "status", "hibernated")
	// ShootLastOperation is absent while the shoot is being created.
	ShootLastOperation      = ClusterFields.Field("spec", "shoot", "status", "lastOperation")
	ShootLastOperationType  = ClusterFields.Field("spec", "shoot", "status", "lastOperation", "type")
	ShootLastOperationState = ClusterFields.Field("spec", "shoot", "status", "lastOperation", "state")
	// ShootWorkers are the shoot's worker pools; absent when it has none (omitempty).
	ShootWorkers = ClusterFields.Field("spec", "shoot", "spec", "provider", "workers")
	// WorkerName and WorkerNodeConditions are fields of each worker pool: the pool's name
	// (the Node label worker.gardener.cloud/pool) and the node conditions that make its
	// nodes unhealthy for machine-controller-manager.
	WorkerName           = ClusterFields.ItemField(ShootWorkers, "name")
	WorkerNodeConditions = ClusterFields.ItemField(ShootWorkers, "machineControllerManager", "nodeConditions")
	// ShootNodeMonitorGracePeriod is the shoot's kube-controller-manager's
	// --node-monitor-grace-period (a metav1.Duration string).
	ShootNodeMonitorGracePeriod = ClusterFields.Field("spec", "shoot", "spec", "kubernetes", "kubeControllerManager", "nodeMonitorGracePeriod")
)

// Gardener's values of a shoot's lastOperation that the decision compares with
// (core/v1beta1 LastOperationType and LastOperationState).
const (
	LastOperationCreate    = "Create"
	LastOperationReconcile = "Reconcile"
	LastOperationRestore   = "Restore"
	LastOperationMigrate   = "Migrate"
	LastOperationSucceeded = "Succeeded"
)
