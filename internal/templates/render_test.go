package templates

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite golden files")

func baseInput() Input {
	return Input{
		Flavor:    FlavorInMemory,
		Namespace: "magnum-0123456789abcdef0123456789abcdef",
		Template: Template{UUID: "d7c6cbe4-3a63-447f-88de-1ab09044b177", Name: "k8s", ImageID: "ubuntu-2404-kube-v1.36.3",
			FlavorID: "m1.medium", ExternalNetworkID: "public"},
		Cluster: Cluster{UUID: "bd71db63-28f3-4ac5-8e6e-d51a6470e5ff", Name: "k8s-demo", ProjectID: "0123456789abcdef0123456789abcdef",
			Labels: map[string]string{}},
		NodeGroups: []NodeGroup{
			{UUID: "11111111-1111-1111-1111-111111111111", Name: "default-master", Role: "master", NodeCount: 1, IsDefault: true},
			{UUID: "22222222-2222-2222-2222-222222222222", Name: "default-worker", Role: "worker", NodeCount: 2, IsDefault: true},
		},
		DefaultKubernetesVersion: "v1.36.3",
	}
}

func goldenYAML(t *testing.T, r *Rendered) string {
	t.Helper()
	var b strings.Builder
	for _, o := range append(append([]*unstructured.Unstructured{}, r.ClassObjects...), r.Cluster) {
		y, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden.yaml")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file missing: run go test ./internal/templates -update")
	require.Equal(t, string(want), got)
}

func TestRenderGolden(t *testing.T) {
	cases := map[string]func(*Input){
		"inmemory-default": func(*Input) {},
		"inmemory-kube-tag-no-healing": func(in *Input) {
			in.Cluster.Labels = map[string]string{"kube_tag": "v1.35.4", "auto_healing_enabled": "false"}
		},
		"inmemory-autoscaling-extra-group": func(in *Input) {
			in.Cluster.Labels = map[string]string{"auto_scaling_enabled": "true"}
			max := 5
			in.NodeGroups = append(in.NodeGroups, NodeGroup{UUID: "33333333-3333-3333-3333-333333333333", Name: "GPU Workers",
				Role: "worker", NodeCount: 1, MinNodeCount: 1, MaxNodeCount: &max})
		},
		"inmemory-three-masters": func(in *Input) { in.NodeGroups[0].NodeCount = 3 },
		"inmemory-node-labels-taints": func(in *Input) {
			in.NodeGroups = append(in.NodeGroups, gpuGroup())
		},
		"inmemory-upgrade-one-group": func(in *Input) {
			in.NodeGroups = append(in.NodeGroups, gpuGroup())
			in.Upgrade = &Upgrade{MaxBatchSize: 3, NodeGroup: gpuGroup().UUID}
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			in := baseInput()
			mutate(&in)
			r, err := Render(in)
			require.NoError(t, err)
			checkGolden(t, name, goldenYAML(t, r))
		})
	}
}

func TestRenderIsDeterministicAndClassIsContentAddressed(t *testing.T) {
	a, err := Render(baseInput())
	require.NoError(t, err)
	b, err := Render(baseInput())
	require.NoError(t, err)
	require.Equal(t, goldenYAML(t, a), goldenYAML(t, b))

	// Another cluster of the same template shares the class; a different class-relevant label does not.
	other := baseInput()
	other.Cluster.UUID, other.Cluster.Name = "aaaaaaaa-0000-0000-0000-000000000000", "other"
	c, err := Render(other)
	require.NoError(t, err)
	require.Equal(t, a.ClassName, c.ClassName)
	require.NotEqual(t, a.Cluster.GetName(), c.Cluster.GetName())

	noHeal := baseInput()
	noHeal.Cluster.Labels = map[string]string{"auto_healing_enabled": "false"}
	d, err := Render(noHeal)
	require.NoError(t, err)
	require.NotEqual(t, a.ClassName, d.ClassName)
	for _, o := range d.ClassObjects {
		require.True(t, strings.HasPrefix(o.GetName(), d.ClassName), o.GetName())
	}
}

func TestRenderTopology(t *testing.T) {
	in := baseInput()
	in.NodeGroups[0].NodeCount = 3
	in.NodeGroups[1].NodeCount = 4
	r, err := Render(in)
	require.NoError(t, err)
	cp, _, _ := unstructured.NestedInt64(r.Cluster.Object, "spec", "topology", "controlPlane", "replicas")
	require.EqualValues(t, 3, cp)
	mds, _, _ := unstructured.NestedSlice(r.Cluster.Object, "spec", "topology", "workers", "machineDeployments")
	require.Len(t, mds, 1)
	md := mds[0].(map[string]any)
	require.EqualValues(t, 4, md["replicas"])
	require.Equal(t, "default-worker", md["name"])
	require.Equal(t, "v1.36.3", r.Version)
	require.Equal(t, "k8s-demo-bd71db63", r.Cluster.GetName())
	require.Equal(t, in.Namespace, r.Cluster.GetNamespace())
	require.Equal(t, in.Cluster.UUID, r.Cluster.GetLabels()[LabelClusterUUID])
}

func TestInvalidLabelsAreNamed(t *testing.T) {
	cases := []struct{ label, value string }{
		{"kube_tag", "latest"},
		{"auto_healing_enabled", "maybe"},
		{"min_node_count", "-1"},
		{"inmemory_machine_startup", "forever"},
	}
	for _, c := range cases {
		in := baseInput()
		in.Cluster.Labels = map[string]string{c.label: c.value}
		_, err := Render(in)
		var le *LabelError
		require.True(t, errors.As(err, &le), "%s=%s: %v", c.label, c.value, err)
		require.Equal(t, c.label, le.Label)
		require.Contains(t, err.Error(), c.label)
	}
	in := baseInput()
	in.Cluster.Labels = map[string]string{"min_node_count": "5", "max_node_count": "2"}
	_, err := Render(in)
	require.ErrorContains(t, err, "max_node_count")
}

func TestUnimplementedLabelsAreReported(t *testing.T) {
	in := baseInput()
	in.Cluster.Labels = map[string]string{"kube_tag": "v1.36.3", "etcd_tag": "v3.5.9", "boot_volume_size": "20"}
	r, err := Render(in)
	require.NoError(t, err)
	require.Equal(t, []string{"boot_volume_size", "etcd_tag"}, r.Unimplemented)
}

func TestKubernetesVersionResolution(t *testing.T) {
	v, err := KubernetesVersion(map[string]string{"kube_tag": "1.35.4"}, "x", "v1.36.3")
	require.NoError(t, err)
	require.Equal(t, "v1.35.4", v)
	v, err = KubernetesVersion(nil, "ubuntu-2404-kube-v1.35.4", "v1.36.3")
	require.NoError(t, err)
	require.Equal(t, "v1.35.4", v)
	v, err = KubernetesVersion(nil, "plain-image", "v1.36.3")
	require.NoError(t, err)
	require.Equal(t, "v1.36.3", v)
}

func TestNames(t *testing.T) {
	require.Equal(t, "my-cluster-bd71db63", ClusterName("My Cluster!", "bd71db63-28f3-4ac5-8e6e-d51a6470e5ff"))
	require.Equal(t, "c42-bd71db63", ClusterName("42", "bd71db63-28f3-4ac5-8e6e-d51a6470e5ff"))
	require.Equal(t, "c-bd71db63", ClusterName("", "bd71db63-28f3-4ac5-8e6e-d51a6470e5ff"))
	require.Equal(t, "magnum-abc", NamespaceFor("magnum-", "ABC"))
	require.Equal(t, "gpu-workers", MachineDeploymentName(NodeGroup{Name: "GPU Workers"}))
	_, err := ParseFlavor("docker")
	require.Error(t, err)
}
