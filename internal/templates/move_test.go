package templates

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// renamed is a copy of a rendering's objects as a class of another name: what another bridge
// rendering the same content would apply.
func renamed(t *testing.T, objs []*unstructured.Unstructured, from, to string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, o := range objs {
		b, err := json.Marshal(o.Object)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(string(b), from, to)), &m))
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

func objectOf(objs []*unstructured.Unstructured, kind, suffix string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasSuffix(o.GetName(), suffix) {
			return o
		}
	}
	return nil
}

func TestPlanMove(t *testing.T) {
	const next = "magnum-next00000000"
	for _, flavor := range []Flavor{FlavorInMemory, FlavorOpenStack} {
		in := baseInput()
		if flavor == FlavorOpenStack {
			in.Flavor = FlavorOpenStack
			in.Template.MasterFlavorID = "m1.large"
			in.Template.MasterLBEnabled = true
		}
		in.NodeGroups = append(in.NodeGroups, NodeGroup{UUID: "33333333-3333-3333-3333-333333333333", Name: "extra", Role: "worker", NodeCount: 1})
		r, err := Render(in)
		require.NoError(t, err)
		var live clusterv1.Cluster
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(r.Cluster.Object, &live))
		machine := "DevMachineTemplate"
		if flavor == FlavorOpenStack {
			machine = "OpenStackMachineTemplate"
		}

		cases := map[string]struct {
			change   func(class []*unstructured.Unstructured, moved *unstructured.Unstructured)
			cp       bool
			workers  []string
			changes  []string
			newGroup bool
		}{
			"the same content under another name": {change: func([]*unstructured.Unstructured, *unstructured.Unstructured) {}},
			"the workers' bootstrap template": {change: func(class []*unstructured.Unstructured, _ *unstructured.Unstructured) {
				o := objectOf(class, "KubeadmConfigTemplate", "-worker")
				require.NoError(t, unstructured.SetNestedField(o.Object, "unix:///run/containerd/containerd.sock",
					"spec", "template", "spec", "joinConfiguration", "nodeRegistration", "criSocket"))
			}, workers: []string{"default-worker", "extra"}, changes: []string{"worker group default-worker's bootstrap template", "worker group extra's bootstrap template"}},
			"the control plane template": {change: func(class []*unstructured.Unstructured, _ *unstructured.Unstructured) {
				o := objectOf(class, "KubeadmControlPlaneTemplate", "-control-plane")
				require.NoError(t, unstructured.SetNestedField(o.Object, "x", "spec", "template", "spec", "kubeadmConfigSpec", "clusterConfiguration", "imageRepository"))
			}, cp: true, changes: []string{"the control plane template"}},
			"the machines' template (both roles)": {change: func(class []*unstructured.Unstructured, _ *unstructured.Unstructured) {
				o := objectOf(class, machine, "-machine")
				require.NoError(t, unstructured.SetNestedField(o.Object, "changed", "spec", "template", "metadata", "labels", "x"))
			}, cp: true, workers: []string{"default-worker", "extra"},
				changes: []string{"the control plane's machine template", "worker group default-worker's machine template", "worker group extra's machine template"}},
			"a patch": {change: func(class []*unstructured.Unstructured, _ *unstructured.Unstructured) {
				o := objectOf(class, "ClusterClass", "")
				require.NoError(t, unstructured.SetNestedSlice(o.Object, []any{map[string]any{"name": "new", "definitions": []any{}}}, "spec", "patches"))
			}, cp: true, workers: []string{"default-worker", "extra"}, changes: []string{"the class's patches"}},
			"one group's failure domain": {change: func(_ []*unstructured.Unstructured, moved *unstructured.Unstructured) {
				mds, _, _ := unstructured.NestedSlice(moved.Object, "spec", "topology", "workers", "machineDeployments")
				mds[1].(map[string]any)["failureDomain"] = "az-2"
				require.NoError(t, unstructured.SetNestedSlice(moved.Object, mds, "spec", "topology", "workers", "machineDeployments"))
			}, workers: []string{"extra"}, changes: []string{"worker group extra's failure domain"}},
			"the infrastructure cluster template only": {change: func(class []*unstructured.Unstructured, _ *unstructured.Unstructured) {
				o := objectOf(class, strings.Replace(machine, "Machine", "Cluster", 1), "-cluster")
				require.NoError(t, unstructured.SetNestedField(o.Object, "changed", "spec", "template", "metadata", "labels", "x"))
			}, changes: []string{"the infrastructure cluster template"}},
			"a group the move adds": {change: func(_ []*unstructured.Unstructured, moved *unstructured.Unstructured) {
				mds, _, _ := unstructured.NestedSlice(moved.Object, "spec", "topology", "workers", "machineDeployments")
				mds = append(mds, map[string]any{"name": "later", "class": WorkerClass, "failureDomain": "az-9"})
				require.NoError(t, unstructured.SetNestedSlice(moved.Object, mds, "spec", "topology", "workers", "machineDeployments"))
			}},
		}
		for name, c := range cases {
			t.Run(string(flavor)+"/"+name, func(t *testing.T) {
				class := renamed(t, r.ClassObjects, r.ClassName, next)
				moved := renamed(t, []*unstructured.Unstructured{r.Cluster}, r.ClassName, next)[0]
				c.change(class, moved)
				m, err := PlanMove(&live, r.ClassObjects, moved, class)
				require.NoError(t, err)
				require.Equal(t, c.cp, m.ControlPlane)
				require.Equal(t, c.workers, m.Workers)
				require.Equal(t, c.changes, m.Changes)
				require.Equal(t, c.cp || len(c.workers) > 0, m.Rolls())
			})
		}
	}
}

func TestPlanMoveNeedsBothClasses(t *testing.T) {
	r, err := Render(baseInput())
	require.NoError(t, err)
	var live clusterv1.Cluster
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(r.Cluster.Object, &live))
	_, err = PlanMove(&live, nil, r.Cluster, r.ClassObjects)
	require.ErrorContains(t, err, "the live class: no ClusterClass "+r.ClassName)
}
