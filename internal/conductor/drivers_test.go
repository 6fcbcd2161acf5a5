package conductor

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

// asBuiltBy makes the stored cluster id look like another driver's: its stack_id and status.
func (h *harness) asBuiltBy(id, stackID string, status magnum.ClusterStatus) {
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	h.store.clusters[id].StackID.Set(stackID)
	h.store.clusters[id].Status.Set(status)
}

// Another driver's cluster in the same database: every request about it is refused with
// NotSupported naming the driver, and nothing changes — its row, its node groups, the management
// cluster; the leader's resync does not drive it even when it is left in progress.
func TestAnotherDriversClusterIsLeftAlone(t *testing.T) {
	h := newHarness(t)
	heat := h.created(2)
	helm := h.created(1)
	h.asBuiltBy(heat, "9f1c0c4e-8a1f-4f0e-9c2e-0b1c2d3e4f50", magnum.StatusCreateComplete)
	h.asBuiltBy(helm, "demo-x2kq7mzpa4bt", magnum.StatusUpdateInProgress)
	applies := h.kube.applies
	before := map[string]magnum.Cluster{heat: *h.store.cluster(t, heat), helm: *h.store.cluster(t, helm)}

	for _, tc := range []struct {
		id, driver string
	}{{heat, "Heat"}, {helm, "magnum-capi-helm"}} {
		worker := h.store.group(t, tc.id, "default-worker")
		extra := workerGroup(tc.id, "9a9a9a9a-0000-4000-8000-000000000002", "batch", 1)
		extra.FlavorID.Set("m1.small")
		requests := map[string]*rpc.Request{
			"update": request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(tc.id), "node_count": jsonArg(t, 3)}),
			"resize": request("cluster_resize", map[string]json.RawMessage{"cluster": h.clusterArg(tc.id), "node_count": jsonArg(t, 1),
				"nodegroup": encodeArg(t, worker)}),
			"upgrade": request("cluster_upgrade", map[string]json.RawMessage{"cluster": h.clusterArg(tc.id),
				"cluster_template": encodeArg(t, h.store.templates[templateV137]), "max_batch_size": jsonArg(t, 1)}),
			"delete":           request("cluster_delete", map[string]json.RawMessage{"uuid": jsonArg(t, tc.id)}),
			"nodegroup create": request("nodegroup_create", map[string]json.RawMessage{"cluster": h.clusterArg(tc.id), "nodegroup": encodeArg(t, extra)}),
			"nodegroup delete": request("nodegroup_delete", map[string]json.RawMessage{"cluster": h.clusterArg(tc.id), "nodegroup": encodeArg(t, worker)}),
			"ca show":          request("get_ca_certificate", map[string]json.RawMessage{"cluster": h.clusterArg(tc.id)}),
			"credential":       request("credential_rotate", map[string]json.RawMessage{"cluster": h.clusterArg(tc.id)}),
			"rendering move":   request("bridge_rendering_move", map[string]json.RawMessage{"cluster": jsonArg(t, tc.id)}),
		}
		for what, req := range requests {
			req.IsCall = true
			_, err := h.deliver(req, 1)
			var exc *magnum.Exception
			require.True(t, errors.As(err, &exc), "%s of a %s cluster: %v", what, tc.driver, err)
			require.Equal(t, "NotSupported", exc.Class, what)
			require.Contains(t, exc.Message, "was built by the "+tc.driver+" driver", what)
		}
		p := h.plan(tc.id)
		require.Len(t, p, 1)
		require.False(t, p[0].Moves())
		require.Contains(t, p[0].Error, "built by the "+tc.driver+" driver")
	}
	require.NoError(t, h.c.Resync(context.Background()))
	h.settle(10)
	for id, was := range before {
		now := h.store.cluster(t, id)
		require.Equal(t, was.Status.Or(""), now.Status.Or(""), "status of %s unchanged", id)
		require.Equal(t, was.StatusReason.Or(""), now.StatusReason.Or(""))
		require.Equal(t, was.ClusterTemplateID.Or(""), now.ClusterTemplateID.Or(""))
		for _, g := range []string{"default-master", "default-worker"} {
			require.NotEqual(t, magnum.StatusDeleteInProgress, h.store.group(t, id, g).Status.Or(""))
		}
	}
	require.Equal(t, applies, h.kube.applies, "nothing applied to the management cluster")

	// The bridge's own clusters are served as ever.
	own := h.created(1)
	_, err := h.deliver(request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(own), "node_count": jsonArg(t, 2)}), 1)
	require.NoError(t, err)
}
