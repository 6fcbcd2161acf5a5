package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestOperationDeadlines: an update whose CAPI never converges ends UPDATE_FAILED after
// update_timeout with a reason naming CAPI's condition; the reason survives later CAPI events and a
// restart of the bridge; the same for a delete (DELETE_FAILED after delete_timeout), which still
// finishes once CAPI deletes the cluster. CAPI is made to never converge the real way: the
// Cluster is paused (spec.paused), as an operator or a stuck controller would leave it.
//
// It restarts the Magnum 23 bridge with one-minute deadlines, holding it alone (newestBridge) from
// the update until the delete has failed: the other tests that use that bridge wait meanwhile, the
// rest run on. The cluster is built before, and its delete finished after, next to them.
func TestOperationDeadlines(t *testing.T) {
	requireNewest(t)
	t.Parallel()
	const cloud, instance, nsPrefix = cloudNewest, "newest", "magnum23-"
	bridgeUp := func(extra string) {
		cmd := exec.Command(filepath.Join(repoRoot(t), "deploy/local/bridge-up.sh"), instance)
		cmd.Env = append(os.Environ(), "BRIDGE_EXTRA_CONFIG="+extra)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	shared := newestBridge.hold(t, false)
	t.Cleanup(shared) // a second release of a hold does nothing
	tmpl := createTemplate(t, cloud)
	id := createCluster(t, cloud, tmpl, "deadline-"+testutil.RandomHex(3), "--node-count", "1")
	waitStatus(t, cloud, id, 8*time.Minute, "CREATE_COMPLETE")
	shared()

	exclusive := newestBridge.hold(t, true)
	t.Cleanup(exclusive) // registered before the restore: cleanups run last first
	short := "update_timeout = 1\ndelete_timeout = 1"
	bridgeUp(short)
	restored := false
	restore := func() {
		if !restored {
			restored = true
			bridgeUp("")
			exclusive()
		}
	}
	t.Cleanup(restore)
	// The CAPI Cluster is found by the bridge's label: Magnum 23's CLI does not show stack_id.
	out, err := kubectl(t, mgmtKubeconfig, "get", "clusters.cluster.x-k8s.io", "-A",
		"-l", "magnum.openstack.org/cluster-uuid="+id, "-o", "jsonpath={range .items[*]}{.metadata.namespace} {.metadata.name}{\"\\n\"}{end}")
	require.NoError(t, err, out)
	found := strings.Fields(out)
	require.Len(t, found, 2, "want exactly one CAPI Cluster labelled with %s: %q", id, out)
	ns, capiName := found[0], found[1]
	require.True(t, strings.HasPrefix(ns, nsPrefix), "the CAPI Cluster of %s is in %s, not a %s namespace", id, ns, nsPrefix)
	pause := func(paused bool) {
		v := "true"
		if !paused {
			v = "false"
		}
		out, err := kubectl(t, mgmtKubeconfig, "patch", "clusters.cluster.x-k8s.io", "-n", ns, capiName,
			"--type=merge", "-p", `{"spec":{"paused":`+v+`}}`)
		require.NoError(t, err, out)
	}

	// An update CAPI never carries out.
	pause(true)
	start := time.Now()
	if cloud == cloudNewest {
		mustOpenstack(t, cloud, "coe", "cluster", "update", id, "--node-count", "2") // magnumclient 5's syntax
	} else {
		mustOpenstack(t, cloud, "coe", "cluster", "update", id, "replace", "node_count=2")
	}
	c := waitUntil(t, cloud, id, 4*time.Minute, "UPDATE_FAILED")
	timed(t, "update never converging → UPDATE_FAILED", start)
	require.Contains(t, c.StatusReason, "update_timeout of 1m0s")
	require.Contains(t, c.StatusReason, "Paused")
	reason := c.StatusReason

	// CAPI events (unpausing makes the topology reconcile and machines change) and a restart of
	// the bridge do not clear it: the reason stays until the next operation.
	pause(false)
	bridgeUp(short + "\n# restart")
	time.Sleep(45 * time.Second)
	c, err = showCluster(t, cloud, id)
	require.NoError(t, err)
	require.Equal(t, "UPDATE_FAILED", c.Status)
	require.Equal(t, reason, c.StatusReason, "a *_FAILED reason lasts until the next operation")

	// A delete CAPI never finishes, then does.
	pause(true)
	start = time.Now()
	mustOpenstack(t, cloud, "coe", "cluster", "delete", id)
	c = waitUntil(t, cloud, id, 4*time.Minute, "DELETE_FAILED")
	timed(t, "delete never finishing → DELETE_FAILED", start)
	require.Contains(t, c.StatusReason, "delete_timeout of 1m0s")
	// The bridge with its own deadlines again, shared: it finishes the failed delete as any would.
	restore()
	shareNewestBridge(t)
	pause(false)
	waitGone(t, cloud, id, 5*time.Minute)
	timed(t, "DELETE_FAILED → gone once CAPI deleted the cluster", start)
}

// waitUntil polls the CLI until the cluster has status want (failing on any other final status).
func waitUntil(t *testing.T, cloud, id string, timeout time.Duration, want string) *clusterShow {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *clusterShow
	for time.Now().Before(deadline) {
		c, err := showCluster(t, cloud, id)
		require.NoError(t, err)
		last = c
		if c.Status == want {
			return c
		}
		if strings.HasSuffix(c.Status, "_COMPLETE") && strings.HasPrefix(want, strings.SplitN(c.Status, "_", 2)[0]) {
			t.Fatalf("cluster %s: %s, want %s", id, c.Status, want)
		}
		time.Sleep(3 * time.Second)
	}
	t.Fatalf("cluster %s did not reach %s within %s; last %+v", id, want, timeout, last)
	return nil
}
