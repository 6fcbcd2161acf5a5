package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/chart"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// nonDefaultValues change what an operator typically changes; the ServiceMonitor stays off because
// the management cluster has no Prometheus operator CRDs (internal/chart's tests render it).
func nonDefaultValues() map[string]any {
	return map[string]any{
		"replicaCount":   3,
		"leaderElection": map[string]any{"enabled": false},
		"image":          map[string]any{"repository": "registry.example/magnum-capi-bridge", "digest": "sha256:" + strings.Repeat("ab", 32)},
		"config": map[string]any{"existingSecret": "magnum-conf", "bridge": map[string]any{
			"namespace_prefix": "m23-", "default_infrastructure": "inmemory", "log_level": "debug",
			"namespace_quota": "count/clusters.cluster.x-k8s.io=5, secrets=100, pods=0"}},
		"metrics":             map[string]any{"port": 9191, "service": map[string]any{"type": "NodePort"}},
		"resources":           map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "256Mi"}, "limits": map[string]any{"cpu": "1", "memory": "1Gi"}},
		"podDisruptionBudget": map[string]any{"maxUnavailable": 2},
		"podAnnotations":      map[string]any{"example.org/team": "cloud"},
		"nodeSelector":        map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":         []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}},
	}
}

// The chart, rendered with the Helm SDK for the default and for non-default values, is accepted by
// the management cluster's API server (schema, admission, CEL of the policies) in a server-side dry run.
func TestChartServerSideDryRun(t *testing.T) {
	admin := requireStack(t)
	for name, values := range map[string]map[string]any{
		"default":     {"config": map[string]any{"magnumConf": "[DEFAULT]\ntransport_url = rabbit://u:p@rabbit:5672/\n"}},
		"non-default": nonDefaultValues(),
		// The tenant API's Service and ValidatingWebhookConfiguration (and the CRD's resource in RBAC).
		"tenant-api": {"config": map[string]any{"magnumConf": "[DEFAULT]\ntransport_url = rabbit://u:p@rabbit:5672/\n"},
			"tenantAPI": map[string]any{"enabled": true, "webhook": map[string]any{"tlsSecret": "magnum-capi-bridge-webhook-tls", "caBundle": "Y2E="}}},
	} {
		t.Run(name, func(t *testing.T) {
			rendered, err := chart.Render(chart.Name, chart.Name, values)
			require.NoError(t, err)
			objs, err := chart.Objects(rendered)
			require.NoError(t, err)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
			}
			require.Equal(t, 1, kinds["Deployment"])
			require.Equal(t, 8, kinds["ValidatingAdmissionPolicy"])
			require.Equal(t, 1, kinds["PriorityClass"])
			// The same field manager as deploy/local/bridge-rbac.sh, which applied deploy/kubernetes.
			out, err := kubectl(t, admin, chart.Manifest(rendered), "apply", "--server-side", "--dry-run=server",
				"--field-manager=magnum-capi-bridge-deploy", "--force-conflicts", "-f", "-")
			require.NoError(t, err, out)
			require.Equal(t, len(objs), strings.Count(out, "(server dry run)"), out)
		})
	}
}

// The bridge, run out of the cluster as the chart's ServiceAccount with the configuration the chart
// renders (plus what only differs outside a pod: the kubeconfig, the Lease's namespace, a free metrics
// port and a private RPC topic, so that the shared local bridge does not take its messages), takes a
// cluster from create to CREATE_COMPLETE and deletes it. Leader election is on, as the chart sets it.
func TestChartConfiguredBridgeCreatesACluster(t *testing.T) {
	admin := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	magnumText, err := os.ReadFile(magnumConf)
	require.NoError(t, err)
	f, err := config.Load(magnumConf)
	require.NoError(t, err)

	id := testutil.RandomHex(3)
	prefix := "mcbc" + id + "-"
	rendered, err := chart.Render(chart.Name, chart.Name, map[string]any{"config": map[string]any{
		"magnumConf": string(magnumText),
		"bridge":     map[string]any{"namespace_prefix": prefix, "default_infrastructure": "inmemory", "cluster_credentials": "false"},
	}})
	require.NoError(t, err)
	// The chart's ServiceAccount, RBAC, admission policies and PriorityClass, installed as `helm install`
	// would (with the field manager of deploy/local/bridge-rbac.sh, which applies the same objects).
	out, err := kubectl(t, admin, chart.Template(rendered, "rbac.yaml")+"\n---\n"+chart.Template(rendered, "admission-policy.yaml")+
		"\n---\n"+chart.Template(rendered, "priority-class.yaml"),
		"apply", "--server-side", "--field-manager=magnum-capi-bridge-deploy", "--force-conflicts", "-f", "-")
	require.NoError(t, err, out)
	objs, err := chart.Objects(rendered)
	require.NoError(t, err)
	var secret, deployment *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Secret":
			secret = o
		case "Deployment":
			deployment = o
		}
	}
	require.NotNil(t, secret)
	data, _, _ := unstructured.NestedStringMap(secret.Object, "stringData")
	sa, _, _ := unstructured.NestedString(deployment.Object, "spec", "template", "spec", "serviceAccountName")
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	var args []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	require.Equal(t, []string{"--config-file=/etc/magnum/magnum.conf", "--config-file=/etc/magnum-capi-bridge/bridge.conf"}, args)

	// The chart's files, in the order of the chart's args, then the out-of-cluster overrides.
	dir := t.TempDir()
	files := map[string]string{"magnum.conf": data["magnum.conf"], "bridge.conf": data["bridge.conf"]}
	var argv []string
	for _, name := range []string{"magnum.conf", "bridge.conf"} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(files[name]), 0o600))
		argv = append(argv, p)
	}
	topic := "magnum-conductor-chart-" + id
	host := "chart-test-" + id
	metrics := testutil.FreeAddr(t)
	// A database of its own: the stack's bridge owns the stack's (one deployment per database).
	dbURL := dbtest.NewMySQL(t)
	override := fmt.Sprintf("[DEFAULT]\nhost = %s\n[conductor]\ntopic = %s\n[database]\nconnection = %s\n"+
		"[bridge]\nkubeconfig = %s\nleader_election_namespace = %s\nmetrics_bind = %s\n",
		host, topic, dbURL, saKubeconfig(t, admin, chart.Name, sa), chart.Name, metrics)
	argv = append(argv, writeFile(t, "out-of-cluster.conf", override))

	st, err := db.Open(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	bridge := startBridge(t, "the chart's bridge", argv...)
	t.Cleanup(func() {
		_, _ = kubectl(t, admin, "", "-n", chart.Name, "delete", "lease", "--ignore-not-found", "magnum-capi-bridge-"+strings.TrimSuffix(prefix, "-"))
	})
	waitLog(t, bridge.log, bridge.exited, "serving", 60*time.Second)

	// magnum-api's side: a template of the demo tenant, then cluster_create as magnum-api casts it.
	tok, err := testutil.IssueToken("devstack")
	require.NoError(t, err)
	tmplID := insertTemplate(t, st, "chart-"+id, tok.ProjectID, tok.UserID)
	client := topicClient(t, f, topic)
	rctx := &rpc.Context{User: tok.UserID, UserID: tok.UserID, ProjectID: tok.ProjectID, Project: tok.ProjectID,
		Roles: []string{"member", "reader"}, RequestID: "req-" + uuid.NewString(), UserName: "demo", ProjectName: "demo",
		AuthToken: tok.ID, AuthURL: f.String("keystone_authtoken", "www_authenticate_uri", "")}
	start := time.Now()
	clusterID := castCreate(t, ctx, client, rctx, tmplID, "chart-"+id)
	t.Cleanup(func() {
		_, _ = kubectl(t, admin, "", "delete", "namespace", "--wait=false", "--ignore-not-found", prefix+tok.ProjectID)
	})
	status := waitStatus(t, ctx, st, clusterID, bridge.exited, 6*time.Minute, magnum.ClusterStatus("CREATE_COMPLETE"))
	t.Logf("cluster_create → %s in %s", status, time.Since(start).Round(time.Second))
	ns, err := kubectl(t, admin, "", "get", "clusters.cluster.x-k8s.io", "-n", prefix+tok.ProjectID, "-o", "name")
	require.NoError(t, err, ns)
	require.NotEmpty(t, strings.TrimSpace(ns), "the Cluster is in the chart bridge's project namespace")

	require.NoError(t, client.Cast(ctx, "cluster_delete", map[string]any{"uuid": clusterID}, rctx))
	waitRowGone(t, ctx, st, clusterID, 3*time.Minute)
	t.Logf("cluster_create → CREATE_COMPLETE → deleted in %s", time.Since(start).Round(time.Second))
}

func waitLog(t *testing.T, path string, exited <-chan error, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("the bridge exited (%v):\n%s", err, b)
		case <-time.After(500 * time.Millisecond):
		}
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("no %q in the bridge's log after %s:\n%s", want, timeout, b)
}

func waitStatus(t *testing.T, ctx context.Context, st *db.Store, id string, exited <-chan error, timeout time.Duration, want magnum.ClusterStatus) magnum.ClusterStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last magnum.ClusterStatus
	for time.Now().Before(deadline) {
		row, err := st.GetCluster(ctx, id)
		if err == nil {
			last = row.Status
			if last == want {
				return last
			}
			require.False(t, strings.HasSuffix(string(last), "_FAILED"), "cluster %s: %s", id, last)
		}
		select {
		case err := <-exited:
			t.Fatalf("the bridge exited: %v", err)
		case <-time.After(2 * time.Second):
		}
	}
	t.Fatalf("cluster %s still %q after %s", id, last, timeout)
	return last
}
