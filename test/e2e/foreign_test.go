package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/adoption"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
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
	store := magnumStore(t, conf)
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

// TestAdoptionPlanIsADryRun: `magnum-capi-bridge adoption plan` against the running bridge lists,
// for every cluster of the database, what the bridge would do with it and why: a Heat-shaped row is
// left alone; a magnum-capi-helm-shaped row whose Helm release's Cluster (no ClusterClass, as that
// driver's chart makes it) is in the management cluster where that driver puts it would be adopted
// once the operator hands its namespace over (the plan says how; the bridge writes in no namespace
// of another's); the bridge's own clusters are its own. Nothing changes. The rows belong to a project
// of the test's own, whose namespace no bridge made.
func TestAdoptionPlanIsADryRun(t *testing.T) {
	requireStack(t)
	t.Parallel()
	magnumConf := testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf")
	conf, err := config.Load(magnumConf)
	require.NoError(t, err)
	store := magnumStore(t, conf)
	tmpl := createTemplate(t, cloudDemo)
	tmplUUID := strings.TrimSpace(mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "show", tmpl, "-f", "value", "-c", "uuid"))
	hex := testutil.RandomHex(3)
	owner := testutil.Token{ProjectID: strings.ReplaceAll(uuid.NewString(), "-", ""), UserID: strings.ReplaceAll(uuid.NewString(), "-", "")}
	heat := insertClusterRows(t, store, owner, tmplUUID, "heat-"+hex, "3c9d4f0e-6a2b-4d1e-8f3a-"+hex+"a1b2c3")
	helmRelease := "helm-" + hex + "-x2kq7mzpa4bt"
	helm := insertClusterRows(t, store, owner, tmplUUID, "helm-"+hex, helmRelease)
	// Where magnum-capi-helm (namespace_prefix "magnum", its default) puts the project's clusters, the
	// Cluster its chart makes: no ClusterClass (paused: the objects it names are not made here).
	ns := "magnum-" + owner.ProjectID
	out, err := kubectlStdin(t, mgmtKubeconfig, []byte(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "`+ns+`"}}`), "create", "-f", "-")
	require.NoError(t, err, out)
	t.Cleanup(func() { _, _ = kubectl(t, mgmtKubeconfig, "delete", "namespace", ns, "--wait=false") })
	out, err = kubectlStdin(t, mgmtKubeconfig, []byte(`{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": {"name": "`+helmRelease+`", "namespace": "`+ns+`", "labels": {"capi.stackhpc.com/managed-by": "Helm"}},
		"spec": {"paused": true, "controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443},
			"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "`+helmRelease+`-control-plane"},
			"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "OpenStackCluster", "name": "`+helmRelease+`"}}}`),
		"create", "-f", "-")
	require.NoError(t, err, out)
	t.Cleanup(func() {
		// Paused, Cluster API does not remove its finalizer: the test does.
		_, _ = kubectl(t, mgmtKubeconfig, "-n", ns, "delete", "clusters.cluster.x-k8s.io", helmRelease, "--ignore-not-found", "--wait=false")
		_, _ = kubectl(t, mgmtKubeconfig, "-n", ns, "patch", "clusters.cluster.x-k8s.io", helmRelease, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	})
	before := map[string]*db.Cluster{}
	for _, id := range []string{heat, helm} {
		before[id], err = store.GetCluster(context.Background(), id)
		require.NoError(t, err)
	}

	bin := filepath.Join(repoRoot(t), "bin/magnum-capi-bridge")
	args := []string{"--config-file", magnumConf, "--config-file", filepath.Join(testutil.Env("MCB_ETC_DIR", "/etc/magnum-capi-bridge"), "bridge.conf"), "adoption", "plan"}
	plan := func() map[string]adoption.Entry {
		var entries []adoption.Entry
		require.NoError(t, json.Unmarshal([]byte(commandOutput(t, repoRoot(t), bin, append(args, "--json")...)), &entries))
		byUUID := map[string]adoption.Entry{}
		for _, e := range entries {
			byUUID[e.UUID] = e
			if e.Driver == templates.DriverBridge {
				require.Equal(t, adoption.Own, e.Action, "%+v", e)
			}
		}
		return byUUID
	}
	byUUID := plan()
	require.Equal(t, adoption.Leave, byUUID[heat].Action, "%+v", byUUID[heat])
	require.Equal(t, templates.DriverHeat, byUUID[heat].Driver)
	// The namespace is magnum-capi-helm's, not the bridge's: the plan says how to hand it over.
	e := byUUID[helm]
	require.Equal(t, adoption.Refuse, e.Action, "%+v", e)
	require.Contains(t, e.Why, "`kubectl label namespace "+ns+" app.kubernetes.io/managed-by=magnum-capi-bridge magnum.openstack.org/project-id="+owner.ProjectID+"`")
	out, err = kubectl(t, mgmtKubeconfig, "label", "namespace", ns, "app.kubernetes.io/managed-by=magnum-capi-bridge", "magnum.openstack.org/project-id="+owner.ProjectID)
	require.NoError(t, err, out)
	e = plan()[helm]
	require.Equal(t, adoption.Adopt, e.Action, "%+v", e)
	require.Equal(t, templates.DriverCAPIHelm, e.Driver)
	require.Equal(t, &adoption.Found{Namespace: ns, Name: helmRelease, Cluster: true, BridgeNamespace: ns, NamespaceManaged: true}, e.Found)
	text := commandOutput(t, repoRoot(t), bin, args...)
	require.Contains(t, text, "(a dry run: nothing changed)")
	require.Regexp(t, `adopt\s+magnum-capi-helm\s+helm-`+hex+`\s+`+helm, text)
	t.Logf("the plan's first lines:\n%s", firstLines(text, 6))

	for id, was := range before {
		now, err := store.GetCluster(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, was.Status, now.Status, id)
		require.Equal(t, was.StatusReason, now.StatusReason, id)
		require.Equal(t, was.UpdatedAt, now.UpdatedAt, id)
	}
	out, err = kubectl(t, mgmtKubeconfig, "-n", ns, "get", "clusters.cluster.x-k8s.io", helmRelease, "-o", "jsonpath={.spec.topology}")
	require.NoError(t, err, out)
	require.Empty(t, out, "the peer's Cluster is left as it was")
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
