package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestClusterCredentialsFollowTheCluster: a cluster gets its own two Keystone application
// credentials, created as the tenant, stored only in the project's namespace, working for a token
// request; credential_rotate replaces them (the old ones stop working); a cluster delete leaves none
// behind in Keystone.
func TestClusterCredentialsFollowTheCluster(t *testing.T) {
	requireStack(t)
	t.Parallel()
	tmpl := createTemplate(t, cloudDemo)
	id := createCluster(t, cloudDemo, tmpl, "creds-"+testutil.RandomHex(3), "--node-count", "1")
	c := waitStatus(t, cloudDemo, id, 6*time.Minute, "CREATE_COMPLETE")
	ns := templates.NamespaceFor("magnum-", c.ProjectID)

	names := func() []string { return credentialNames(t, id) }
	require.ElementsMatch(t, []string{"magnum-" + id + "-capo", "magnum-" + id + "-workload"}, names(),
		"the tenant owns exactly the cluster's two credentials")

	capo := secretData(t, ns, c.StackID+"-cloud-config")
	workload := secretData(t, ns, c.StackID+"-workload-cloud-config")
	require.Contains(t, string(capo["clouds.yaml"]), "v3applicationcredential")
	tok := tokenFromCloudsYAML(t, capo["clouds.yaml"])
	require.Equal(t, c.ProjectID, tok.ProjectID, "the CAPO credential is scoped to the cluster's project")
	require.NotEqual(t, string(capo["clouds.yaml"]), string(workload["clouds.yaml"]), "CAPO and the workload cluster hold different credentials")
	tokenFromCloudsYAML(t, workload["clouds.yaml"])
	// Nothing of it anywhere else in the management cluster.
	out, err := kubectl(t, mgmtKubeconfig, "get", "secrets", "-A", "-l", "magnum.openstack.org/cluster-uuid="+id,
		"-o", "jsonpath={range .items[*]}{.metadata.namespace}{\"\\n\"}{end}")
	require.NoError(t, err, out)
	for _, got := range strings.Fields(out) {
		require.Equal(t, ns, got, "a secret of the cluster outside its project's namespace")
	}

	// credential_rotate, as magnum-api 23 sends it (PATCH /v1/credentials/<cluster>); the Zed API
	// has no such route, so this drives the bridge's RPC endpoint directly with the tenant's token.
	rotateCredentials(t, id, c)
	require.ElementsMatch(t, []string{"magnum-" + id + "-capo-r1", "magnum-" + id + "-workload-r1"}, names(),
		"rotation replaced both credentials")
	rotated := secretData(t, ns, c.StackID+"-cloud-config")
	require.NotEqual(t, string(capo["clouds.yaml"]), string(rotated["clouds.yaml"]))
	tokenFromCloudsYAML(t, rotated["clouds.yaml"])
	_, err = issueToken(t, capo["clouds.yaml"])
	require.Error(t, err, "the rotated-out credential still works")
	after := waitStatus(t, cloudDemo, id, time.Minute, "CREATE_COMPLETE")
	require.Equal(t, "CREATE_COMPLETE", after.Status, "rotation does not disturb the cluster")

	mustOpenstack(t, cloudDemo, "coe", "cluster", "delete", id)
	waitGone(t, cloudDemo, id, 4*time.Minute)
	require.Empty(t, names(), "a deleted cluster left application credentials in Keystone")
	require.Empty(t, capiObjects(t, id))
}

// credentialNames lists the demo user's application credentials of one cluster.
func credentialNames(t *testing.T, clusterUUID string) []string {
	t.Helper()
	var creds []struct {
		Name string `json:"Name"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustOpenstack(t, cloudDemo, "application", "credential", "list", "-f", "json")), &creds))
	var out []string
	for _, c := range creds {
		if strings.HasPrefix(c.Name, "magnum-"+clusterUUID+"-") {
			out = append(out, c.Name)
		}
	}
	return out
}

func secretData(t *testing.T, namespace, name string) map[string][]byte {
	t.Helper()
	out, err := kubectl(t, mgmtKubeconfig, "get", "secret", "-n", namespace, name, "-o", "json")
	require.NoError(t, err, out)
	var s struct {
		Data map[string]string `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	data := map[string][]byte{}
	for k, v := range s.Data {
		b, err := base64.StdEncoding.DecodeString(v)
		require.NoError(t, err)
		data[k] = b
	}
	return data
}

// issueToken asks Keystone for a token with a stored clouds.yaml, through the real CLI, the way a
// consumer of the Secret (CAPO, the cloud controller manager) authenticates.
func issueToken(t *testing.T, cloudsYAML []byte) (testutil.Token, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "clouds.yaml")
	require.NoError(t, os.WriteFile(file, cloudsYAML, 0o600))
	return testutil.IssueToken("openstack", "OS_CLIENT_CONFIG_FILE="+file)
}

func tokenFromCloudsYAML(t *testing.T, cloudsYAML []byte) testutil.Token {
	t.Helper()
	tok, err := issueToken(t, cloudsYAML)
	require.NoError(t, err, "Keystone refuses the stored credential")
	return tok
}

// rotateCredentials sends credential_rotate as a call with the demo user's token.
func rotateCredentials(t *testing.T, id string, c *clusterShow) {
	t.Helper()
	tok := tokenOf(t, cloudDemo)
	conf, client := magnumRPC(t)
	cl := &magnum.Cluster{}
	cl.UUID.Set(id)
	cl.Name.Set(c.Name)
	cl.ProjectID.Set(c.ProjectID)
	cl.UserID.Set(tok.UserID)
	cl.StackID.Set(c.StackID)
	obj, err := magnum.EncodeAt(cl, magnum.MustVersion("1.23"), nil)
	require.NoError(t, err)
	rctx := &rpc.Context{User: tok.UserID, UserID: tok.UserID, ProjectID: c.ProjectID, Project: c.ProjectID,
		Roles: []string{"member", "reader"}, RequestID: "req-" + uuid.NewString(), UserName: "demo", ProjectName: "demo",
		AuthToken: tok.ID, AuthURL: conf.String("keystone_authtoken", "www_authenticate_uri", "")}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	reply, err := client.Call(ctx, "credential_rotate", map[string]any{"cluster": obj}, rctx, 60*time.Second)
	require.NoError(t, err)
	timed(t, "credential_rotate (the call alone)", start)
	require.JSONEq(t, "null", string(reply), "credential_rotate answers None on success")
}
