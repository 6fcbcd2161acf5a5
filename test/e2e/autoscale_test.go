package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestAutoscalerResizeShowsInMagnum: with autoscaling on, the MachineDeployment's replicas belong to
// the cluster autoscaler; when they change outside Magnum, the node group's node_count follows at once.
func TestAutoscalerResizeShowsInMagnum(t *testing.T) {
	requireStack(t)
	t.Parallel()
	tmpl := createTemplate(t, cloudDemo)
	id := createCluster(t, cloudDemo, tmpl, "auto-"+testutil.RandomHex(3), "--node-count", "1",
		"--labels", "auto_scaling_enabled=true,min_node_count=1,max_node_count=3")
	c := waitStatus(t, cloudDemo, id, 6*time.Minute, "CREATE_COMPLETE")

	md, err := kubectl(t, mgmtKubeconfig, "get", "machinedeployments.cluster.x-k8s.io", "-A", "-l",
		"cluster.x-k8s.io/cluster-name="+c.StackID, "-o", "jsonpath={.items[0].metadata.namespace}/{.items[0].metadata.name}")
	require.NoError(t, err, md)
	ns, name, _ := strings.Cut(md, "/")
	conf, err := config.Load(testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf"))
	require.NoError(t, err)
	store := magnumStore(t, conf)
	workerCount := func() int64 {
		groups, err := store.ListNodeGroups(context.Background(), id)
		require.NoError(t, err)
		for _, g := range groups {
			if g.Name == "default-worker" && g.NodeCount != nil {
				return *g.NodeCount
			}
		}
		t.Fatalf("cluster %s has no default-worker row", id)
		return -1
	}
	require.EqualValues(t, 1, workerCount())

	// What the autoscaler does: scale the MachineDeployment itself.
	start := time.Now()
	out, err := kubectl(t, mgmtKubeconfig, "-n", ns, "scale", "machinedeployment.cluster.x-k8s.io/"+name, "--replicas=2")
	require.NoError(t, err, out)
	scaled := time.Now()
	// Magnum's row, read the way magnum-api reads it, every 20 ms.
	for workerCount() != 2 {
		require.Less(t, time.Since(scaled), 30*time.Second, "node_count still not 2 in Magnum's database")
		time.Sleep(20 * time.Millisecond)
	}
	inDB := time.Since(scaled)
	t.Logf("TIMING MachineDeployment scaled (kubectl returned) → node_count in Magnum's DB: %s (polled every 20 ms)", inDB.Round(time.Millisecond))
	// The issue asks for "within a second"; the bound leaves room for a CI machine running many
	// tests at once, the figure above is what the note reports.
	require.Less(t, inDB, 3*time.Second)

	ng, err := showNodeGroup(t, id, "default-worker")
	require.NoError(t, err)
	require.Equal(t, 2, ng.NodeCount, "the API shows what the database holds")
	timed(t, "MachineDeployment scaled → node_count shown by the CLI", start)
}
