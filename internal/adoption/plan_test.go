package adoption

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

func TestWhere(t *testing.T) {
	n := Naming{BridgeNamespacePrefix: "mcb-"}
	c := Cluster{UUID: "e1f9c0c4-8a5f-4b0c-9a53-3c0d8f0f6c1e", ProjectID: "0A1b-2c", StackID: "web-x2kq7mzpa4bt"}
	for _, tc := range []struct {
		driver   templates.Driver
		ns, name string
		ok       bool
	}{
		{templates.DriverBridge, "mcb-0a1b-2c", "web-x2kq7mzpa4bt", true}, // templates.NamespaceFor
		// magnum-capi-helm keeps only [a-z0-9] of the lower-cased project id, after its default prefix.
		{templates.DriverCAPIHelm, "magnum-0a1b2c", "web-x2kq7mzpa4bt", true},
		{templates.DriverClusterAPI, "magnum-system", "web-x2kq7mzpa4bt", true},
		{templates.DriverHeat, "", "", false},
		{templates.DriverUnknown, "", "", false},
	} {
		ns, name, ok := n.Where(tc.driver, c)
		assert.Equal(t, []any{tc.ns, tc.name, tc.ok}, []any{ns, name, ok}, tc.driver)
	}
	ns, _, _ := Naming{CAPIHelmNamespacePrefix: "capi"}.Where(templates.DriverCAPIHelm, c)
	assert.Equal(t, "capi-0a1b2c", ns, "[capi_helm] namespace_prefix")
}

func TestDecide(t *testing.T) {
	live := &Found{Namespace: "magnum-p", Name: "web-x2kq7mzpa4bt", Cluster: true, BridgeNamespace: "magnum-p", NamespaceManaged: true, MachineDeployments: []string{"web-x2kq7mzpa4bt-default-worker", "web-x2kq7mzpa4bt-gpu"}, Machines: 4}
	with := func(mod func(f *Found)) *Found {
		f := *live
		mod(&f)
		return &f
	}
	// magnum-cluster-api's: in its shared namespace, under its ClusterClass, whatever the project.
	vexx := &Found{Namespace: "magnum-system", Name: "kube-a1b2c", Cluster: true, Topology: true, Class: "magnum-v0.38.1", BridgeNamespace: "magnum-p",
		NamespaceManaged: true, MachineDeployments: []string{"default-worker", "gpu"}, Machines: 4}
	withVexx := func(mod func(f *Found)) *Found {
		f := *vexx
		mod(&f)
		return &f
	}
	complete := magnum.StatusCreateComplete
	for _, tc := range []struct {
		name   string
		driver templates.Driver
		status magnum.ClusterStatus
		found  *Found
		action Action
		why    string
	}{
		{"the bridge's own", templates.DriverBridge, magnum.StatusUpdateInProgress, live, Own, "built by this bridge"},
		{"a Heat stack", templates.DriverHeat, complete, nil, Leave, "Heat stack"},
		{"unknown", templates.DriverUnknown, complete, nil, Leave, "no driver this bridge knows"},
		{"magnum-capi-helm, live and complete", templates.DriverCAPIHelm, complete, live, Adopt, "4 machine(s) in 2 node group(s) kept"},
		{"magnum-capi-helm, after a failed update", templates.DriverCAPIHelm, magnum.StatusUpdateFailed, live, Adopt, "taken over in place"},
		{"magnum-capi-helm, mid-operation", templates.DriverCAPIHelm, magnum.StatusUpdateInProgress, live, Refuse, "UPDATE_IN_PROGRESS has not ended"},
		{"magnum-capi-helm, create failed", templates.DriverCAPIHelm, magnum.StatusCreateFailed, live, Refuse, "its create failed"},
		{"magnum-capi-helm, delete failed", templates.DriverCAPIHelm, magnum.StatusDeleteFailed, live, Refuse, "finish the delete"},
		{"magnum-capi-helm, no Cluster here", templates.DriverCAPIHelm, complete, with(func(f *Found) { f.Cluster = false }), Refuse, "no Cluster API cluster magnum-p/web-x2kq7mzpa4bt"},
		{"magnum-capi-helm, Cluster being deleted", templates.DriverCAPIHelm, complete, with(func(f *Found) { f.Deleting = true }), Refuse, "being deleted"},
		{"magnum-capi-helm, under a ClusterClass", templates.DriverCAPIHelm, complete, with(func(f *Found) { f.Topology, f.Class = true, "other" }), Refuse, "ClusterClass other"},
		{"magnum-capi-helm, elsewhere than the bridge's namespace", templates.DriverCAPIHelm, complete, with(func(f *Found) { f.BridgeNamespace = "mcb-p" }), Refuse,
			"the bridge would use mcb-p for its project: set [bridge] namespace_prefix"},
		{"magnum-capi-helm, namespace not handed over", templates.DriverCAPIHelm, complete, with(func(f *Found) { f.NamespaceManaged = false }), Refuse,
			"`kubectl label namespace magnum-p app.kubernetes.io/managed-by=magnum-capi-bridge magnum.openstack.org/project-id=p`"},
		{"adopted from magnum-capi-helm", templates.DriverBridge, complete, with(func(f *Found) { f.AdoptedFrom = "magnum-capi-helm" }), Own, "adopted from magnum-capi-helm"},
		{"magnum-cluster-api's, live under its class", templates.DriverClusterAPI, complete, vexx, Adopt,
			"magnum-cluster-api's cluster kube-a1b2c: to be taken over in place, its 4 machine(s) in 2 node group(s) kept; the bridge then syncs its status"},
		{"magnum-cluster-api's, what stays refused", templates.DriverClusterAPI, complete, vexx, Adopt,
			"resize, node groups, upgrade and credential rotation are refused with NotSupported: its ClusterClass magnum-v0.38.1 stays the old driver's"},
		{"magnum-cluster-api's, with its autoscaler", templates.DriverClusterAPI, complete, withVexx(func(f *Found) { f.AutoscalerRelease = true }), Adopt,
			"its cluster-autoscaler, Helm release kube-a1b2c in magnum-system, stays Helm's"},
		{"magnum-cluster-api's, mid-operation", templates.DriverClusterAPI, magnum.StatusDeleteInProgress, vexx, Refuse, "magnum-cluster-api's DELETE_IN_PROGRESS has not ended"},
		{"magnum-cluster-api's, gone", templates.DriverClusterAPI, complete, withVexx(func(f *Found) { f.Cluster = false }), Refuse, "no Cluster API cluster magnum-system/kube-a1b2c"},
		{"magnum-cluster-api's, without its class", templates.DriverClusterAPI, complete, withVexx(func(f *Found) { f.Topology = false }), Refuse, "follows no ClusterClass"},
		{"magnum-cluster-api's, namespace not handed over", templates.DriverClusterAPI, complete, withVexx(func(f *Found) { f.NamespaceManaged = false }), Refuse,
			"`kubectl label namespace magnum-system app.kubernetes.io/managed-by=magnum-capi-bridge` once magnum-cluster-api's conductor is stopped"},
		{"taken over from magnum-cluster-api", templates.DriverBridge, complete, withVexx(func(f *Found) { f.AdoptedFrom = "magnum-cluster-api" }), Own,
			"taken over from magnum-cluster-api for its status, `coe cluster config` and delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Cluster{UUID: "u", Name: "web", ProjectID: "p", StackID: "web-x2kq7mzpa4bt", Status: tc.status}
			e := Decide(c, tc.driver, "told so", tc.found)
			assert.Equal(t, tc.action, e.Action)
			assert.Contains(t, e.Why, tc.why)
			assert.Equal(t, "told so", e.DriverWhy)
			assert.Equal(t, tc.status, e.Status)
		})
	}
}

func TestCAPIHelmName(t *testing.T) {
	assert.Equal(t, "web-x2kq7mzpa4bt-default-worker", CAPIHelmName("web-x2kq7mzpa4bt", "default-worker"))
	assert.Equal(t, "web-x2kq7mzpa4bt-gpu-nodes-a", CAPIHelmName("web-x2kq7mzpa4bt", "GPU nodes_A"), "runs of other characters become one dash")
	assert.Equal(t, "web-x2kq7mzpa4bt-cloud-credentials", CAPIHelmName("web-x2kq7mzpa4bt", "cloud-credentials"))
}

func TestCounts(t *testing.T) {
	assert.Equal(t, map[Action]int{Own: 1, Adopt: 2}, Counts([]Entry{{Action: Adopt}, {Action: Own}, {Action: Adopt}}))
}
