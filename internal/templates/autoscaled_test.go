package templates

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestAutoscaledGroups(t *testing.T) {
	extra := NodeGroup{UUID: "33333333-3333-3333-3333-333333333333", Name: "gpu", Role: "worker", NodeCount: 1, FlavorID: "g1.large"}
	bounded := extra
	bounded.MaxNodeCount = intp(4)
	for name, tc := range map[string]struct {
		labels map[string]string
		group  NodeGroup
		want   bool
	}{
		"off":                              {map[string]string{"max_node_count": "5"}, NodeGroup{Name: "default-worker", Role: "worker", IsDefault: true}, false},
		"default group, labels' maximum":   {map[string]string{"auto_scaling_enabled": "true", "max_node_count": "5"}, NodeGroup{Name: "default-worker", Role: "worker", IsDefault: true}, true},
		"default group, no maximum":        {map[string]string{"auto_scaling_enabled": "true"}, NodeGroup{Name: "default-worker", Role: "worker", IsDefault: true}, false},
		"extra group without maximum":      {map[string]string{"auto_scaling_enabled": "true", "max_node_count": "5"}, extra, false},
		"extra group with its own maximum": {map[string]string{"auto_scaling_enabled": "true"}, bounded, true},
		"control plane":                    {map[string]string{"auto_scaling_enabled": "true", "max_node_count": "5"}, NodeGroup{Name: "default-master", Role: "master", IsDefault: true}, false},
		"minimum above maximum (refused)":  {map[string]string{"auto_scaling_enabled": "true", "min_node_count": "6", "max_node_count": "5"}, NodeGroup{Name: "default-worker", Role: "worker", IsDefault: true}, false},
	} {
		t.Run(name, func(t *testing.T) {
			in := baseInput()
			in.Cluster.Labels = tc.labels
			require.Equal(t, tc.want, in.Autoscaled(tc.group))
		})
	}
}

func TestWorkerFlavor(t *testing.T) {
	in := baseInput()
	require.Equal(t, "m1.medium", in.WorkerFlavor(NodeGroup{}), "the template's")
	in.Cluster.FlavorID = "m1.large"
	require.Equal(t, "m1.large", in.WorkerFlavor(NodeGroup{}), "the cluster's")
	require.Equal(t, "g1.large", in.WorkerFlavor(NodeGroup{FlavorID: "g1.large"}), "the group's")
}

func TestAnnotateMachineDeployments(t *testing.T) {
	in := baseInput()
	in.Cluster.Labels = map[string]string{"auto_scaling_enabled": "true", "min_node_count": "0", "max_node_count": "5"}
	r, err := Render(in)
	require.NoError(t, err)
	md := MachineDeploymentName(in.NodeGroups[1])
	require.NoError(t, AnnotateMachineDeployments(r.Cluster, map[string]map[string]string{md: {"capacity.cluster-autoscaler.kubernetes.io/cpu": "2"}}))
	mds, _, err := unstructured.NestedSlice(r.Cluster.Object, "spec", "topology", "workers", "machineDeployments")
	require.NoError(t, err)
	require.Len(t, mds, 1)
	annotations, _, _ := unstructured.NestedStringMap(mds[0].(map[string]any), "metadata", "annotations")
	require.Equal(t, "2", annotations["capacity.cluster-autoscaler.kubernetes.io/cpu"])
	require.Equal(t, "5", annotations[AutoscalerMaxAnnotation], "what the rendering had stays")
	require.Equal(t, "default-worker", annotations[AnnotationNGName])

	err = AnnotateMachineDeployments(r.Cluster, map[string]map[string]string{"no-such-group": {"a": "b"}})
	require.ErrorContains(t, err, "no MachineDeployment topology no-such-group")
}

func TestWorkerRootVolumeGiB(t *testing.T) {
	in := baseInput()
	in.Cluster.Labels = map[string]string{"boot_volume_size": "40"}
	own := NodeGroup{Name: "big", Labels: map[string]string{"boot_volume_size": "100"}}
	require.Zero(t, in.WorkerRootVolumeGiB(own), "in-memory machines have no boot volume")
	in.Cluster.Labels["capi_infrastructure"] = "openstack"
	require.Equal(t, 40, in.WorkerRootVolumeGiB(NodeGroup{Name: "default-worker"}), "the cluster's")
	require.Equal(t, 100, in.WorkerRootVolumeGiB(own), "the group's own")
	in.Cluster.Labels = map[string]string{"capi_infrastructure": "openstack"}
	require.Zero(t, in.WorkerRootVolumeGiB(NodeGroup{Name: "default-worker"}), "local disk")
}
