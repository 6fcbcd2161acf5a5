package conductor

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// ErrNotFound is returned by a Store when a row does not exist.
var ErrNotFound = errors.New("not found")

// ErrConflict is returned by a Store when a guarded write lost a race.
var ErrConflict = errors.New("conflicting concurrent update")

// ClusterUpdate is a set of cluster columns to write; nil fields are left alone.
type ClusterUpdate struct {
	Status             *magnum.ClusterStatus
	StatusReason       *string // "" writes NULL
	StackID            *string
	APIAddress         *string
	COEVersion         *string
	HealthStatus       *magnum.HealthStatus
	HealthStatusReason map[string]string
	CertRefs           *certs.Refs
	TemplateID         *string
	Labels             map[string]string
	// OnlyIfStatus guards the write: it applies only while the stored status is one of these.
	OnlyIfStatus []magnum.ClusterStatus
}

// NodeGroupUpdate is a set of nodegroup columns to write; nil fields are left alone.
type NodeGroupUpdate struct {
	ClusterUUID   string
	Status        *magnum.ClusterStatus
	StatusReason  *string
	NodeCount     *int64
	NodeAddresses []string
	StackID       *string
	// ImageID moves the group to another Glance image (an upgrade to a template with another image).
	ImageID      *string
	OnlyIfStatus []magnum.ClusterStatus
}

// Store is what the conductor needs of Magnum's database (implemented by internal/magnum/db).
type Store interface {
	// CreateCluster inserts the cluster row and its default node groups in one transaction. A row
	// with the same uuid already present is not an error (a redelivered message): created is false.
	CreateCluster(ctx context.Context, c *magnum.Cluster, groups []*magnum.NodeGroup) (created bool, err error)
	GetCluster(ctx context.Context, uuid string) (*magnum.Cluster, error)
	GetClusterTemplate(ctx context.Context, uuid string) (*magnum.ClusterTemplate, error)
	ListNodeGroups(ctx context.Context, clusterUUID string) ([]*magnum.NodeGroup, error)
	ListClustersByStatus(ctx context.Context, statuses ...magnum.ClusterStatus) ([]*magnum.Cluster, error)
	UpdateCluster(ctx context.Context, uuid string, u ClusterUpdate) error
	UpdateNodeGroup(ctx context.Context, uuid string, u NodeGroupUpdate) error
	// DeleteCluster removes the cluster row, then (a little later) its node group rows.
	DeleteCluster(ctx context.Context, uuid string) error
	// CreateNodeGroup inserts a node group; an existing row with the same uuid is not an error.
	CreateNodeGroup(ctx context.Context, ng *magnum.NodeGroup) (created bool, err error)
	GetNodeGroup(ctx context.Context, clusterUUID, uuid string) (*magnum.NodeGroup, error)
	// SaveNodeGroupChanges persists the fields listed in the object's changes (Python's save()).
	SaveNodeGroupChanges(ctx context.Context, ng *magnum.NodeGroup, onlyIfStatus ...magnum.ClusterStatus) error
	DeleteNodeGroup(ctx context.Context, clusterUUID, uuid string) error
}

// Claims gives each cluster's operation a single driver across replicas (docs/operations.md,
// "Replicas"): a claim is held by one replica while the cluster has an operation in progress and
// expires when that replica stops renewing it (it died). Implemented with Kubernetes Leases by
// internal/app; nil in Options means one replica, which always drives.
type Claims interface {
	// Claim takes the cluster's claim for this replica, or renews it when this replica holds it;
	// held is false while another replica holds a claim that has not expired.
	Claim(ctx context.Context, clusterUUID string) (held bool, err error)
	// Release gives up this replica's claim (nothing when it holds none).
	Release(ctx context.Context, clusterUUID string) error
	// Sweep removes expired claims of clusters for which active is false (their holder died
	// after the operation ended some other way).
	Sweep(ctx context.Context, active func(clusterUUID string) bool) error
}

// Kube is what the conductor needs of the management cluster (implemented by internal/capi).
type Kube interface {
	EnsureProjectNamespace(ctx context.Context, name, projectID string) error
	Apply(ctx context.Context, objs ...*unstructured.Unstructured) error
	// ApplyUnchanged applies the objects, skipping those this process applied with the same content
	// moments ago (a template's ClusterClass, shared by the project's clusters).
	ApplyUnchanged(ctx context.Context, objs ...*unstructured.Unstructured) error
	ApplyClusterSecrets(ctx context.Context, namespace, clusterUUID string, secrets []certs.CAPISecret) error
	// GetCluster reads a CAPI Cluster; found is false when it does not exist.
	GetCluster(ctx context.Context, namespace, name string) (cl *clusterv1.Cluster, found bool, err error)
	// ReadClusterClass reads a ClusterClass and the templates it names.
	ReadClusterClass(ctx context.Context, namespace, name string) ([]*unstructured.Unstructured, error)
	// Machines lists a cluster's Machines.
	Machines(ctx context.Context, namespace, clusterName string) ([]capi.Machine, error)
	DeleteCluster(ctx context.Context, namespace, name string) (gone bool, err error)
	DeleteClusterSecrets(ctx context.Context, namespace, clusterUUID string) error
	// Observe reads a Cluster, its MachineDeployments and Machines from the apiserver itself (the
	// status sync's observations come from the watch's caches; the add-on set is not read); found
	// is false when the Cluster does not exist.
	Observe(ctx context.Context, namespace, name string) (obs capi.Observation, found bool, err error)
	// CloudFailures lists the infrastructure provider's refusals for a CAPI cluster (CAPO's
	// conditions of severity Error), read on demand.
	CloudFailures(ctx context.Context, namespace, clusterName string) ([]string, error)
	// ReadSecret returns a Secret's data; found is false when it does not exist.
	ReadSecret(ctx context.Context, namespace, name string) (data map[string][]byte, found bool, err error)
	// DryRunApply asks the apiserver (and its admission webhooks) whether it would accept the objects.
	DryRunApply(ctx context.Context, objs ...*unstructured.Unstructured) error
	// MarkMachinesForDeletion annotates the named machines of a cluster (by machine name, node name
	// or provider id) so CAPI removes exactly them on the next scale-down; it returns the names
	// that match no machine.
	MarkMachinesForDeletion(ctx context.Context, namespace, clusterName, nodeGroupUUID string, names []string) (unknown []string, err error)
	// ApplyAddons delivers a cluster's add-on set (its resource-set Secret and ClusterResourceSet).
	// With prune it first removes from the workload cluster what the live set delivered and the new
	// one does not; a create's set has nothing before it to prune and skips reading the live one.
	ApplyAddons(ctx context.Context, clusterName string, set *addons.Set, prune bool) error
	// DeleteAddons removes a deleted cluster's ClusterResourceSet.
	DeleteAddons(ctx context.Context, namespace, clusterUUID string) error
	// ApplyAutoscaler applies a cluster's cluster-autoscaler; DeleteAutoscaler removes it.
	ApplyAutoscaler(ctx context.Context, objs *autoscaler.Objects) error
	DeleteAutoscaler(ctx context.Context, namespace, clusterUUID string) error
	// Kick makes the status sync look at a cluster now, even if no CAPI object changed.
	Kick(namespace, name string)
	Adopting
}

// Adopting is what adoption (adoption.go) needs of the management cluster besides the rest.
type Adopting interface {
	// ReadLive reads the objects of a Cluster another driver built; found is false without it.
	ReadLive(ctx context.Context, namespace, name string) (live templates.LiveCluster, found bool, err error)
	// LabelObjects adds labels to objects of the namespace.
	LabelObjects(ctx context.Context, namespace string, objs []templates.ObjectLabels) error
	// RetireHelmRelease makes Helm forget a release without uninstalling what it installed.
	RetireHelmRelease(ctx context.Context, namespace, release, clusterName string) error
	// NamespaceManaged reports whether a namespace exists and is one of the bridge's.
	NamespaceManaged(ctx context.Context, name string) (exists, managed bool, err error)
	// EnsureSecretAccess lets the bridge read Secrets in a namespace handed over to it.
	EnsureSecretAccess(ctx context.Context, namespace string) error
	// DeleteLeftovers deletes by name what another driver made beside a cluster.
	DeleteLeftovers(ctx context.Context, namespace string, left templates.ClusterAPILeftovers) error
}
