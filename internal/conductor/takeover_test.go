package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// takenOver makes the stored cluster id one magnum-cluster-api built (stack_id kube-xxxxx) and the
// bridge took over: its Cluster in the driver's namespace, marked, under the driver's class.
func (h *harness) takenOver(id, stack string) {
	h.asBuiltBy(id, stack, magnum.StatusCreateComplete)
	marks := templates.TakeOverMarks(stack, id)
	cl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": marks.APIVersion, "kind": marks.Kind,
		"spec": map[string]any{"topology": map[string]any{"classRef": map[string]any{"name": "magnum-v0.38.1"}, "version": "v1.36.3"}}}}
	cl.SetNamespace(templates.ClusterAPINamespace)
	cl.SetName(stack)
	cl.SetLabels(marks.Labels)
	cl.SetAnnotations(marks.Annotations)
	h.kube.mu.Lock()
	defer h.kube.mu.Unlock()
	h.kube.objects[objKey("Cluster", templates.ClusterAPINamespace, stack)] = cl
}

// A cluster taken over from magnum-cluster-api is the bridge's for its status, CA and delete only:
// every change is refused with NotSupported naming the driver, nothing is applied; the status sync
// finds its node groups by their MachineDeployments' topology names; its delete happens in the
// driver's namespace and ends when that Cluster is gone (not a project namespace's of the same name).
func TestATakenOverClusterIsDrivenForStatusAndDeleteOnly(t *testing.T) {
	h := newHarness(t)
	id := h.created(1)
	const stack = "kube-a1b2c"
	h.takenOver(id, stack)
	applies := h.kube.applies
	worker := h.store.group(t, id, "default-worker")
	extra := workerGroup(id, "9a9a9a9a-0000-4000-8000-000000000003", "batch", 1)
	extra.FlavorID.Set("m1.small")
	for what, req := range map[string]*rpc.Request{
		"update": request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 3)}),
		"resize": request("cluster_resize", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 1),
			"nodegroup": encodeArg(t, worker)}),
		"upgrade": request("cluster_upgrade", map[string]json.RawMessage{"cluster": h.clusterArg(id),
			"cluster_template": encodeArg(t, h.store.templates[templateV137]), "max_batch_size": jsonArg(t, 1)}),
		"nodegroup create": request("nodegroup_create", map[string]json.RawMessage{"cluster": h.clusterArg(id), "nodegroup": encodeArg(t, extra)}),
		"nodegroup update": request("nodegroup_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "nodegroup": encodeArg(t, worker)}),
		"nodegroup delete": request("nodegroup_delete", map[string]json.RawMessage{"cluster": h.clusterArg(id), "nodegroup": encodeArg(t, worker)}),
		"credential":       request("credential_rotate", map[string]json.RawMessage{"cluster": h.clusterArg(id)}),
	} {
		req.IsCall = true
		_, err := h.deliver(req, 1)
		var exc *magnum.Exception
		require.True(t, errors.As(err, &exc), "%s: %v", what, err)
		require.Equal(t, "NotSupported", exc.Class, what)
		require.Contains(t, exc.Message, "took it over from magnum-cluster-api for its status, `coe cluster config` and delete only", what)
	}
	h.settle(10)
	require.Equal(t, applies, h.kube.applies, "nothing applied")
	require.Equal(t, magnum.StatusCreateComplete, h.store.cluster(t, id).Status.Or(""))
	_, err := h.deliver(request("get_ca_certificate", map[string]json.RawMessage{"cluster": h.clusterArg(id)}), 1)
	require.NoError(t, err, "its CA is served")

	// Its workers scaled outside Magnum: the MachineDeployment named after the node group, no uuid.
	live, found, err := h.kube.GetCluster(context.Background(), templates.ClusterAPINamespace, stack)
	require.NoError(t, err)
	require.True(t, found)
	md := clusterv1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: stack + "-default-worker-x7k2p", Namespace: templates.ClusterAPINamespace,
		Labels: map[string]string{clusterv1.ClusterNameLabel: stack, clusterv1.ClusterTopologyMachineDeploymentNameLabel: "default-worker"}},
		Spec: clusterv1.MachineDeploymentSpec{Replicas: ptr(int32(3))}}
	_, err = h.c.ClusterObserved(context.Background(), id, capi.Observation{Cluster: live, MachineDeployments: []clusterv1.MachineDeployment{md}})
	require.NoError(t, err)
	require.EqualValues(t, 3, h.store.group(t, id, "default-worker").NodeCount.Or(0))
	require.Empty(t, md.Labels[templates.LabelNodeGroupUUID], "the observation's objects are not written")

	_, err = h.deliver(request("cluster_delete", map[string]json.RawMessage{"uuid": jsonArg(t, id)}), 1)
	require.NoError(t, err)
	h.settle(10)
	require.True(t, h.kube.deleting[objKey("Cluster", templates.ClusterAPINamespace, stack)], "deleted where the driver put it")
	require.NoError(t, h.c.ClusterGone(context.Background(), "magnum-"+demoProject, stack))
	require.Equal(t, magnum.StatusDeleteInProgress, h.store.cluster(t, id).Status.Or(""), "a project namespace's Cluster of that name is another")
	h.kube.finishDeleting()
	require.NoError(t, h.c.ClusterGone(context.Background(), templates.ClusterAPINamespace, stack))
	h.settle(10)
	_, err = h.c.store.GetCluster(context.Background(), id)
	require.ErrorIs(t, err, ErrNotFound, "the row goes once its Cluster is gone")
}
