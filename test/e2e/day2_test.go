package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

type nodeGroupShow struct {
	UUID         string `json:"uuid"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	StatusReason string `json:"status_reason"`
	NodeCount    int    `json:"node_count"`
	MaxNodeCount *int   `json:"max_node_count"`
	Role         string `json:"role"`
	// NodeLabels and NodeTaints are shown by magnum-api 23 (microversion 1.14) only.
	NodeLabels map[string]string   `json:"node_labels"`
	NodeTaints []map[string]string `json:"node_taints"`
}

func showNodeGroup(t *testing.T, cluster, name string) (*nodeGroupShow, error) {
	return showNodeGroupIn(t, cloudDemo, cluster, name)
}

// showNodeGroupIn is the node group as magnum-api shows it to the cloud's user (REST, poll_test.go).
func showNodeGroupIn(t *testing.T, cloud, cluster, name string) (*nodeGroupShow, error) {
	t.Helper()
	var ng nodeGroupShow
	if err := magnumShow(cloud, "/clusters/"+cluster+"/nodegroups/"+name, &ng); err != nil {
		return nil, err
	}
	return &ng, nil
}

func waitNodeGroup(t *testing.T, cluster, name, want string) *nodeGroupShow {
	t.Helper()
	return waitNodeGroupIn(t, cloudDemo, cluster, name, want)
}

func waitNodeGroupIn(t *testing.T, cloud, cluster, name, want string) *nodeGroupShow {
	t.Helper()
	deadline := time.Now().Add(6 * time.Minute)
	for time.Now().Before(deadline) {
		awaitPolled(cloud, "/clusters/"+cluster+"/nodegroups/"+name, deadline, 3*time.Second, want)
		ng, err := showNodeGroupIn(t, cloud, cluster, name)
		require.NoError(t, err)
		if ng.Status == want {
			return ng
		}
		require.False(t, strings.HasSuffix(ng.Status, "_FAILED"), "%s: %s", ng.Status, ng.StatusReason)
		time.Sleep(3 * time.Second)
	}
	t.Fatalf("node group %s/%s never reached %s", cluster, name, want)
	return nil
}

// workloadKubeconfig writes the cluster's kubeconfig as a tenant gets it and returns its path.
func workloadKubeconfig(t *testing.T, cluster string) string {
	t.Helper()
	return workloadKubeconfigIn(t, cloudDemo, cluster)
}

func workloadKubeconfigIn(t *testing.T, cloud, cluster string) string {
	t.Helper()
	host, dir := cliFor(cloud).tempDir(t)
	mustOpenstack(t, cloud, "coe", "cluster", "config", cluster, "--dir", dir, "--force")
	return filepath.Join(host, "config")
}

func workloadNodes(t *testing.T, cluster string) []string {
	t.Helper()
	return workloadNodesIn(t, cloudDemo, cluster)
}

func workloadNodesIn(t *testing.T, cloud, cluster string) []string {
	t.Helper()
	kc := workloadKubeconfigIn(t, cloud, cluster)
	var out string
	var err error
	for range 10 { // the fake API server may briefly lag behind a change of machines
		out, err = kubectl(t, kc, "get", "nodes", "-o", "name")
		if err == nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	require.NoError(t, err, out)
	var names []string
	for _, f := range strings.Fields(out) {
		names = append(names, strings.TrimPrefix(f, "node/"))
	}
	return names
}

func timed(t *testing.T, what string, start time.Time) {
	t.Logf("TIMING %-40s %6.1fs", what, time.Since(start).Seconds())
}

// TestDayTwo drives update, resize with named nodes, node group create/update/delete and upgrades
// through the real CLI, as the status contract of Magnum and Terraform expects.
func TestDayTwo(t *testing.T) {
	requireStack(t)
	t.Parallel()
	oldTmpl := "day2-old-" + testutil.RandomHex(3)
	mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "create", oldTmpl, "--coe", "kubernetes",
		"--image", "ubuntu-2404-kube-v1.35.4", "--external-network", "public", "--flavor", "m1.small",
		"--master-flavor", "m1.medium", "--keypair", "default")
	t.Cleanup(func() { _, _ = openstack(t, cloudDemo, "coe", "cluster", "template", "delete", oldTmpl) })
	newTmpl := createTemplate(t, cloudDemo) // ubuntu-2404-kube-v1.36.3
	skipTmpl := "day2-skip-" + testutil.RandomHex(3)
	mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "create", skipTmpl, "--coe", "kubernetes",
		"--image", image, "--external-network", "public", "--flavor", "m1.small", "--keypair", "default",
		"--labels", "kube_tag=v1.38.0")
	t.Cleanup(func() { _, _ = openstack(t, cloudDemo, "coe", "cluster", "template", "delete", skipTmpl) })

	start := time.Now()
	id := createCluster(t, cloudDemo, oldTmpl, "day2-"+testutil.RandomHex(3), "--node-count", "1")
	c := waitStatus(t, cloudDemo, id, 6*time.Minute, "CREATE_COMPLETE")
	timed(t, "create (1 control plane, 1 worker)", start)
	require.Equal(t, "v1.35.4", c.COEVersion)

	// PATCH node_count (CLI `cluster update`, Terraform): UPDATE_COMPLETE with 3 workers.
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "cluster", "update", id, "replace", "node_count=3")
	c = waitStatus(t, cloudDemo, id, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "cluster update node_count=3", start)
	require.Equal(t, 3, c.NodeCount)
	require.Len(t, workloadNodes(t, id), 4)

	// Resize with named nodes: exactly those go.
	var victim string
	for _, n := range workloadNodes(t, id) {
		if strings.Contains(n, "default-worker") {
			victim = n
			break
		}
	}
	require.NotEmpty(t, victim)
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "cluster", "resize", id, "2", "--nodes-to-remove", victim)
	waitNodeCount(t, cloudDemo, id, 6*time.Minute, 2)
	waitNodeGroup(t, id, "default-worker", "UPDATE_COMPLETE")
	timed(t, "cluster resize 2 --nodes-to-remove", start)
	nodes := workloadNodes(t, id)
	require.Len(t, nodes, 3)
	require.NotContains(t, nodes, victim)

	// Node groups.
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "nodegroup", "create", id, "extra", "--node-count", "1")
	ng, err := showNodeGroup(t, id, "extra")
	require.NoError(t, err, "the row exists at once (Terraform aborts on a 404)")
	require.Equal(t, "CREATE_IN_PROGRESS", ng.Status)
	waitNodeGroup(t, id, "extra", "CREATE_COMPLETE")
	waitStatus(t, cloudDemo, id, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "nodegroup create (1 node)", start)
	require.Len(t, workloadNodes(t, id), 4)

	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "nodegroup", "update", id, "extra", "replace", "max_node_count=3")
	ng = waitNodeGroup(t, id, "extra", "UPDATE_COMPLETE")
	timed(t, "nodegroup update max_node_count=3", start)
	require.NotNil(t, ng.MaxNodeCount)
	require.Equal(t, 3, *ng.MaxNodeCount)

	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "nodegroup", "delete", id, "extra")
	deadline := time.Now().Add(4 * time.Minute)
	for {
		_, err := showNodeGroup(t, id, "extra")
		if err != nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "node group row still there")
		time.Sleep(3 * time.Second)
	}
	waitStatus(t, cloudDemo, id, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "nodegroup delete", start)
	require.Len(t, workloadNodes(t, id), 3)

	// An upgrade that skips a minor version is refused at once and changes nothing.
	_, err = openstack(t, cloudDemo, "coe", "cluster", "upgrade", id, skipTmpl)
	require.Error(t, err)
	require.Contains(t, err.Error(), "may not skip a Kubernetes minor version")
	c, err = showCluster(t, cloudDemo, id)
	require.NoError(t, err)
	require.Equal(t, "UPDATE_COMPLETE", c.Status)
	require.Equal(t, "v1.35.4", c.COEVersion)

	// A real upgrade rolls every machine to the new version.
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "cluster", "upgrade", id, newTmpl)
	c = waitStatus(t, cloudDemo, id, 10*time.Minute, "UPDATE_COMPLETE")
	timed(t, "cluster upgrade v1.35.4 → v1.36.3", start)
	require.Equal(t, "v1.36.3", c.COEVersion)
	out, err := kubectl(t, mgmtKubeconfig, "get", "machines.cluster.x-k8s.io", "-A", "-l",
		"cluster.x-k8s.io/cluster-name="+c.StackID, "-o", "jsonpath={.items[*].spec.version}")
	require.NoError(t, err, out)
	versions := strings.Fields(out)
	require.Len(t, versions, 3, out)
	for _, v := range versions {
		require.Equal(t, "v1.36.3", v)
	}
}
