package conductor

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

func TestUpgradeCheck(t *testing.T) {
	cases := []struct {
		from, to string
		errPart  string
	}{
		{"v1.35.4", "v1.36.3", ""},
		{"v1.36.3", "v1.36.3", ""},
		{"v1.36.1", "v1.36.3", ""},
		{"v1.34.2", "v1.36.3", "may not skip a Kubernetes minor version (from v1.34.2 to v1.36.3: upgrade to v1.35 first)"},
		{"v1.36.3", "v1.35.4", "downgrades are not supported"},
		{"v1.36.3", "v1.36.1", "downgrades are not supported"},
		{"v1.36.3", "v2.0.0", "major Kubernetes version"},
		{"", "v1.36.3", ""}, // unknown current version: CAPI's own checks apply
	}
	for _, c := range cases {
		err := upgradeCheck(c.from, c.to)
		if c.errPart == "" {
			require.NoError(t, err, "%s → %s", c.from, c.to)
		} else {
			require.ErrorContains(t, err, c.errPart, "%s → %s", c.from, c.to)
		}
	}
}

func TestUpgradedLabels(t *testing.T) {
	cluster := map[string]string{"kube_tag": "v1.35.4", "auto_healing_enabled": "true", "mine": "x", "dropped": "1"}
	oldTmpl := map[string]string{"kube_tag": "v1.35.4", "auto_healing_enabled": "false", "dropped": "1"}
	newTmpl := map[string]string{"kube_tag": "v1.36.3"}
	require.Equal(t, map[string]string{"kube_tag": "v1.36.3", "auto_healing_enabled": "true", "mine": "x"},
		upgradedLabels(cluster, oldTmpl, newTmpl))
}

func TestAuthorize(t *testing.T) {
	require.NoError(t, authorize(&rpc.Context{ProjectID: "p1"}, "p1"))
	require.NoError(t, authorize(&rpc.Context{Project: "p1"}, "p1"))
	require.NoError(t, authorize(&rpc.Context{ProjectID: "admin", IsAdmin: true}, "p1"))
	err := authorize(&rpc.Context{ProjectID: "p2"}, "p1")
	require.ErrorIs(t, err, magnum.ErrAuthorizationFailure)
	require.Error(t, authorize(nil, "p1"))
	require.Error(t, authorize(&rpc.Context{}, "p1"), "a context without a project is no project's")
}

func TestDefaultNodeGroupsFollowMagnum(t *testing.T) {
	cl := &magnum.Cluster{}
	cl.UUID.Set("bd71db63-28f3-4ac5-8e6e-d51a6470e5ff")
	cl.ProjectID.Set("p1")
	cl.FlavorID.Set("m1.small")
	cl.Labels.Set(magnum.NewDict("min_node_count", "1", "max_node_count", "5"))
	tmpl := &magnum.ClusterTemplate{}
	tmpl.ImageID.Set("ubuntu-2404-kube-v1.36.3")
	tmpl.MasterFlavorID.Set("m1.medium")
	tmpl.DockerVolumeSize.Set(10)
	master, worker := defaultNodeGroups(cl, tmpl, 3, 2)
	require.Equal(t, "default-master", master.Name.Or(""))
	require.Equal(t, "master", master.Role.Or(""))
	require.EqualValues(t, 3, master.NodeCount.Or(0))
	require.Equal(t, "m1.medium", master.FlavorID.Or(""), "master flavor falls back to the template's")
	require.Equal(t, "m1.small", worker.FlavorID.Or(""))
	require.EqualValues(t, 2, worker.NodeCount.Or(0))
	require.EqualValues(t, 1, worker.MinNodeCount.Or(0))
	require.EqualValues(t, 5, worker.MaxNodeCount.Or(0))
	require.EqualValues(t, 10, worker.DockerVolumeSize.Or(0))
	require.Equal(t, cl.UUID.Or(""), worker.ClusterID.Or(""))
	require.True(t, master.IsDefault.Or(false) && worker.IsDefault.Or(false))
	require.NotEqual(t, master.UUID.Or(""), worker.UUID.Or(""))
}

// The node-group conversion carries Magnum 23's node labels and taints, and a cluster_upgrade's
// arguments reach the rendering through the request's context only.
func TestRenderInputNodesAndUpgrade(t *testing.T) {
	c := New(nil, nil, nil, Options{Flavor: templates.FlavorInMemory, NamespacePrefix: "magnum-", DefaultKubernetesVersion: "v1.36.3"})
	cl := &magnum.Cluster{}
	cl.UUID.Set("bd71db63-28f3-4ac5-8e6e-d51a6470e5ff")
	cl.ProjectID.Set("p1")
	tmpl := &magnum.ClusterTemplate{}
	tmpl.ImageID.Set("ubuntu-2404-kube-v1.36.3")
	ng := &magnum.NodeGroup{}
	ng.UUID.Set("33333333-3333-3333-3333-333333333333")
	ng.Name.Set("gpu")
	ng.Role.Set("worker")
	ng.NodeLabels.Set(magnum.NewDict("tier", "batch"))
	ng.NodeTaints.Set([]magnum.Dict{magnum.NewDict("key", "nvidia.com/gpu", "value", "present", "effect", "NoSchedule"),
		magnum.NewDict("key", "dedicated", "effect", "PreferNoSchedule")})
	gone := &magnum.NodeGroup{}
	gone.UUID.Set("44444444-4444-4444-4444-444444444444")
	gone.Status.Set("DELETE_IN_PROGRESS")

	in := c.renderInput(cl, tmpl, []*magnum.NodeGroup{ng, gone}, nil)
	require.Nil(t, in.Upgrade)
	require.Len(t, in.NodeGroups, 1, "a group being deleted leaves the topology")
	require.Equal(t, map[string]string{"tier": "batch"}, in.NodeGroups[0].NodeLabels)
	require.Equal(t, []templates.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"},
		{Key: "dedicated", Effect: "PreferNoSchedule"}}, in.NodeGroups[0].NodeTaints)

	u := &templates.Upgrade{MaxBatchSize: 3, NodeGroup: ng.UUID.Or("")}
	in = c.renderInput(cl, tmpl, []*magnum.NodeGroup{ng}, u)
	require.Equal(t, u, in.Upgrade)
	require.True(t, in.UpgradeCovers(in.NodeGroups[0]))
}

// An upgrade moves the groups it covers from the old template's image to the new one's; a group
// created with an image of its own keeps it, and so does a group the upgrade does not cover.
func TestUpgradedImages(t *testing.T) {
	old, target := &magnum.ClusterTemplate{}, &magnum.ClusterTemplate{}
	old.ImageID.Set("ubuntu-2404-kube-v1.35.4")
	target.ImageID.Set("ubuntu-2404-kube-v1.36.3")
	group := func(id, image string, isDefault bool) templates.NodeGroup {
		return templates.NodeGroup{UUID: id, Name: id, Role: "worker", ImageID: image, IsDefault: isDefault}
	}
	in := templates.Input{NodeGroups: []templates.NodeGroup{
		{UUID: "m", Name: "m", Role: "master", ImageID: "ubuntu-2404-kube-v1.35.4", IsDefault: true},
		group("w", "ubuntu-2404-kube-v1.35.4", true), group("gpu", "gpu-image", false), group("unset", "", false),
	}, Upgrade: &templates.Upgrade{MaxBatchSize: 1}}
	moved := upgradedImages(in, old, target)
	require.Equal(t, map[string]string{"m": "ubuntu-2404-kube-v1.36.3", "w": "ubuntu-2404-kube-v1.36.3", "unset": "ubuntu-2404-kube-v1.36.3"}, moved)
	require.Equal(t, "gpu-image", in.NodeGroups[2].ImageID)
	require.Equal(t, "ubuntu-2404-kube-v1.36.3", in.NodeGroups[1].ImageID, "the rendering sees the moved image")

	in.NodeGroups[1].ImageID = "ubuntu-2404-kube-v1.35.4"
	in.Upgrade.NodeGroup = "gpu" // an upgrade of one non-default group covers only it
	require.Empty(t, upgradedImages(in, old, target))
}
