package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// requireNewest fails unless the magnum-api 23.0.0 half of the stack is up: the forky chroot and its
// API (deploy/local/openstack/newest-up.sh) and the bridge instance consuming its RPC
// (deploy/local/bridge-up.sh newest). Like requireStack, it skips only without the `e2e` build tag.
func requireNewest(t *testing.T) {
	t.Helper()
	requireStack(t)
	if _, err := os.Stat(filepath.Join(newestRoot, ".mcb-bootstrap-complete")); err != nil {
		t.Fatalf("magnum-api 23 is not set up (no complete chroot at %s: %v); run `make up`", newestRoot, err)
	}
	if err := newestAnswers(); err != nil {
		t.Fatalf("magnum-api 23 is not up: %v; run `make up`", err)
	}
}

// newestAnswers is whether magnumclient 5 lists clusters through magnum-api 23, asked once per process.
var newestAnswers = sync.OnceValue(func() error {
	_, err := runCLI(cloudNewest, "coe", "cluster", "list")
	return err
})

// newestBridge is held shared by the tests whose operations go through the Magnum 23 bridge, and
// exclusively by those that restart it (TestOperationDeadlines with one-minute deadlines, the upgrade
// test with other releases). A file lock: `make test` runs the upgrade test in a process of its own
// next to the e2e package.
var newestBridge = fileLock(filepath.Join(testutil.Env("MCB_RUN_DIR", "/var/lib/magnum-capi-bridge/run"), "bridge-newest.lock"))

// shareNewestBridge holds the Magnum 23 bridge, with its normal configuration, until the test ends.
// Call it after t.Parallel: a test waiting here holds one of the parallel slots, not the serial phase.
func shareNewestBridge(t *testing.T) {
	t.Helper()
	t.Cleanup(newestBridge.hold(t, false))
}

// A fileLock is a readers-writer lock between processes and within one: flock(2) on a descriptor
// of its own per holder, so that two holders in one process exclude each other as two processes do.
type fileLock string

// hold blocks until the lock is held (exclusive or shared) and returns its release.
func (l fileLock) hold(t testing.TB, exclusive bool) func() {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(string(l)), 0o755))
	f, err := os.OpenFile(string(l), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	how, kind := syscall.LOCK_SH, "shared"
	if exclusive {
		how, kind = syscall.LOCK_EX, "exclusive"
	}
	asked := time.Now()
	require.NoError(t, syscall.Flock(int(f.Fd()), how))
	held := time.Now()
	// The wait and the hold, in the time table's TIMING lines: the Magnum 23 bridge is a queue.
	t.Logf("TIMING %s: %s lock waited %s", filepath.Base(string(l)), kind, held.Sub(asked).Round(time.Second))
	return func() {
		_ = f.Close()
		t.Logf("TIMING %s: %s lock held %s", filepath.Base(string(l)), kind, time.Since(held).Round(time.Second))
	}
}

// nodeShow is what the tests read of a workload cluster's Node.
type nodeShow struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Taints []struct {
			Key    string `json:"key"`
			Value  string `json:"value"`
			Effect string `json:"effect"`
		} `json:"taints"`
	} `json:"spec"`
}

// taintStrings renders taints as key=value:Effect (key:Effect without a value), magnumclient's syntax.
func (n nodeShow) taintStrings() []string {
	var out []string
	for _, tn := range n.Spec.Taints {
		if tn.Value == "" {
			out = append(out, tn.Key+":"+tn.Effect)
		} else {
			out = append(out, tn.Key+"="+tn.Value+":"+tn.Effect)
		}
	}
	return out
}

// nodeGroupNodes reads the workload cluster's Nodes of one node group (through its Machines in the
// management cluster, labelled with the group's uuid).
func nodeGroupNodes(t *testing.T, kubeconfig, ngUUID string) map[string]nodeShow {
	t.Helper()
	out, err := kubectl(t, mgmtKubeconfig, "get", "machines.cluster.x-k8s.io", "-A", "-l",
		"magnum.openstack.org/nodegroup-uuid="+ngUUID, "-o", "jsonpath={.items[*].status.nodeRef.name}")
	require.NoError(t, err, out)
	nodes := map[string]nodeShow{}
	for _, name := range strings.Fields(out) {
		js, err := kubectl(t, kubeconfig, "get", "node", name, "-o", "json")
		require.NoError(t, err, js)
		var n nodeShow
		require.NoError(t, json.Unmarshal([]byte(js), &n), js)
		nodes[name] = n
	}
	return nodes
}

// nodeGroupReachesNodes waits until every node of the group carries the labels and taints (the node
// group's node_labels/node_taints as magnumclient writes them); false with what the nodes show else.
func nodeGroupReachesNodes(t *testing.T, kubeconfig, ngUUID string, count int, labels map[string]string, taints []string) (bool, string) {
	t.Helper()
	var last string
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		nodes := nodeGroupNodes(t, kubeconfig, ngUUID)
		ok := len(nodes) == count
		var seen []string
		for name, n := range nodes {
			for k, v := range labels {
				ok = ok && n.Metadata.Labels[k] == v
			}
			got := n.taintStrings()
			for _, want := range taints {
				ok = ok && slices.Contains(got, want)
			}
			b, _ := json.Marshal(map[string]any{"labels": n.Metadata.Labels, "taints": got})
			seen = append(seen, name+": "+string(b))
		}
		last = strings.Join(seen, "\n")
		if ok {
			return true, last
		}
		time.Sleep(3 * time.Second)
	}
	return false, last
}

// TestNewestMagnumDayTwo drives the day-2 sequence through magnum-api 23.0.0 (Debian forky) with its
// own CLI (magnumclient 5): the second bridge instance builds and changes the cluster, including what
// only 23 has — node groups with node_labels/node_taints (microversion 1.14) and credential_rotate.
func TestNewestMagnumDayTwo(t *testing.T) {
	requireNewest(t)
	t.Parallel()
	shareNewestBridge(t)
	const cloud = cloudNewest

	// The second bridge heart-beats into magnum_new as its own conductor host.
	var services []struct {
		Host   string `json:"host"`
		Binary string `json:"binary"`
		State  string `json:"state"`
	}
	out := mustOpenstack(t, cloudNewestAdmin, "coe", "service", "list", "-f", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &services), out)
	require.Condition(t, func() bool {
		for _, s := range services {
			if s.Binary == "magnum-conductor" && s.State == "up" && strings.HasSuffix(s.Host, "-bridge-newest") {
				return true
			}
		}
		return false
	}, "no bridge-newest conductor up in magnum-api 23's service list: %s", out)

	start := time.Now()
	oldTmpl := createTemplateWithImage(t, cloud, "ubuntu-2404-kube-v1.35.4", "--labels", "kube_tag=v1.35.4") // the image must run its kube_tag
	newTmpl := createTemplate(t, cloud, "--labels", "kube_tag=v1.36.3")
	timed(t, "23: two template creates", start)

	start = time.Now()
	id := createCluster(t, cloud, oldTmpl, "new-"+testutil.RandomHex(3), "--node-count", "1")
	waitStatus(t, cloud, id, 6*time.Minute, "CREATE_COMPLETE")
	timed(t, "23: create (1 control plane, 1 worker)", start)
	c, err := cliShowCluster(t, cloud, id) // what magnumclient 5 shows
	require.NoError(t, err)
	require.Equal(t, "v1.35.4", c.COEVersion)
	require.NotEmpty(t, c.ClusterID, "microversion 1.13+ shows cluster_id")
	require.Empty(t, c.StackID, "microversion 1.13+ no longer shows stack_id")
	ns, err := kubectl(t, mgmtKubeconfig, "get", "clusters.cluster.x-k8s.io", "-A", "-l",
		"magnum.openstack.org/cluster-uuid="+id, "-o", "jsonpath={.items[*].metadata.namespace}")
	require.NoError(t, err, ns)
	require.Equal(t, "magnum23-"+c.ProjectID, ns, "built by the bridge instance of magnum-api 23 (its namespace prefix)")

	// cluster update node_count (magnumclient 5: --node-count).
	start = time.Now()
	mustOpenstack(t, cloud, "coe", "cluster", "update", id, "--node-count", "2")
	c = waitStatus(t, cloud, id, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "23: cluster update --node-count 2", start)
	require.Equal(t, 2, c.NodeCount)
	require.Len(t, workloadNodesIn(t, cloud, id), 3)

	// cluster resize with a named node: exactly that one goes.
	var victim string
	for _, n := range workloadNodesIn(t, cloud, id) {
		if strings.Contains(n, "default-worker") {
			victim = n
			break
		}
	}
	require.NotEmpty(t, victim)
	start = time.Now()
	mustOpenstack(t, cloud, "coe", "cluster", "resize", id, "1", "--nodes-to-remove", victim)
	waitNodeCount(t, cloud, id, 6*time.Minute, 1)
	waitNodeGroupIn(t, cloud, id, "default-worker", "UPDATE_COMPLETE")
	timed(t, "23: cluster resize 1 --nodes-to-remove", start)
	nodes := workloadNodesIn(t, cloud, id)
	require.Len(t, nodes, 2)
	require.NotContains(t, nodes, victim)

	// A node group with node labels and taints (microversion 1.14).
	labels := map[string]string{"tier": "batch", "example.com/team": "blue"}
	taints := []string{"dedicated=batch:NoSchedule", "spot:PreferNoSchedule"}
	start = time.Now()
	mustOpenstack(t, cloud, "coe", "nodegroup", "create", id, "batch", "--node-count", "1",
		"--node-labels", "tier=batch,example.com/team=blue", "--node-taints", strings.Join(taints, ","))
	ng, err := showNodeGroupIn(t, cloud, id, "batch")
	require.NoError(t, err, "the row exists at once (Terraform aborts on a 404)")
	require.Equal(t, "CREATE_IN_PROGRESS", ng.Status)
	ng = waitNodeGroupIn(t, cloud, id, "batch", "CREATE_COMPLETE")
	waitStatus(t, cloud, id, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "23: nodegroup create with labels and taints", start)
	require.Equal(t, labels, ng.NodeLabels)
	require.ElementsMatch(t, []map[string]string{
		{"key": "dedicated", "value": "batch", "effect": "NoSchedule"},
		{"key": "spot", "value": "", "effect": "PreferNoSchedule"},
	}, ng.NodeTaints)
	kc := workloadKubeconfigIn(t, cloud, id)
	// What the tenant asked for reaches the group's Nodes (and only through the bridge's rendering).
	// Not fatal, so the rest of the sequence still runs and reports.
	ok, seen := nodeGroupReachesNodes(t, kc, ng.UUID, 1, labels, taints)
	assert.True(t, ok, "the batch group's nodes lack its node_labels/node_taints; nodes:\n%s", seen)

	start = time.Now()
	mustOpenstack(t, cloud, "coe", "nodegroup", "update", id, "batch", "--max-nodes", "3",
		"--node-labels", "tier=online,example.com/team=blue")
	ng = waitNodeGroupIn(t, cloud, id, "batch", "UPDATE_COMPLETE")
	waitStatus(t, cloud, id, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "23: nodegroup update max 3, node labels", start)
	require.NotNil(t, ng.MaxNodeCount)
	require.Equal(t, 3, *ng.MaxNodeCount)
	require.Equal(t, map[string]string{"tier": "online", "example.com/team": "blue"}, ng.NodeLabels)
	ok, seen = nodeGroupReachesNodes(t, kc, ng.UUID, 1, map[string]string{"tier": "online"}, nil)
	assert.True(t, ok, "the batch group's nodes did not follow the node_labels update; nodes:\n%s", seen)

	start = time.Now()
	mustOpenstack(t, cloud, "coe", "nodegroup", "delete", id, "batch")
	deadline := time.Now().Add(4 * time.Minute)
	for {
		if _, err := showNodeGroupIn(t, cloud, id, "batch"); err != nil {
			require.Contains(t, err.Error(), "could not be found")
			break
		}
		require.True(t, time.Now().Before(deadline), "node group row still there")
		time.Sleep(3 * time.Second)
	}
	waitStatus(t, cloud, id, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "23: nodegroup delete", start)
	require.Len(t, workloadNodesIn(t, cloud, id), 2)

	// cluster upgrade (a call) to the template with the newer kube_tag rolls every machine.
	start = time.Now()
	mustOpenstack(t, cloud, "coe", "cluster", "upgrade", id, newTmpl)
	c = waitStatus(t, cloud, id, 10*time.Minute, "UPDATE_COMPLETE")
	timed(t, "23: cluster upgrade v1.35.4 → v1.36.3", start)
	require.Equal(t, "v1.36.3", c.COEVersion)
	out, err = kubectl(t, mgmtKubeconfig, "get", "machines.cluster.x-k8s.io", "-A", "-l",
		"cluster.x-k8s.io/cluster-name="+c.ClusterID, "-o", "jsonpath={.items[*].spec.version}")
	require.NoError(t, err, out)
	versions := strings.Fields(out)
	require.Len(t, versions, 2, out)
	for _, v := range versions {
		require.Equal(t, "v1.36.3", v)
	}

	// credential_rotate (new in 23, a call): accepted, and the cluster stays as it was.
	start = time.Now()
	out = mustOpenstack(t, cloud, "coe", "credential", "rotate", id)
	timed(t, "23: credential rotate", start)
	require.Contains(t, out, "accepted")
	c, err = showCluster(t, cloud, id)
	require.NoError(t, err)
	require.Equal(t, "UPDATE_COMPLETE", c.Status)
	require.Equal(t, "HEALTHY", c.HealthStatus)

	start = time.Now()
	require.NotEmpty(t, capiObjects(t, id))
	mustOpenstack(t, cloud, "coe", "cluster", "delete", id)
	waitGone(t, cloud, id, 4*time.Minute)
	timed(t, "23: cluster delete", start)
	require.Empty(t, capiObjects(t, id), "management cluster still holds objects of the deleted cluster")
}
