package conductor

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/adoption"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// The adoption plan reads every cluster's row and what the management cluster holds where its
// driver puts it, and changes nothing.
func TestAdoptionPlan(t *testing.T) {
	h := newHarness(t)
	own := h.created(1)
	heat := h.created(1)
	helm := h.created(1)
	h.asBuiltBy(heat, "9f1c0c4e-8a1f-4f0e-9c2e-0b1c2d3e4f50", magnum.StatusCreateComplete)
	h.asBuiltBy(helm, "demo-x2kq7mzpa4bt", magnum.StatusUpdateComplete)
	// What the fake management cluster answers for any name: magnum-capi-helm's chart makes a
	// Cluster without a topology, a MachineDeployment per node group.
	h.kube.live = &capi.Observation{
		Cluster: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "demo-x2kq7mzpa4bt", Namespace: "magnum-" + demoProject}},
		MachineDeployments: []clusterv1.MachineDeployment{
			{ObjectMeta: metav1.ObjectMeta{Name: "demo-x2kq7mzpa4bt-default-worker"}}, {ObjectMeta: metav1.ObjectMeta{Name: "demo-x2kq7mzpa4bt-batch"}},
		},
		Machines: make([]clusterv1.Machine, 3),
	}
	before := map[string]magnum.Cluster{own: *h.store.cluster(t, own), heat: *h.store.cluster(t, heat), helm: *h.store.cluster(t, helm)}
	applies := h.kube.applies

	req := request(MethodAdoptionPlan, map[string]json.RawMessage{})
	req.IsCall = true
	_, err := h.deliver(req, 1)
	require.ErrorContains(t, err, "needs an admin context", "a tenant's context")

	req.Context.IsAdmin = true
	res, err := h.deliver(req, 1)
	require.NoError(t, err)
	byUUID := map[string]adoption.Entry{}
	for _, e := range res.([]adoption.Entry) {
		byUUID[e.UUID] = e
	}
	require.Len(t, byUUID, 3)
	require.Equal(t, adoption.Own, byUUID[own].Action)
	require.Equal(t, templates.DriverBridge, byUUID[own].Driver)
	require.Equal(t, adoption.Leave, byUUID[heat].Action)
	require.Nil(t, byUUID[heat].Found, "a Heat stack is not looked for in the management cluster")
	e := byUUID[helm]
	require.Equal(t, adoption.Adopt, e.Action, e.Why)
	require.Equal(t, templates.DriverCAPIHelm, e.Driver)
	require.Equal(t, &adoption.Found{Namespace: "magnum-" + demoProject, Name: "demo-x2kq7mzpa4bt", Cluster: true,
		MachineDeployments: []string{"demo-x2kq7mzpa4bt-default-worker", "demo-x2kq7mzpa4bt-batch"}, Machines: 3,
		BridgeNamespace: "magnum-" + demoProject, NamespaceManaged: true}, e.Found)
	require.Contains(t, e.Why, "3 machine(s) in 2 node group(s) kept")

	for id, was := range before {
		now := h.store.cluster(t, id)
		require.Equal(t, was.Status.Or(""), now.Status.Or(""))
		require.Equal(t, was.StatusReason.Or(""), now.StatusReason.Or(""))
	}
	require.Equal(t, applies, h.kube.applies, "a dry run: nothing applied")
}
