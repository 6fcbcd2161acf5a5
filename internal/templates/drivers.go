package templates

import (
	"regexp"
	"strings"
)

// Driver names the Magnum driver a cluster was built by. An operator who replaces magnum-conductor
// with the bridge keeps the clusters the other drivers built in the same database; the bridge must
// tell them from its own before it acts on any (it would otherwise build a second cluster for a
// Heat stack's row).
type Driver string

const (
	DriverBridge Driver = "magnum-capi-bridge"
	// DriverCAPIHelm is StackHPC's magnum-capi-helm: a Helm release per cluster.
	DriverCAPIHelm Driver = "magnum-capi-helm"
	// DriverClusterAPI is vexxhost's magnum-cluster-api: everything in namespace ClusterAPINamespace.
	DriverClusterAPI Driver = "magnum-cluster-api"
	// DriverHeat is any of Magnum's Heat drivers: the cluster is a Heat stack.
	DriverHeat    Driver = "Heat"
	DriverUnknown Driver = "unknown"
)

// ClusterAPINamespace is where magnum-cluster-api puts every cluster, whatever its project: the
// namespace of the clusters the bridge takes over from it, too.
const ClusterAPINamespace = "magnum-system"

// BridgeTemplateDriver is the magnum.drivers entry point of the bridge's driver for magnum-api
// (deploy/magnum-driver): the `driver` of the templates it accepts, on Magnum 18.0.0 and later.
const BridgeTemplateDriver = "k8s_capi_bridge"

// ClusterRow is what tells a cluster's driver: its row (the stack_id each driver sets in its own
// shape) and its template's driver column (empty before Magnum 18.0.0, or when not recorded).
type ClusterRow struct {
	UUID, Name, StackID string
	TemplateDriver      string
}

var (
	uuidShape = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	// magnum-cluster-api names a cluster kube-<5 characters>.
	clusterAPIShape = regexp.MustCompile(`^kube-[a-z0-9]{5}$`)
	// magnum-capi-helm names the Helm release <sanitized name cut to 30>-<12-character short id>
	// (the name as it was at create: a later rename does not change it).
	capiHelmShape = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,29})-[a-z0-9]{12}$`)
)

// heatTemplateDrivers are the entry points of Magnum's Heat drivers.
var heatTemplateDrivers = map[string]bool{
	"k8s_fedora_coreos_v1": true, "k8s_fedora_atomic_v1": true, "k8s_coreos_v1": true, "k8s_fedora_ironic_v1": true,
	"swarm_fedora_atomic_v1": true, "swarm_fedora_atomic_v2": true, "mesos_ubuntu_v1": true,
}

// DriverOf tells which driver built the cluster, and why. The bridge's own clusters carry the
// stack_id ClusterName gives them (ending in the first 8 hex digits of the uuid, which the others'
// names never do); a foreign template driver or stack_id shape names the others. A row that fits none is
// unknown, and the bridge leaves it alone as it does the others'.
func DriverOf(r ClusterRow) (Driver, string) {
	if isBridgeName(r.StackID, r.UUID) {
		return DriverBridge, "its stack_id " + r.StackID + " is the name this bridge gives its Cluster API cluster"
	}
	switch td := strings.TrimSpace(r.TemplateDriver); {
	case td == "k8s_capi_helm_v1":
		return DriverCAPIHelm, "its template's driver is " + td
	case strings.HasPrefix(td, "k8s_cluster_api"):
		return DriverClusterAPI, "its template's driver is " + td
	case heatTemplateDrivers[td]:
		return DriverHeat, "its template's driver is " + td
	}
	switch {
	case r.StackID == "":
		return DriverUnknown, "it has no stack_id: no driver built it (its create failed before), and its template names no driver this bridge knows"
	case uuidShape.MatchString(r.StackID):
		return DriverHeat, "its stack_id " + r.StackID + " is a Heat stack's id"
	case clusterAPIShape.MatchString(r.StackID):
		return DriverClusterAPI, "its stack_id " + r.StackID + " has magnum-cluster-api's shape kube-xxxxx"
	case capiHelmShape.MatchString(r.StackID):
		return DriverCAPIHelm, "its stack_id " + r.StackID + " has magnum-capi-helm's shape <name>-<12 characters>"
	}
	return DriverUnknown, "its stack_id " + r.StackID + " has no shape this bridge knows"
}

// isBridgeName is true for a stack_id ClusterName gave: a DNS label, a dash, the uuid's first 8
// hex digits (the name part is not compared: it is the cluster's name when it was built).
func isBridgeName(stackID, uuid string) bool {
	short := strings.ReplaceAll(uuid, "-", "")
	if len(short) < 8 {
		return false
	}
	base, ok := strings.CutSuffix(stackID, "-"+short[:8])
	return ok && bridgeBase.MatchString(base)
}

var bridgeBase = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)
