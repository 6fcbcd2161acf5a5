// Package templates is the pure mapping from Magnum's model (cluster template, cluster, node groups,
// labels, project) to the Kubernetes objects that Cluster API reconciles: a ClusterClass with its
// templates, and a Cluster with a managed topology. It does no I/O: the same input always renders the
// same objects, so it is tested with tables and golden files, and the conductor only applies the result.
package templates

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Template is the part of a Magnum ClusterTemplate the mapping reads.
type Template struct {
	UUID              string
	Name              string
	ImageID           string
	FlavorID          string
	MasterFlavorID    string
	KeypairID         string
	ExternalNetworkID string
	FixedNetwork      string
	FixedSubnet       string
	DNSNameserver     string
	NetworkDriver     string
	VolumeDriver      string
	DockerVolumeSize  int
	MasterLBEnabled   bool
	FloatingIPEnabled bool
	TLSDisabled       bool
	// HTTPProxy, HTTPSProxy and NoProxy are the template's proxy settings for the nodes.
	HTTPProxy  string
	HTTPSProxy string
	NoProxy    string
	Labels     map[string]string
}

// Cluster is the part of a Magnum Cluster the mapping reads.
type Cluster struct {
	UUID           string
	Name           string
	ProjectID      string
	Keypair        string
	MasterFlavorID string
	FlavorID       string
	// AdoptedName is the name of the CAPI Cluster another driver built and the bridge adopted
	// (its stack_id); empty for the bridge's own, named by ClusterName.
	AdoptedName string
	// Labels are the cluster's effective labels: magnum-api already copies the template's labels
	// into the cluster when the user gives none.
	Labels map[string]string
}

// Taint is a node taint of a Magnum 23 node group.
type Taint struct {
	Key, Value, Effect string
}

// NodeGroup is a Magnum node group.
type NodeGroup struct {
	UUID         string
	Name         string
	Role         string // "master" for the control plane; anything else is a worker group
	NodeCount    int
	MinNodeCount int
	MaxNodeCount *int
	FlavorID     string
	ImageID      string
	Labels       map[string]string
	NodeLabels   map[string]string
	NodeTaints   []Taint
	IsDefault    bool
}

// IsControlPlane reports whether the group holds the control-plane machines.
func (g NodeGroup) IsControlPlane() bool { return g.Role == "master" }

// Input is everything a rendering depends on.
type Input struct {
	// Flavor is the operator's default infrastructure; the cluster's capi_infrastructure label
	// overrides it (SelectedFlavor). Render refuses a flavor AllowedFlavors does not hold.
	Flavor Flavor
	// AllowedFlavors are the flavors the operator offers ([bridge] allowed_infrastructures); nil
	// allows any.
	AllowedFlavors []Flavor
	Namespace      string
	Template       Template
	Cluster        Cluster
	// NodeGroups are all node groups of the cluster, including the control-plane group.
	NodeGroups []NodeGroup
	// DefaultKubernetesVersion is used when neither the kube_tag label nor the image name gives one.
	DefaultKubernetesVersion string
	// Upgrade is set while a cluster_upgrade is applied: the worker groups it covers roll out at
	// most MaxBatchSize machines at a time. Other renderings leave the rollout to Cluster API's
	// default (one new machine at a time, which is also magnum-api's default max_batch_size).
	Upgrade *Upgrade
	// RenderedBy is the running bridge's version, recorded on the Cluster (AnnotationRenderedBy).
	RenderedBy string
}

// Flavor selects the infrastructure provider the objects are rendered for.
type Flavor string

const (
	// FlavorInMemory renders CAPD DevCluster/DevMachine templates with the in-memory backend:
	// fake machines for tests and the local stack.
	FlavorInMemory Flavor = "inmemory"
	// FlavorOpenStack renders CAPO templates for a real OpenStack cloud.
	FlavorOpenStack Flavor = "openstack"
)

// ParseFlavor validates a configured flavor name.
func ParseFlavor(s string) (Flavor, error) {
	switch Flavor(s) {
	case FlavorInMemory, FlavorOpenStack:
		return Flavor(s), nil
	}
	return "", fmt.Errorf("unknown infrastructure flavor %q (want %q or %q)", s, FlavorInMemory, FlavorOpenStack)
}

// LabelInfrastructure lets a template (or a cluster) choose its infrastructure flavor.
const LabelInfrastructure = "capi_infrastructure"

// SelectedFlavor is the flavor a cluster's labels ask for, or def when they name none. An unknown
// name is returned as given: Render refuses it with a LabelError naming the label.
func SelectedFlavor(labels map[string]string, def Flavor) Flavor {
	if v := strings.TrimSpace(labels[LabelInfrastructure]); v != "" {
		return Flavor(v)
	}
	return def
}

// checkFlavor refuses a flavor that is unknown or that the operator does not offer; the error
// names the label, so a tenant knows which template setting to change.
func checkFlavor(in Input) error {
	if _, err := ParseFlavor(string(in.Flavor)); err != nil {
		return &LabelError{Label: LabelInfrastructure, Value: string(in.Flavor),
			Reason: fmt.Sprintf("want %q or %q", FlavorOpenStack, FlavorInMemory)}
	}
	if in.AllowedFlavors != nil && !slices.Contains(in.AllowedFlavors, in.Flavor) {
		offered := make([]string, len(in.AllowedFlavors))
		for i, f := range in.AllowedFlavors {
			offered[i] = string(f)
		}
		return &LabelError{Label: LabelInfrastructure, Value: string(in.Flavor),
			Reason: "this cloud does not offer it (offered: " + strings.Join(offered, ", ") + ")"}
	}
	return nil
}

// Labels and annotations the bridge puts on what it creates, so objects can be traced back to Magnum.
const (
	LabelProjectID     = "magnum.openstack.org/project-id"
	LabelClusterUUID   = "magnum.openstack.org/cluster-uuid"
	LabelNodeGroupUUID = "magnum.openstack.org/nodegroup-uuid"
	LabelTemplateUUID  = "magnum.openstack.org/cluster-template-uuid"
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	ManagedByValue     = "magnum-capi-bridge"
	AnnotationName     = "magnum.openstack.org/cluster-name"
	AnnotationNGName   = "magnum.openstack.org/nodegroup-name"
)

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// dnsLabel turns a free-form Magnum name into a DNS-1123 label fragment of at most max characters.
func dnsLabel(name string, max int) string {
	s := notDNS.ReplaceAllString(strings.ToLower(name), "-")
	s = strings.Trim(s, "-")
	if len(s) > max {
		s = strings.Trim(s[:max], "-")
	}
	return s
}

// NamespaceFor is the management-cluster namespace of a Keystone project: one per project.
func NamespaceFor(prefix, projectID string) string {
	return dnsLabel(prefix+projectID, 63)
}

// ClusterName is the CAPI Cluster's name for a Magnum cluster (also Magnum's stack_id). It is readable
// (the Magnum name) and unique (a piece of the uuid), and short enough for the names CAPI derives from it.
func ClusterName(name, uuid string) string {
	short := strings.ReplaceAll(uuid, "-", "")
	if len(short) > 8 {
		short = short[:8]
	}
	base := dnsLabel(name, 30)
	if base == "" || (base[0] >= '0' && base[0] <= '9') {
		base = "c" + base
	}
	return strings.Trim(base, "-") + "-" + short
}

// MachineDeploymentName is the topology name of a worker node group.
func MachineDeploymentName(ng NodeGroup) string {
	n := dnsLabel(ng.Name, 40)
	if n == "" {
		n = "ng-" + dnsLabel(ng.UUID, 8)
	}
	return n
}
