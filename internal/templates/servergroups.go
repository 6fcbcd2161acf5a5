package templates

// ServerGroupNames are the names of every Nova server group the OpenStack flavor may create for the
// given node groups of a cluster (the control plane's included), whether or not a policy label turned
// them on: what a cleanup deletes. Deleting a name that does not exist is harmless.
func ServerGroupNames(clusterName string, groups []NodeGroup) []string {
	names := make([]string, 0, len(groups))
	for _, ng := range groups {
		if ng.IsControlPlane() {
			names = append(names, serverGroupName(clusterName, "control-plane"))
			continue
		}
		names = append(names, serverGroupName(clusterName, MachineDeploymentName(ng)))
	}
	return names
}
