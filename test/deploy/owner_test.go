package deploy

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// Two bridge deployments on one Magnum database (another namespace prefix, as during a migration),
// consuming the same conductor topic: the second drives nothing — it says why in its log, its
// readiness and --check-config — so every create is applied once, by the first, in its own
// namespaces. Once the first has stopped, the second takes the database over.
func TestOneOwnerPerDatabase(t *testing.T) {
	admin := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f, err := config.Load(magnumConf)
	require.NoError(t, err)
	dbURL := dbtest.NewMySQL(t)
	st, err := db.Open(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	id := testutil.RandomHex(3)
	topic := "magnum-conductor-owner-" + id
	deployments := map[string]*bridgeProcess{}
	prefixes := map[string]string{}
	confOf := map[string][]string{}
	for _, name := range []string{"first", "second"} {
		prefixes[name] = "mcbo" + name[:1] + id + "-"
		metrics := testutil.FreeAddr(t)
		conf := writeFile(t, name+".conf", fmt.Sprintf(`[DEFAULT]
host = owner-%s-%s
[conductor]
topic = %s
[database]
connection = %s
[certificates]
cert_manager_type = x509keypair
[bridge]
kubeconfig = %s
namespace_prefix = %s
default_infrastructure = inmemory
cluster_credentials = false
# As the management cluster's admin, whom the admission policies do not name.
require_admission_policies = false
leader_election_namespace = default
metrics_bind = %s
log_format = json
`, name, id, topic, dbURL, admin, prefixes[name], metrics))
		confOf[name] = []string{magnumConf, conf}
		t.Cleanup(func() {
			_, _ = kubectl(t, admin, "", "-n", "default", "delete", "lease", "--ignore-not-found", "magnum-capi-bridge-"+strings.TrimSuffix(prefixes[name], "-"))
		})
		if name == "second" {
			// Before the second starts, its --check-config already says it would not drive.
			code, out, errOut := runBridge(t, 90*time.Second, append([]string{"--check-config"}, configArgs(confOf[name])...)...)
			require.Equal(t, 1, code, out+errOut)
			require.Contains(t, errOut, "database owner: another bridge deployment owns this Magnum database: default/magnum-capi-bridge-mcbof"+id)
		}
		p := startBridge(t, name+" deployment", confOf[name]...)
		p.metrics = metrics
		deployments[name] = p
		if name == "first" {
			waitLog(t, p.log, p.exited, `"msg":"serving"`, 90*time.Second)
			waitLog(t, p.log, p.exited, "this bridge deployment owns the Magnum database", 5*time.Second)
		}
	}
	second := deployments["second"]
	waitLog(t, second.log, second.exited, "another bridge deployment owns this Magnum database", 90*time.Second)
	code, body := second.readyz()
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, "another bridge deployment owns this Magnum database")

	// Creates as magnum-api casts them, on the topic both consume.
	project, user := strings.ReplaceAll(uuid.NewString(), "-", ""), strings.ReplaceAll(uuid.NewString(), "-", "")
	template := insertTemplate(t, st, "owner-"+id, project, user)
	client := topicClient(t, f, topic)
	rctx := &rpc.Context{User: user, UserID: user, ProjectID: project, Project: project, Roles: []string{"member"},
		RequestID: "req-" + uuid.NewString(), UserName: "demo", ProjectName: "demo"}
	for _, name := range []string{"first", "second"} {
		t.Cleanup(func() {
			_, _ = kubectl(t, admin, "", "delete", "namespace", "--wait=false", "--ignore-not-found", prefixes[name]+project)
		})
	}
	var ids []string
	for i := range 4 {
		ids = append(ids, castCreate(t, ctx, client, rctx, template, fmt.Sprintf("owner-%s-%d", id, i)))
	}
	first := deployments["first"]
	for _, cid := range ids {
		waitStatus(t, ctx, st, cid, first.exited, 6*time.Minute, magnum.StatusCreateComplete)
	}
	clusters := func(name string) []string {
		out, err := kubectl(t, admin, "", "get", "clusters.cluster.x-k8s.io", "-n", prefixes[name]+project, "-o", "name")
		require.NoError(t, err, out)
		return strings.Fields(out)
	}
	require.Len(t, clusters("first"), len(ids), "every create applied by the owner")
	require.Empty(t, clusters("second"), "none applied by the other deployment")
	secondLog, err := os.ReadFile(second.log)
	require.NoError(t, err)
	require.NotContains(t, string(secondLog), "cluster_create", "the other deployment consumed no message")

	// The owner stops: the other takes the database over once the owner's last renewal is a
	// minute old, and then serves.
	for _, cid := range ids {
		require.NoError(t, client.Cast(ctx, "cluster_delete", map[string]any{"uuid": cid}, rctx))
	}
	for _, cid := range ids {
		waitRowGone(t, ctx, st, cid, 3*time.Minute)
	}
	stopped := time.Now()
	first.stop()
	waitLog(t, second.log, second.exited, "this bridge deployment owns the Magnum database", 2*time.Minute)
	waitLog(t, second.log, second.exited, `"msg":"serving"`, 30*time.Second)
	t.Logf("the second deployment took the database over %s after the first stopped", time.Since(stopped).Round(time.Second))
	code, body = second.readyz()
	require.Equal(t, http.StatusOK, code, body)
}
