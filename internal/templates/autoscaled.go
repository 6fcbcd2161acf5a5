package templates

import (
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Autoscaled reports whether the cluster autoscaler sizes the worker group ng: the cluster has
// auto_scaling_enabled and the group a maximum (its own, or the labels' for the default group).
func (in Input) Autoscaled(ng NodeGroup) bool {
	if ng.IsControlPlane() || !LabelEnabled(in.Cluster.Labels, LabelAutoScalingEnabled) {
		return false
	}
	_, hi, err := autoscalingBounds(in.Cluster.Labels, ng)
	return err == nil && hi != nil
}

// WorkerFlavor is the Nova flavor the machines of the worker group ng boot with: the group's,
// else the cluster's, else the template's.
func (in Input) WorkerFlavor(ng NodeGroup) string {
	return firstNonBlank(ng.FlavorID, in.Cluster.FlavorID, in.Template.FlavorID)
}

// WorkerRootVolumeGiB is the boot volume size of the worker group ng's machines: its own
// boot_volume_size, else the cluster's, as the OpenStack rendering resolves it (rootVolume); 0 when
// they boot from the flavor's local disk, which the in-memory machines always do.
func (in Input) WorkerRootVolumeGiB(ng NodeGroup) int {
	labels := groupLabels(in.Cluster.Labels, ng)
	if SelectedFlavor(in.Cluster.Labels, in.Flavor) != FlavorOpenStack || rootVolume(labels) == nil {
		return 0
	}
	return labelInt(labels, LabelBootVolumeSize)
}

// AnnotateMachineDeployments adds annotations to the rendered Cluster's worker MachineDeployment
// topologies, by topology name (what the cluster autoscaler reads from the MachineDeployments:
// CAPI copies a topology's metadata onto them). A name the Cluster does not have is an error.
func AnnotateMachineDeployments(cluster *unstructured.Unstructured, byName map[string]map[string]string) error {
	if len(byName) == 0 {
		return nil
	}
	mds, _, err := unstructured.NestedSlice(cluster.Object, "spec", "topology", "workers", "machineDeployments")
	if err != nil {
		return err
	}
	done := map[string]bool{}
	for i, raw := range mds {
		md, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(md, "name")
		add, found := byName[name]
		if !found {
			continue
		}
		annotations, _, _ := unstructured.NestedStringMap(md, "metadata", "annotations")
		if annotations == nil {
			annotations = map[string]string{}
		}
		maps.Copy(annotations, add)
		if err := unstructured.SetNestedStringMap(md, annotations, "metadata", "annotations"); err != nil {
			return err
		}
		mds[i] = md
		done[name] = true
	}
	for name := range byName {
		if !done[name] {
			return fmt.Errorf("the cluster %s has no MachineDeployment topology %s", cluster.GetName(), name)
		}
	}
	return unstructured.SetNestedSlice(cluster.Object, mds, "spec", "topology", "workers", "machineDeployments")
}
