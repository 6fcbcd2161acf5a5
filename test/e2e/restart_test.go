package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestBridgeKilledDuringCreate: SIGKILL the bridge right after a create is accepted, start it again;
// the cluster still reaches CREATE_COMPLETE and the management cluster holds exactly one Cluster for it.
func TestBridgeKilledDuringCreate(t *testing.T) {
	requireStack(t)
	pidFile := testutil.Env("MCB_BRIDGE_PIDFILE", "/var/lib/magnum-capi-bridge/run/bridge.pid")
	tmpl := createTemplate(t, cloudDemo)
	id := createCluster(t, cloudDemo, tmpl, "kill-"+testutil.RandomHex(3))

	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	for i := 0; i < 50 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}

	up := exec.Command(filepath.Join(repoRoot(t), "deploy/local/bridge-up.sh"))
	out, err := up.CombinedOutput()
	require.NoError(t, err, string(out))

	waitStatus(t, cloudDemo, id, 6*time.Minute, "CREATE_COMPLETE")
	clusters, err := kubectl(t, mgmtKubeconfig, "get", "clusters.cluster.x-k8s.io", "-A", "-l",
		"magnum.openstack.org/cluster-uuid="+id, "-o", "name")
	require.NoError(t, err, clusters)
	require.Len(t, strings.Fields(clusters), 1, clusters)

	mustOpenstack(t, cloudDemo, "coe", "cluster", "delete", id)
	waitGone(t, cloudDemo, id, 4*time.Minute)
}

func repoRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.mod above the test")
		dir = parent
	}
}

type service struct {
	Host   string `json:"host"`
	Binary string `json:"binary"`
	State  string `json:"state"`
}

func serviceState(t *testing.T, host string) string {
	t.Helper()
	out := mustOpenstack(t, cloudAdmin, "coe", "service", "list", "-f", "json")
	var list []service
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	for _, s := range list {
		if s.Host == host && s.Binary == "magnum-conductor" {
			return s.State
		}
	}
	t.Fatalf("no magnum-conductor service for host %q in %s", host, out)
	return ""
}

// TestServiceListFollowsTheBridge: `coe service list` shows the bridge up while it runs and down once
// it has stopped for the API's service_down_time (30 s on the local stack), then up again.
func TestServiceListFollowsTheBridge(t *testing.T) {
	requireStack(t)
	host, err := os.Hostname()
	require.NoError(t, err)
	host += "-bridge" // deploy/local/bridge-up.sh sets [DEFAULT] host so
	require.Equal(t, "up", serviceState(t, host))

	pidFile := testutil.Env("MCB_BRIDGE_PIDFILE", "/var/lib/magnum-capi-bridge/run/bridge.pid")
	raw, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGTERM))
	t.Cleanup(func() {
		out, err := exec.Command(filepath.Join(repoRoot(t), "deploy/local/bridge-up.sh")).CombinedOutput()
		require.NoError(t, err, string(out))
	})
	deadline := time.Now().Add(90 * time.Second)
	for serviceState(t, host) != "down" {
		require.True(t, time.Now().Before(deadline), "service still up 90 s after the bridge stopped")
		time.Sleep(5 * time.Second)
	}
	out, err := exec.Command(filepath.Join(repoRoot(t), "deploy/local/bridge-up.sh")).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Equal(t, "up", serviceState(t, host))
}
