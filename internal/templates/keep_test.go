package templates_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/templatestest"
)

// liveAsOlderBridge renders in and changes what an older bridge could have rendered differently:
// another class, version, variables, overrides and failure domain.
func liveAsOlderBridge(t *testing.T, in templates.Input) *clusterv1.Cluster {
	t.Helper()
	r, err := templates.Render(in)
	require.NoError(t, err)
	var live clusterv1.Cluster
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(r.Cluster.Object, &live))
	live.Spec.Topology.ClassRef.Name = "magnum-0123456789ab"
	live.Spec.Topology.Version = "v1.35.4"
	live.Spec.Topology.Variables = append(live.Spec.Topology.Variables,
		clusterv1.ClusterVariable{Name: "olderBridgeOnly", Value: apiextensionsv1.JSON{Raw: []byte(`"x"`)}})
	live.Spec.Topology.ControlPlane.Variables.Overrides = []clusterv1.ClusterVariable{{Name: "cpOld", Value: apiextensionsv1.JSON{Raw: []byte(`1`)}}}
	md := &live.Spec.Topology.Workers.MachineDeployments[0]
	md.Variables.Overrides = []clusterv1.ClusterVariable{{Name: "mdOld", Value: apiextensionsv1.JSON{Raw: []byte(`true`)}}}
	md.FailureDomain = "az-old"
	live.Annotations[templates.AnnotationRenderedBy] = "v0.0.9"
	return &live
}

func TestKeepGivesLiveMachineShapingFields(t *testing.T) {
	for _, flavor := range []templates.Flavor{templates.FlavorInMemory, templates.FlavorOpenStack} {
		t.Run(string(flavor), func(t *testing.T) {
			in := templatestest.BaseInput(flavor)
			if flavor == templates.FlavorOpenStack {
				in = templatestest.BaseOpenStackInput()
			}
			live := liveAsOlderBridge(t, in)

			// The operation: the default workers resized 2 → 3 and a node group added, by a
			// bridge of another version.
			in.NodeGroups[1].NodeCount = 3
			in.NodeGroups = append(in.NodeGroups, templates.NodeGroup{UUID: "33333333-3333-3333-3333-333333333333",
				Name: "extra", Role: "worker", NodeCount: 1, FlavorID: "m1.large"})
			in.RenderedBy = "v0.2.0"
			r, err := templates.Render(in)
			require.NoError(t, err)
			fresh := r.Cluster.DeepCopy()
			require.NoError(t, r.Keep(live))

			var got clusterv1.Cluster
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(r.Cluster.Object, &got))
			require.Equal(t, live.Spec.Topology.ClassRef, got.Spec.Topology.ClassRef)
			require.Equal(t, "v1.35.4", got.Spec.Topology.Version)
			require.Equal(t, "v1.35.4", r.Version, "the add-ons follow the version the cluster runs")
			require.Equal(t, "magnum-0123456789ab", r.ClassName)
			require.Empty(t, r.ClassObjects, "the live class exists; nothing of the running bridge's class is applied")
			require.Equal(t, live.Spec.Topology.Variables, got.Spec.Topology.Variables)
			require.Equal(t, live.Spec.Topology.ControlPlane.Variables, got.Spec.Topology.ControlPlane.Variables)
			require.Equal(t, live.Spec.ClusterNetwork, got.Spec.ClusterNetwork)
			require.Equal(t, "v0.0.9", got.Annotations[templates.AnnotationRenderedBy])

			mds := got.Spec.Topology.Workers.MachineDeployments
			require.Len(t, mds, 2)
			old := live.Spec.Topology.Workers.MachineDeployments[0]
			require.Equal(t, old.Name, mds[0].Name)
			require.Equal(t, old.Class, mds[0].Class)
			require.Equal(t, old.Variables, mds[0].Variables)
			require.Equal(t, "az-old", mds[0].FailureDomain)
			require.Equal(t, ptr.To[int32](3), mds[0].Replicas, "the resize is applied")
			require.Equal(t, old.Metadata.Labels, mds[0].Metadata.Labels)

			var rendered clusterv1.Cluster
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(fresh.Object, &rendered))
			require.Equal(t, "extra", mds[1].Name)
			require.Equal(t, rendered.Spec.Topology.Workers.MachineDeployments[1], mds[1], "a new node group is rendered afresh")
		})
	}
}

func TestKeepDropsRenderedByWhenLiveHasNone(t *testing.T) {
	in := templatestest.BaseInput(templates.FlavorInMemory)
	live := liveAsOlderBridge(t, in)
	delete(live.Annotations, templates.AnnotationRenderedBy)
	in.RenderedBy = "v0.2.0"
	r, err := templates.Render(in)
	require.NoError(t, err)
	require.Equal(t, "v0.2.0", r.Cluster.GetAnnotations()[templates.AnnotationRenderedBy])
	require.NoError(t, r.Keep(live))
	require.NotContains(t, r.Cluster.GetAnnotations(), templates.AnnotationRenderedBy,
		"a cluster an unversioned bridge rendered is not claimed by this one")
}

func TestKeepVersionMovesTheRenderingNotTheVersion(t *testing.T) {
	in := templatestest.BaseInput(templates.FlavorInMemory)
	live := liveAsOlderBridge(t, in)
	r, err := templates.Render(in)
	require.NoError(t, err)
	class := r.ClassName
	require.NoError(t, r.KeepVersion(live))
	var got clusterv1.Cluster
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(r.Cluster.Object, &got))
	require.Equal(t, "v1.35.4", got.Spec.Topology.Version)
	require.Equal(t, "v1.35.4", r.Version)
	require.Equal(t, class, got.Spec.Topology.ClassRef.Name, "the running bridge's class")
	require.NotEmpty(t, r.ClassObjects)
}
