package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAutoscalerResizeShowsInMagnum: with autoscaling on, the MachineDeployment's replicas belong to
// the cluster autoscaler; when they change outside Magnum, the node group's node_count follows at once.
func TestAutoscalerResizeShowsInMagnum(t *testing.T) {
	requireStack(t)
	t.Parallel()
	tmpl := createTemplate(t, cloudDemo)
	id := createCluster(t, cloudDemo, tmpl, "auto-"+suffix(), "--node-count", "1",
		"--labels", "auto_scaling_enabled=true,min_node_count=1,max_node_count=3")
	c := waitStatus(t, cloudDemo, id, 6*time.Minute, "CREATE_COMPLETE")

	md, err := kubectl(t, mgmtKubeconfig, "get", "machinedeployments.cluster.x-k8s.io", "-A", "-l",
		"cluster.x-k8s.io/cluster-name="+c.StackID, "-o", "jsonpath={.items[0].metadata.namespace}/{.items[0].metadata.name}")
	require.NoError(t, err, md)
	ns, name, _ := strings.Cut(md, "/")
	// What the autoscaler does: scale the MachineDeployment itself.
	start := time.Now()
	out, err := kubectl(t, mgmtKubeconfig, "-n", ns, "scale", "machinedeployment.cluster.x-k8s.io/"+name, "--replicas=2")
	require.NoError(t, err, out)
	for {
		ng, err := showNodeGroup(t, id, "default-worker")
		require.NoError(t, err)
		if ng.NodeCount == 2 {
			break
		}
		require.Less(t, time.Since(start), 30*time.Second, "node_count still "+strconv.Itoa(ng.NodeCount))
		time.Sleep(200 * time.Millisecond)
	}
	// The CLI's own start-up (~1-3 s here) dominates this figure; the bridge's write follows the watch event.
	timed(t, "MachineDeployment scaled → node_count in Magnum", start)
}
