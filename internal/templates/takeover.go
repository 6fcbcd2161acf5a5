package templates

// A cluster magnum-cluster-api built is taken over as it runs: its Cluster keeps the old driver's
// ClusterClass (in ClusterAPINamespace, shared by every project), and the bridge only marks it as
// one it watches, then syncs its status, serves its CA and deletes it. Changing it would mean
// rebasing it onto a class of the bridge's, in a project namespace it cannot move to.

// TakeOverMarks are the labels and annotation that make a magnum-cluster-api Cluster one the
// bridge watches (LabelManagedBy, LabelClusterUUID) and records it as taken over.
func TakeOverMarks(clusterName, clusterUUID string) ObjectLabels {
	return ObjectLabels{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: clusterName,
		Labels:      map[string]string{LabelManagedBy: ManagedByValue, LabelClusterUUID: clusterUUID},
		Annotations: map[string]string{AnnotationAdoptedFrom: string(DriverClusterAPI)}}
}

// ClusterAPILeftovers are the objects magnum-cluster-api made beside a cluster's Cluster, by name
// (they carry no label the bridge's deletes select by), which its delete removes: the add-on
// ClusterResourceSets with their Secrets, the four CAs and the credential.
type ClusterAPILeftovers struct {
	ResourceSets []string
	Secrets      []string
}

// ClusterAPILeftoversOf names them for the cluster stackID (its Cluster's name) and uuid.
func ClusterAPILeftoversOf(stackID, uuid string) ClusterAPILeftovers {
	sets := []string{uuid, stackID + "-cloud-provider"}
	secrets := append([]string{}, sets...)
	for _, ca := range []string{"ca", "etcd", "proxy", "sa"} {
		secrets = append(secrets, stackID+"-"+ca)
	}
	secrets = append(secrets, CloudConfigSecretName(stackID)) // last: a deleting cluster's mark (see the conductor)
	return ClusterAPILeftovers{ResourceSets: sets, Secrets: secrets}
}

// ClusterAPIServerGroupNames are the Nova server groups magnum-cluster-api makes for a cluster:
// the control plane's named after the cluster, each worker group's after the cluster and the group.
func ClusterAPIServerGroupNames(stackID string, groups []NodeGroup) []string {
	names := make([]string, 0, len(groups))
	for _, ng := range groups {
		if ng.IsControlPlane() {
			names = append(names, stackID)
			continue
		}
		names = append(names, stackID+"-"+ng.Name)
	}
	return names
}
