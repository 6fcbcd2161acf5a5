package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestAHeatClusterIsLeftAlone: a Magnum database the bridge takes over still holds the clusters
// Magnum's Heat driver built. A Heat-shaped row (its stack_id a Heat stack's id) gets, through the
// real magnum-api and CLI, NotSupported naming Heat for every call (ca show, cluster config,
// upgrade); the casts (resize, delete) change nothing — its status, node count and node groups stay
// as they were — and the bridge logs why. Nothing of it appears in the management cluster.
func TestAHeatClusterIsLeftAlone(t *testing.T) {
	requireStack(t)
	t.Parallel()
	conf, err := config.Load(testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf"))
	require.NoError(t, err)
	store, err := db.Open(context.Background(), conf.String("database", "connection", ""))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	tmpl := createTemplate(t, cloudDemo)
	tmplUUID := strings.TrimSpace(mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "show", tmpl, "-f", "value", "-c", "uuid"))
	logPath := filepath.Join(logDir, "bridge.log")
	logFrom := fileSize(t, logPath)
	const heatStack = "7d3e0f52-5b1c-4c55-9a0e-2f6b8d1c4a90"
	id := insertClusterRows(t, store, demoToken(t), tmplUUID, "heat-"+testutil.RandomHex(3), heatStack)

	for _, args := range [][]string{
		{"coe", "ca", "show", id},
		{"coe", "cluster", "config", id, "--dir", t.TempDir()},
		{"coe", "cluster", "upgrade", id, createTemplate(t, cloudDemo)},
	} {
		out, err := openstack(t, cloudDemo, args...)
		require.Error(t, err, "%v: %s", args, out)
		require.Contains(t, err.Error(), "was built by the Heat driver", args)
	}
	// Casts: magnum-api answers 202 and the bridge refuses them; nothing is written.
	mustOpenstack(t, cloudDemo, "coe", "cluster", "resize", id, "3")
	mustOpenstack(t, cloudDemo, "coe", "cluster", "delete", id)
	refusedDelete := func() bool {
		for _, line := range strings.Split(readFrom(t, logPath, logFrom), "\n") {
			if strings.Contains(line, "request.method=cluster_delete") && strings.Contains(line, "Cluster "+id+" was built by the Heat driver") {
				return true
			}
		}
		return false
	}
	require.Eventually(t, refusedDelete, time.Minute, time.Second, "the bridge logs the refused delete of %s", id)
	require.Contains(t, readFrom(t, logPath, logFrom), "a cluster another driver built is left alone")
	c, err := showCluster(t, cloudDemo, id)
	require.NoError(t, err)
	require.Equal(t, "CREATE_COMPLETE", c.Status)
	require.Equal(t, 1, c.NodeCount)
	for _, name := range []string{"default-master", "default-worker"} {
		ng, err := showNodeGroupIn(t, cloudDemo, id, name)
		require.NoError(t, err)
		require.Equal(t, "CREATE_COMPLETE", ng.Status, name)
	}
	require.Empty(t, strings.TrimSpace(capiObjects(t, id)), "nothing of the Heat cluster in the management cluster")
}
