package templates

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// gpuGroup is a worker node group with Magnum 23 node labels and taints (taints out of order, to
// show they are sorted).
func gpuGroup() NodeGroup {
	return NodeGroup{UUID: "33333333-3333-3333-3333-333333333333", Name: "GPU Workers", Role: "worker", NodeCount: 1,
		NodeLabels: map[string]string{"example.com/team": "blue", "tier": "batch", "node.cluster.x-k8s.io/pool": "gpu",
			"node.kubernetes.io/gpu": "true"},
		NodeTaints: []Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"},
			{Key: "dedicated", Effect: "PreferNoSchedule"}, {Key: "example.com/evict", Value: "batch", Effect: "NoExecute"}}}
}

// inputFor is baseInput for a flavor (the OpenStack flavor needs a reachable API server).
func inputFor(flavor Flavor) Input {
	in := baseInput()
	in.Flavor = flavor
	in.Template.FloatingIPEnabled = true
	return in
}

// mdByName is the Cluster topology's MachineDeployment entry of that name.
func mdByName(t *testing.T, r *Rendered, name string) map[string]any {
	t.Helper()
	mds, _, err := unstructured.NestedSlice(r.Cluster.Object, "spec", "topology", "workers", "machineDeployments")
	require.NoError(t, err)
	for _, m := range mds {
		if md := m.(map[string]any); md["name"] == name {
			return md
		}
	}
	t.Fatalf("no machineDeployment %s in the topology", name)
	return nil
}

func TestInMemoryNodeLabelsAndTaintsGoOnTheMachines(t *testing.T) {
	plain := baseInput()
	p, err := Render(plain)
	require.NoError(t, err)
	in := baseInput()
	in.NodeGroups = append(in.NodeGroups, gpuGroup())
	r, err := Render(in)
	require.NoError(t, err)
	require.Equal(t, p.ClassName, r.ClassName, "node labels and taints live in the Cluster, not the shared class")

	gpu := mdByName(t, r, "gpu-workers")
	labels, _, _ := unstructured.NestedStringMap(gpu, "metadata", "labels")
	require.Equal(t, map[string]string{
		"example.com/team": "blue", "tier": "batch", "node.cluster.x-k8s.io/pool": "gpu", "node.kubernetes.io/gpu": "true",
		LabelNodeGroupUUID: "33333333-3333-3333-3333-333333333333",
	}, labels)
	require.Equal(t, []any{
		map[string]any{"key": "dedicated", "effect": "PreferNoSchedule", "propagation": "Always"},
		map[string]any{"key": "example.com/evict", "value": "batch", "effect": "NoExecute", "propagation": "Always"},
		map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule", "propagation": "Always"},
	}, gpu["taints"])

	def := mdByName(t, r, "default-worker")
	labels, _, _ = unstructured.NestedStringMap(def, "metadata", "labels")
	require.Equal(t, map[string]string{LabelNodeGroupUUID: "22222222-2222-2222-2222-222222222222"}, labels)
	require.NotContains(t, def, "taints")
}

func TestOpenStackNodeLabelsStayWithKubelet(t *testing.T) {
	in := inputFor(FlavorOpenStack)
	in.NodeGroups = append(in.NodeGroups, gpuGroup())
	r, err := Render(in)
	require.NoError(t, err)
	gpu := mdByName(t, r, "gpu-workers")
	labels, _, _ := unstructured.NestedStringMap(gpu, "metadata", "labels")
	require.Equal(t, map[string]string{LabelNodeGroupUUID: "33333333-3333-3333-3333-333333333333"}, labels,
		"kubelet registers the labels; Machine labels would make CAPI manage them a second time")
	require.NotContains(t, gpu, "taints", "kubeadm registers the taints, without the MachineTaintPropagation gate")
	vars := map[string]any{}
	overrides, _, _ := unstructured.NestedSlice(gpu, "variables", "overrides")
	for _, o := range overrides {
		vars[o.(map[string]any)["name"].(string)] = o.(map[string]any)["value"]
	}
	require.Equal(t, "example.com/team=blue,node.cluster.x-k8s.io/pool=gpu,node.kubernetes.io/gpu=true,tier=batch", vars[VarNodeLabels])
	require.Equal(t, []any{
		map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
		map[string]any{"key": "dedicated", "effect": "PreferNoSchedule"},
		map[string]any{"key": "example.com/evict", "value": "batch", "effect": "NoExecute"},
	}, vars[VarNodeTaints])
}

func TestNodeLabelsAndTaintsAreValidatedByEntry(t *testing.T) {
	label := func(k, v string) func(*NodeGroup) {
		return func(ng *NodeGroup) { ng.NodeLabels = map[string]string{"example.com/ok": "1", k: v} }
	}
	taints := func(ts ...Taint) func(*NodeGroup) { return func(ng *NodeGroup) { ng.NodeTaints = ts } }
	cases := []struct {
		name   string
		mutate func(*NodeGroup)
		field  string // "" when the node group is valid
		value  string
		reason string
	}{
		{"plain labels", label("tier", "batch"), "", "", ""},
		{"empty label value", label("example.com/flag", ""), "", "", ""},
		{"kubelet's own prefixes", label("node.kubernetes.io/gpu", "true"), "", "", ""},
		{"kubelet.kubernetes.io prefix", label("kubelet.kubernetes.io/x", "y"), "", "", ""},
		{"CAPI's node label domain", label("pool.node.cluster.x-k8s.io/name", "a"), "", "", ""},
		{"label key with a space", label("bad key", "x"), FieldNodeLabels, "bad key=x", "not a valid label key"},
		{"label key with two slashes", label("a/b/c", "x"), FieldNodeLabels, "a/b/c=x", "not a valid label key"},
		{"label value with a space", label("tier", "a b"), FieldNodeLabels, "tier=a b", "not a valid label value"},
		{"label value too long", label("tier", fmt.Sprintf("%064d", 0)), FieldNodeLabels, "tier=" + fmt.Sprintf("%064d", 0), "not a valid label value"},
		{"kubernetes.io", label("kubernetes.io/hostname", "x"), FieldNodeLabels, "kubernetes.io/hostname=x", "kubelet may not set"},
		{"node-role", label("node-role.kubernetes.io/worker", ""), FieldNodeLabels, "node-role.kubernetes.io/worker=", "kubelet may not set"},
		{"k8s.io subdomain", label("foo.k8s.io/x", "y"), FieldNodeLabels, "foo.k8s.io/x=y", "kubelet may not set"},
		{"CAPI bookkeeping", label("cluster.x-k8s.io/cluster-name", "x"), FieldNodeLabels, "cluster.x-k8s.io/cluster-name=x", "Cluster API's"},
		{"CAPI topology bookkeeping", label("topology.cluster.x-k8s.io/owned", ""), FieldNodeLabels, "topology.cluster.x-k8s.io/owned=", "Cluster API's"},
		{"machine-template-hash", label("machine-template-hash", "1"), FieldNodeLabels, "machine-template-hash=1", "reserved for Cluster API"},
		{"bridge domain", label("magnum.openstack.org/nodegroup-uuid", "x"), FieldNodeLabels, "magnum.openstack.org/nodegroup-uuid=x", "reserved for the bridge"},

		{"three effects", taints(Taint{"a", "", "NoSchedule"}, Taint{"a", "", "NoExecute"}, Taint{"b", "v", "PreferNoSchedule"}), "", "", ""},
		{"out-of-service", taints(Taint{"node.kubernetes.io/out-of-service", "nodeshutdown", "NoExecute"}), "", "", ""},
		{"unknown effect", taints(Taint{"a", "b", "Sometimes"}), FieldNodeTaints, "a=b:Sometimes", `the effect "Sometimes" is not`},
		{"no effect", taints(Taint{"a", "", ""}), FieldNodeTaints, "a:", `the effect "" is not`},
		{"lower-case effect", taints(Taint{"a", "", "noschedule"}), FieldNodeTaints, "a:noschedule", "not NoSchedule"},
		{"taint key with a space", taints(Taint{"bad key", "", "NoSchedule"}), FieldNodeTaints, "bad key:NoSchedule", "not a valid taint key"},
		{"empty taint key", taints(Taint{"", "", "NoSchedule"}), FieldNodeTaints, ":NoSchedule", "not a valid taint key"},
		{"taint value with a space", taints(Taint{"a", "b c", "NoSchedule"}), FieldNodeTaints, "a=b c:NoSchedule", "not a valid taint value"},
		{"duplicate", taints(Taint{"a", "1", "NoSchedule"}, Taint{"a", "2", "NoSchedule"}), FieldNodeTaints, "a=2:NoSchedule", "given twice"},
		{"kubelet's not-ready", taints(Taint{"node.kubernetes.io/not-ready", "", "NoExecute"}), FieldNodeTaints, "node.kubernetes.io/not-ready:NoExecute", "kept by Kubernetes"},
		{"cloud provider", taints(Taint{"node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule"}), FieldNodeTaints,
			"node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule", "cloud controller manager"},
		{"deprecated master", taints(Taint{"node-role.kubernetes.io/master", "", "NoSchedule"}), FieldNodeTaints, "node-role.kubernetes.io/master:NoSchedule", "deprecated"},
		{"CAPI's uninitialized", taints(Taint{"node.cluster.x-k8s.io/uninitialized", "", "NoSchedule"}), FieldNodeTaints, "node.cluster.x-k8s.io/uninitialized:NoSchedule", "Cluster API's"},
		{"too many", func(ng *NodeGroup) {
			for i := 0; i < 65; i++ {
				ng.NodeTaints = append(ng.NodeTaints, Taint{Key: fmt.Sprintf("t%d", i), Effect: "NoSchedule"})
			}
		}, FieldNodeTaints, "65 taints", "at most 64"},
	}
	for _, flavor := range []Flavor{FlavorInMemory, FlavorOpenStack} {
		for _, c := range cases {
			t.Run(string(flavor)+"/"+c.name, func(t *testing.T) {
				in := inputFor(flavor)
				g := gpuGroup()
				g.NodeLabels, g.NodeTaints = nil, nil
				c.mutate(&g)
				in.NodeGroups = append(in.NodeGroups, g)
				_, err := Render(in)
				if c.field == "" {
					require.NoError(t, err)
					return
				}
				var le *LabelError
				require.True(t, errors.As(err, &le), "want a LabelError, got %v", err)
				require.Equal(t, c.field, le.Label)
				require.Equal(t, c.value, le.Value, "the error names the bad entry")
				require.Contains(t, le.Reason, "node group GPU Workers: ")
				require.Contains(t, le.Reason, c.reason)
			})
		}
	}
}

func TestControlPlaneGroupHasNoNodeLabelsOrTaints(t *testing.T) {
	in := baseInput()
	in.NodeGroups[0].NodeLabels = map[string]string{"tier": "cp"}
	_, err := Render(in)
	require.ErrorContains(t, err, `invalid value "tier=cp" for label node_labels: node group default-master: the control-plane node group cannot have node labels`)
	in = baseInput()
	in.NodeGroups[0].NodeTaints = []Taint{{Key: "a", Effect: "NoSchedule"}}
	_, err = Render(in)
	require.ErrorContains(t, err, `invalid value "a:NoSchedule" for label node_taints: node group default-master: the control-plane node group cannot have node taints`)
	// Magnum 23 writes {} and [] for the default groups.
	in = baseInput()
	in.NodeGroups[0].NodeLabels, in.NodeGroups[0].NodeTaints = map[string]string{}, []Taint{}
	_, err = Render(in)
	require.NoError(t, err)
}

func TestUpgradeRollout(t *testing.T) {
	const (
		master  = "11111111-1111-1111-1111-111111111111"
		worker  = "22222222-2222-2222-2222-222222222222"
		gpu     = "33333333-3333-3333-3333-333333333333"
		another = "44444444-4444-4444-4444-444444444444"
	)
	rolling := func(n int64) map[string]any {
		return map[string]any{"strategy": map[string]any{"type": "RollingUpdate",
			"rollingUpdate": map[string]any{"maxSurge": n, "maxUnavailable": int64(0)}}}
	}
	cases := []struct {
		name    string
		upgrade *Upgrade
		want    map[string]map[string]any // MachineDeployment name → rollout (nil: none rendered)
		err     string
	}{
		{"no upgrade: Cluster API's default", nil, map[string]map[string]any{"default-worker": nil, "gpu-workers": nil, "batch": nil}, ""},
		{"default worker named: the whole cluster", &Upgrade{MaxBatchSize: 2, NodeGroup: worker},
			map[string]map[string]any{"default-worker": rolling(2), "gpu-workers": rolling(2), "batch": rolling(2)}, ""},
		{"control plane named: the whole cluster", &Upgrade{MaxBatchSize: 1, NodeGroup: master},
			map[string]map[string]any{"default-worker": rolling(1), "gpu-workers": rolling(1), "batch": rolling(1)}, ""},
		{"none named: the whole cluster", &Upgrade{MaxBatchSize: 5},
			map[string]map[string]any{"default-worker": rolling(5), "gpu-workers": rolling(5), "batch": rolling(5)}, ""},
		{"another group named: only that group", &Upgrade{MaxBatchSize: 4, NodeGroup: gpu},
			map[string]map[string]any{"default-worker": nil, "gpu-workers": rolling(4), "batch": nil}, ""},
		{"batch of zero", &Upgrade{MaxBatchSize: 0, NodeGroup: worker}, nil, "max_batch_size must be at least 1"},
		{"negative batch", &Upgrade{MaxBatchSize: -3, NodeGroup: worker}, nil, "not -3"},
		{"unknown group", &Upgrade{MaxBatchSize: 1, NodeGroup: "55555555-5555-5555-5555-555555555555"}, nil, "no node group 55555555-"},
	}
	for _, flavor := range []Flavor{FlavorInMemory, FlavorOpenStack} {
		for _, c := range cases {
			t.Run(string(flavor)+"/"+c.name, func(t *testing.T) {
				in := inputFor(flavor)
				in.NodeGroups = append(in.NodeGroups, gpuGroup(),
					NodeGroup{UUID: another, Name: "batch", Role: "worker", NodeCount: 3})
				in.Upgrade = c.upgrade
				r, err := Render(in)
				if c.err != "" {
					require.ErrorContains(t, err, c.err)
					return
				}
				require.NoError(t, err)
				for name, want := range c.want {
					got, _ := mdByName(t, r, name)["rollout"].(map[string]any)
					require.Equal(t, want, got, name)
				}
				// The control plane keeps KubeadmControlPlane's own one-at-a-time rollout.
				_, found, _ := unstructured.NestedFieldNoCopy(r.Cluster.Object, "spec", "topology", "controlPlane", "rollout")
				require.False(t, found)
				covered := map[string]bool{}
				for _, ng := range in.NodeGroups {
					covered[ng.Name] = in.UpgradeCovers(ng)
				}
				switch {
				case c.upgrade == nil:
					require.Equal(t, map[string]bool{"default-master": false, "default-worker": false, "GPU Workers": false, "batch": false}, covered)
				case c.upgrade.NodeGroup == gpu:
					require.Equal(t, map[string]bool{"default-master": false, "default-worker": false, "GPU Workers": true, "batch": false}, covered)
				default:
					require.Equal(t, map[string]bool{"default-master": true, "default-worker": true, "GPU Workers": true, "batch": true}, covered)
				}
			})
		}
	}
}
