// Package v1alpha1 is the tenant API: a Magnum cluster declared as a Kubernetes object in its
// project's namespace (coe.magnum.openstack.org/v1alpha1 MagnumCluster). The bridge reconciles it
// through magnum-api with the tenant's own application credential; Magnum stays the source of truth.
//
// +kubebuilder:object:generate=true
// +groupName=coe.magnum.openstack.org
package v1alpha1

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=./ crd:crdVersions=v1 output:crd:dir=../../../deploy/helm/magnum-capi-bridge/crds

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, Version and Kind of the tenant API, as the discovery document lists them.
const (
	Group    = "coe.magnum.openstack.org"
	Version  = "v1alpha1"
	Kind     = "MagnumCluster"
	Resource = "magnumclusters"
)

// GroupVersion is the API's group and version.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// AddToScheme registers the API's types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MagnumCluster{}, &MagnumClusterList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// MagnumCluster is a Magnum cluster of the namespace's Keystone project, named after the object.
// The spec says what `openstack coe cluster create` says; the status mirrors Magnum.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mc;magnumcluster,categories=magnum
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodeCount`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.coeVersion`
// +kubebuilder:printcolumn:name="UUID",type=string,JSONPath=`.status.uuid`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z][a-z0-9.-]*$') && size(self.metadata.name) <= 242",message="metadata.name is the Magnum cluster's name: it must start with a letter and have at most 242 characters"
type MagnumCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   MagnumClusterSpec   `json:"spec"`
	Status MagnumClusterStatus `json:"status,omitempty"`
}

// MagnumClusterSpec is the desired cluster. The object owns every field it sets: a change made
// meanwhile with the CLI, Horizon or Terraform is reported in status.drift and reconciled back.
// Fields Magnum cannot change after a create are immutable here too.
//
// Labels (the cluster's and its node groups') are immutable too; the bridge's admission webhook
// refuses their change, since a rule here could not bound the cost of comparing maps of strings.
//
// +kubebuilder:validation:XValidation:rule="has(self.keypair) == has(oldSelf.keypair)",message="keypair cannot change after the cluster is created"
// +kubebuilder:validation:XValidation:rule="has(self.flavor) == has(oldSelf.flavor)",message="flavor cannot change after the cluster is created"
// +kubebuilder:validation:XValidation:rule="has(self.masterFlavor) == has(oldSelf.masterFlavor)",message="masterFlavor cannot change after the cluster is created"
// +kubebuilder:validation:XValidation:rule="has(self.masterCount) == has(oldSelf.masterCount)",message="masterCount cannot change after the cluster is created"
// +kubebuilder:validation:XValidation:rule="has(self.createTimeout) == has(oldSelf.createTimeout)",message="createTimeout cannot change after the cluster is created"
// +kubebuilder:validation:XValidation:rule="has(self.mergeLabels) == has(oldSelf.mergeLabels)",message="mergeLabels cannot change after the cluster is created"
type MagnumClusterSpec struct {
	// CredentialsRef names the Secret in this namespace that holds the application credential the
	// bridge acts with in magnum-api (never its own identity): a clouds.yaml, as CAPO's identityRef.
	// +required
	CredentialsRef CredentialsRef `json:"credentialsRef"`

	// ClusterTemplate is the name or uuid of a cluster template the project can use. Changing it
	// upgrades the cluster (`openstack coe cluster upgrade`).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +required
	ClusterTemplate string `json:"clusterTemplate"`

	// NodeCount is the number of nodes of the default worker node group.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	NodeCount int32 `json:"nodeCount,omitempty"`

	// MasterCount is the number of control-plane nodes (default: the template's, else 1).
	// +kubebuilder:validation:Enum=1;3;5
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="masterCount cannot change after the cluster is created"
	MasterCount *int32 `json:"masterCount,omitempty"`

	// Keypair is the Nova keypair of the nodes (default: the template's).
	// +kubebuilder:validation:MaxLength=255
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="keypair cannot change after the cluster is created"
	Keypair string `json:"keypair,omitempty"`

	// Labels are the cluster's Magnum labels; with mergeLabels they are merged into the template's,
	// else they replace them. Names and values are checked at apply against the bridge's labels.
	// +kubebuilder:validation:MaxProperties=100
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// MergeLabels merges labels into the template's (`--merge-labels`).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="mergeLabels cannot change after the cluster is created"
	MergeLabels bool `json:"mergeLabels,omitempty"`

	// Flavor is the Nova flavor of the worker nodes (default: the template's).
	// +kubebuilder:validation:MaxLength=255
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="flavor cannot change after the cluster is created"
	Flavor string `json:"flavor,omitempty"`

	// MasterFlavor is the Nova flavor of the control-plane nodes (default: the template's).
	// +kubebuilder:validation:MaxLength=255
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="masterFlavor cannot change after the cluster is created"
	MasterFlavor string `json:"masterFlavor,omitempty"`

	// CreateTimeout is the create's timeout in minutes (default: Magnum's, 60).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10080
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="createTimeout cannot change after the cluster is created"
	CreateTimeout *int32 `json:"createTimeout,omitempty"`

	// NodeGroups are the cluster's further worker node groups. The object owns those it lists:
	// one removed from the list is deleted; node groups created outside the object are reported in
	// status.drift and left alone.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=50
	// +optional
	NodeGroups []NodeGroupSpec `json:"nodeGroups,omitempty"`
}

// CredentialsRef is a Secret of the object's namespace with a clouds.yaml (key `clouds.yaml`)
// holding an application credential of the namespace's project.
type CredentialsRef struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// CloudName is the cloud of the clouds.yaml to use (Horizon's downloads name it `openstack`).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:default=openstack
	// +optional
	CloudName string `json:"cloudName,omitempty"`
}

// NodeGroupSpec is a worker node group besides the default one.
//
// +kubebuilder:validation:XValidation:rule="has(self.flavor) == has(oldSelf.flavor)",message="a node group's flavor cannot change after it is created"
// +kubebuilder:validation:XValidation:rule="!has(self.minNodeCount) || self.minNodeCount <= self.nodeCount",message="minNodeCount must not exceed nodeCount"
// +kubebuilder:validation:XValidation:rule="!has(self.maxNodeCount) || self.maxNodeCount >= self.nodeCount",message="maxNodeCount must not be below nodeCount"
type NodeGroupSpec struct {
	// Name is the node group's name in Magnum.
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]*$`
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`
	// NodeCount is its number of nodes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	NodeCount int32 `json:"nodeCount,omitempty"`
	// MinNodeCount and MaxNodeCount bound the cluster-autoscaler.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinNodeCount *int32 `json:"minNodeCount,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxNodeCount *int32 `json:"maxNodeCount,omitempty"`
	// Flavor is the Nova flavor of its nodes (default: the cluster's).
	// +kubebuilder:validation:MaxLength=255
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a node group's flavor cannot change after it is created"
	Flavor string `json:"flavor,omitempty"`
	// Labels are its Magnum labels.
	// +kubebuilder:validation:MaxProperties=100
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// MagnumClusterStatus mirrors the Magnum cluster as magnum-api shows it to the project.
type MagnumClusterStatus struct {
	// ObservedGeneration is the generation of the spec this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when Magnum's last operation completed and the cluster matches the
	// spec; its reason says what is in the way otherwise.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// UUID is the Magnum cluster's uuid (`openstack coe cluster show`).
	// +optional
	UUID string `json:"uuid,omitempty"`
	// Status and StatusReason are Magnum's.
	// +optional
	Status string `json:"status,omitempty"`
	// +optional
	StatusReason string `json:"statusReason,omitempty"`
	// +optional
	APIAddress string `json:"apiAddress,omitempty"`
	// +optional
	COEVersion string `json:"coeVersion,omitempty"`
	// +optional
	MasterCount int32 `json:"masterCount,omitempty"`
	// NodeCount is the default worker node group's count in Magnum.
	// +optional
	NodeCount int32 `json:"nodeCount,omitempty"`
	// +optional
	HealthStatus string `json:"healthStatus,omitempty"`
	// ClusterTemplateID is the uuid of the template the cluster runs now.
	// +optional
	ClusterTemplateID string `json:"clusterTemplateID,omitempty"`
	// NodeGroups are Magnum's node groups of the cluster.
	// +listType=map
	// +listMapKey=name
	// +optional
	NodeGroups []NodeGroupStatus `json:"nodeGroups,omitempty"`
	// Drift lists where Magnum differs from the spec, e.g. after a change with the CLI; each is
	// reconciled back unless it says otherwise.
	// +optional
	Drift []string `json:"drift,omitempty"`
}

// NodeGroupStatus is one of the cluster's node groups in Magnum.
type NodeGroupStatus struct {
	Name string `json:"name"`
	// +optional
	UUID string `json:"uuid,omitempty"`
	// +optional
	Role string `json:"role,omitempty"`
	// +optional
	NodeCount int32 `json:"nodeCount,omitempty"`
	// +optional
	Status string `json:"status,omitempty"`
	// Owned: created from this object's spec.nodeGroups, so deleted when removed from it.
	// +optional
	Owned bool `json:"owned,omitempty"`
}

// MagnumClusterList is a list of MagnumClusters.
//
// +kubebuilder:object:root=true
type MagnumClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MagnumCluster `json:"items"`
}
