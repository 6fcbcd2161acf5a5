package e2e

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/discovery"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The zed bridge's tenant view and discovery document (deploy/local/bridge-up.sh, mgmt-up.sh).
var (
	discoveryURL    = testutil.Env("MCB_DISCOVERY_URL", "http://127.0.0.1:9513"+discovery.WellKnownPath)
	mgmtServer      = testutil.Env("MCB_MGMT_SERVER", "https://127.0.0.1:16443")
	mgmtCA          = testutil.Env("MCB_MGMT_CA", "/var/lib/magnum-capi-bridge/mgmt/pki/ca.crt")
	bridgeLog       = testutil.Env("MCB_BRIDGE_LOG", "/var/log/magnum-capi-bridge/bridge.log")
	fakeComputeURL  = testutil.Env("MCB_FAKE_COMPUTE_URL", "http://127.0.0.1:8774/v2.1/")
	keystoneURL     = testutil.Env("MCB_KEYSTONE_URL", "http://127.0.0.1:5000/v3")
	zedPrefix       = "magnum-"
	discoverySchema = "../../docs/managed-kubernetes.schema.json"
)

// execCredentialScript is the exec credential of docs/tenant-view.md's one-liner: a Keystone token
// of the current OS_CLOUD as an ExecCredential. kubectl reads --exec-arg as CSV, so the JSON's commas
// and double quotes are printf's octal escapes.
const execCredentialScript = `printf '{\042apiVersion\042:\042client.authentication.k8s.io/v1\042\054\042kind\042:\042ExecCredential\042\054\042status\042:{\042token\042:\042%s\042}}' $(openstack token issue -f value -c id)`

// execKubeconfig builds the management-cluster kubeconfig with the kubectl commands of
// docs/tenant-view.md, for one cloud of clouds.yaml.
func execKubeconfig(t *testing.T, cloud string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), cloud+".kubeconfig")
	for _, args := range [][]string{
		{"set-cluster", "magnum", "--server=" + mgmtServer, "--certificate-authority=" + mgmtCA, "--embed-certs"},
		{"set-credentials", "keystone", "--exec-api-version=client.authentication.k8s.io/v1", "--exec-interactive-mode=Never",
			"--exec-command=sh", "--exec-arg=-c", "--exec-arg=" + execCredentialScript, "--exec-env=OS_CLOUD=" + cloud},
		{"set-context", "magnum", "--cluster=magnum", "--user=keystone"},
		{"use-context", "magnum"},
	} {
		out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig", path, "config"}, args...)...).CombinedOutput()
		require.NoError(t, err, "kubectl config %v: %s", args, out)
	}
	return path
}

// tokenKubeconfig holds a fixed bearer token.
func tokenKubeconfig(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token.kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster:\n    server: %s\n    certificate-authority: %s\n"+
		"users:\n- name: u\n  user:\n    token: %q\ncontexts:\n- name: c\n  context: {cluster: m, user: u}\ncurrent-context: c\n", mgmtServer, mgmtCA, token)
	require.NoError(t, os.WriteFile(path, []byte(kc), 0o600))
	return path
}

// tenantKubectl runs kubectl with the OpenStack CLI's environment (the exec credential runs openstack).
// A request that timed out is run again, as a tenant would: under CI load the apiserver's call of
// the token webhook (and the webhook's of Keystone) has outlasted kubectl's timeout, three times in
// a row once, while Keystone was the machine's busiest process.
func tenantKubectl(kubeconfig string, args ...string) (string, error) {
	var (
		out []byte
		err error
	)
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--request-timeout=30s"}, args...)...)
		cmd.Env = testutil.OpenStackCLIEnv()
		out, err = cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "Client.Timeout exceeded") {
			break
		}
	}
	return string(out), err
}

func requireForbidden(t *testing.T, what, out string, err error) {
	t.Helper()
	require.Error(t, err, "%s was allowed: %s", what, out)
	// kubectl says "Forbidden" for reads and "is forbidden" for creates.
	require.Contains(t, strings.ToLower(out), "forbidden", "%s: %s", what, out)
}

// apiStatus is the HTTP status of a GET of the management cluster's API with a bearer token.
func apiStatus(t *testing.T, token, path string) int {
	t.Helper()
	ca, err := os.ReadFile(mgmtCA)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequest(http.MethodGet, mgmtServer+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

type capiClusterList struct {
	Items []struct {
		Metadata struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Status struct {
			Conditions []struct {
				Type, Status string
			} `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

// TestTenantViewKeystoneLogin: a Keystone token of demo reads demo's Clusters (with their conditions)
// in demo's namespace through the management cluster's API, and nothing else; alt_demo likewise.
func TestTenantViewKeystoneLogin(t *testing.T) {
	requireStack(t)
	t.Parallel()
	demo, alt := tokenOf(t, cloudDemo), tokenOf(t, cloudAlt)
	require.NotEqual(t, demo.ProjectID, alt.ProjectID)
	demoNS, altNS := templates.NamespaceFor(zedPrefix, demo.ProjectID), templates.NamespaceFor(zedPrefix, alt.ProjectID)

	demoUUID := createCluster(t, cloudDemo, createTemplate(t, cloudDemo), "tv-"+testutil.RandomHex(3), "--node-count", "1")
	altUUID := createCluster(t, cloudAlt, createTemplate(t, cloudAlt), "tv-"+testutil.RandomHex(3), "--node-count", "1")

	demoKC, altKC := execKubeconfig(t, cloudDemo), execKubeconfig(t, cloudAlt)
	list := func(kc, ns string) (capiClusterList, string, error) {
		out, err := tenantKubectl(kc, "get", "clusters.cluster.x-k8s.io", "-n", ns, "-o", "json")
		var l capiClusterList
		if err == nil {
			err = json.Unmarshal([]byte(out), &l)
		}
		return l, out, err
	}
	// The bridge applies the Cluster shortly after the RPC; CAPI adds conditions right after.
	var mine capiClusterList
	require.Eventually(t, func() bool {
		l, out, err := list(demoKC, demoNS)
		if err != nil {
			// Each try runs `openstack token issue` and the token webhook asks Keystone: on a
			// loaded machine one can time out; the next try decides.
			t.Logf("as demo: %v: %s (tried again)", err, out)
			return false
		}
		for _, c := range l.Items {
			if c.Metadata.Labels["magnum.openstack.org/cluster-uuid"] == demoUUID && len(c.Status.Conditions) > 0 {
				mine = l
				return true
			}
		}
		return false
	}, 5*time.Minute, 2*time.Second, "demo's Cluster with conditions, as demo")
	for _, c := range mine.Items {
		require.Equal(t, demoNS, c.Metadata.Namespace)
		require.NotEqual(t, altUUID, c.Metadata.Labels["magnum.openstack.org/cluster-uuid"])
	}
	out, err := tenantKubectl(demoKC, "get", "clusters.cluster.x-k8s.io", "-n", demoNS)
	require.NoError(t, err, out)
	t.Logf("as demo, kubectl get clusters -n %s:\n%s", demoNS, out)
	for _, r := range []string{"machinedeployments.cluster.x-k8s.io", "machinesets.cluster.x-k8s.io", "machines.cluster.x-k8s.io",
		"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "devclusters.infrastructure.cluster.x-k8s.io", "events"} {
		out, err := tenantKubectl(demoKC, "get", r, "-n", demoNS)
		require.NoError(t, err, "demo lists %s: %s", r, out)
	}
	out, err = tenantKubectl(demoKC, "auth", "whoami", "-o", "json")
	require.NoError(t, err, out)
	require.Contains(t, out, "keystone:"+demo.UserID)
	require.Contains(t, out, "keystone:project:"+demo.ProjectID)

	out, err = tenantKubectl(demoKC, "get", "secrets", "-n", demoNS)
	requireForbidden(t, "demo reading Secrets in its namespace", out, err)
	out, err = tenantKubectl(demoKC, "get", "secret", demoUUID, "-n", demoNS)
	requireForbidden(t, "demo getting a Secret by name", out, err)
	out, err = tenantKubectl(demoKC, "get", "clusters.cluster.x-k8s.io", "-n", altNS)
	requireForbidden(t, "demo listing alt_demo's namespace", out, err)
	out, err = tenantKubectl(demoKC, "get", "namespaces")
	requireForbidden(t, "demo listing namespaces", out, err)
	out, err = tenantKubectl(demoKC, "get", "clusters.cluster.x-k8s.io", "-A")
	requireForbidden(t, "demo listing Clusters of all namespaces", out, err)
	// Its own Cluster: another test's may be gone by now (NotFound is no proof of a refusal).
	var name string
	for _, c := range mine.Items {
		if c.Metadata.Labels["magnum.openstack.org/cluster-uuid"] == demoUUID {
			name = c.Metadata.Name
		}
	}
	out, err = tenantKubectl(demoKC, "annotate", "clusters.cluster.x-k8s.io", name, "-n", demoNS, "tenant-view=write", "--dry-run=server")
	requireForbidden(t, "demo annotating its Cluster", out, err)
	out, err = tenantKubectl(demoKC, "delete", "clusters.cluster.x-k8s.io", name, "-n", demoNS, "--dry-run=server")
	requireForbidden(t, "demo deleting its Cluster", out, err)
	out, err = tenantKubectl(demoKC, "create", "configmap", "x", "-n", demoNS, "--dry-run=server")
	requireForbidden(t, "demo creating a ConfigMap", out, err)
	out, err = tenantKubectl(demoKC, "scale", "machinedeployments.cluster.x-k8s.io", "--all", "-n", demoNS, "--replicas=5", "--dry-run=server")
	require.Error(t, err, "demo scaling its MachineDeployments: %s", out)

	// alt_demo sees its own cluster only.
	require.Eventually(t, func() bool {
		l, out, err := list(altKC, altNS)
		require.NoError(t, err, out)
		for _, c := range l.Items {
			require.NotEqual(t, demoUUID, c.Metadata.Labels["magnum.openstack.org/cluster-uuid"])
			if c.Metadata.Labels["magnum.openstack.org/cluster-uuid"] == altUUID {
				return true
			}
		}
		return false
	}, 2*time.Minute, 2*time.Second, "alt_demo's Cluster, as alt_demo")
	out, err = tenantKubectl(altKC, "get", "clusters.cluster.x-k8s.io", "-n", demoNS)
	requireForbidden(t, "alt_demo listing demo's namespace", out, err)
}

// TestTenantViewRefusesBadTokens: a wrong token gets 401 and leaves no trace of itself in the
// bridge's log; a revoked token is refused once the caches (apiserver 10 s, bridge 5 s) let go of it.
func TestTenantViewRefusesBadTokens(t *testing.T) {
	requireStack(t)
	t.Parallel()
	b := make([]byte, 48)
	_, _ = rand.Read(b)
	wrong := "gAAAAAB" + base64.RawURLEncoding.EncodeToString(b)
	require.Equal(t, http.StatusUnauthorized, apiStatus(t, wrong, "/api/v1/namespaces/default/pods"))
	out, err := tenantKubectl(tokenKubeconfig(t, wrong), "get", "clusters.cluster.x-k8s.io", "-n", "default")
	require.Error(t, err)
	require.Contains(t, out, "the server has asked for the client to provide credentials", "kubectl's words for 401")
	logs, err := os.ReadFile(bridgeLog)
	require.NoError(t, err)
	require.NotContains(t, string(logs), wrong)
	require.NotContains(t, string(logs), wrong[7:30])

	// Revoked.
	tok := tokenOf(t, cloudDemo)
	ns := projectNamespaceReady(t, cloudDemo, tok.ProjectID)
	path := "/apis/cluster.x-k8s.io/v1beta2/namespaces/" + ns + "/clusters"
	require.Equal(t, http.StatusOK, apiStatus(t, tok.ID, path))
	mustOpenstack(t, cloudDemo, "token", "revoke", tok.ID)
	revoked := time.Now()
	require.Eventually(t, func() bool { return apiStatus(t, tok.ID, path) == http.StatusUnauthorized }, 40*time.Second, time.Second,
		"the revoked token is still accepted")
	t.Logf("revoked token refused after %s", time.Since(revoked).Round(time.Second))
	logs, err = os.ReadFile(bridgeLog)
	require.NoError(t, err)
	require.NotContains(t, string(logs), tok.ID)
}

// TestDiscoveryDocument: the zed bridge's /.well-known/managed-kubernetes.json validates against
// docs/managed-kubernetes.schema.json, lists the seeded flavors and image versions, and a flavor
// added to Nova (the fake) shows up once the document's cache (5 s locally) expires.
func TestDiscoveryDocument(t *testing.T) {
	requireStack(t)
	t.Parallel()
	fetch := func() discovery.Document {
		resp, err := http.Get(discoveryURL)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.NoError(t, discovery.ValidateDocument(body, discoverySchema), string(body))
		var d discovery.Document
		require.NoError(t, json.Unmarshal(body, &d))
		return d
	}
	flavorNames := func(d discovery.Document) []string {
		var out []string
		for _, n := range d.NodeTypes {
			out = append(out, n.Name)
		}
		return out
	}
	d := fetch()
	require.Subset(t, flavorNames(d), []string{"m1.small", "m1.medium", "m1.large"})
	versions := map[string][]string{}
	for _, v := range d.KubernetesVersions {
		versions[v.Version] = v.Images
	}
	require.Contains(t, versions["v1.36.3"], "ubuntu-2404-kube-v1.36.3")
	require.Contains(t, versions["v1.35.4"], "ubuntu-2404-kube-v1.35.4")
	raw, err := json.Marshal(d.Interfaces)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"type":"openstack-magnum"`)
	require.Contains(t, string(raw), `"url":"http://127.0.0.1:9511`)
	require.Contains(t, string(raw), `"namespace_rule":"magnum-\u003ckeystone project id\u003e"`)
	require.Contains(t, string(raw), `"server":"`+mgmtServer+`"`)
	// The tenant API next to it (docs/tenant-api.md): a client finds group, version and kind here.
	require.Contains(t, string(raw), `"apis":[{"group":"coe.magnum.openstack.org","kind":"MagnumCluster","namespace":"magnum-\u003ckeystone project id\u003e","resource":"magnumclusters","version":"v1alpha1"}]`)
	require.NotEmpty(t, d.Regions)
	require.NotEmpty(t, d.Labels)

	// A new flavor in Nova (the fake's POST /flavors).
	compute := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{}, Endpoint: fakeComputeURL}
	name := "e2e-disc-" + testutil.RandomHex(3)
	f, err := flavors.Create(context.Background(), compute, flavors.CreateOpts{Name: name, VCPUs: 3, RAM: 3072,
		Disk: gophercloud.IntToPointer(30), IsPublic: gophercloud.Enabled}).Extract()
	require.NoError(t, err)
	t.Cleanup(func() { _ = flavors.Delete(context.Background(), compute, f.ID).ExtractErr() })
	added := time.Now()
	require.Eventually(t, func() bool {
		for _, n := range fetch().NodeTypes {
			if n.Name == name {
				require.Equal(t, discovery.NodeType{Name: name, ID: f.ID, VCPUs: 3, RAMMiB: 3072, DiskGiB: 30}, n)
				return true
			}
		}
		return false
	}, 20*time.Second, 500*time.Millisecond, "the new flavor %s is not in the document", name)
	t.Logf("new flavor listed %s after it was added", time.Since(added).Round(100*time.Millisecond))
}

// TestTenantViewRefusesExpiredTokens: a token of an application credential that expires 90 s from now
// (Keystone's shortest way to an expiring token; its tokens otherwise live an hour) reads the project's
// namespace, and is refused once it has expired.
func TestTenantViewRefusesExpiredTokens(t *testing.T) {
	requireStack(t)
	t.Parallel()
	ns := projectNamespaceReady(t, cloudDemo, tokenOf(t, cloudDemo).ProjectID) // before the clock starts
	// 90 s: on a loaded machine the CLI calls below take tens of seconds (30 s expired before the
	// first read once).
	// Whole seconds: the expiration is sent to the second, and a fraction cut off made the token
	// expire up to a second before `expires` (CI saw it refused "-1s after its expiry").
	expires := time.Now().Add(90 * time.Second).UTC().Truncate(time.Second)
	var cred struct{ ID, Secret string }
	require.NoError(t, json.Unmarshal([]byte(mustOpenstack(t, cloudDemo, "application", "credential", "create", "e2e-expiring-"+testutil.RandomHex(3),
		"--expiration", expires.Format("2006-01-02T15:04:05"), "-f", "json")), &cred))
	t.Cleanup(func() { _, _ = openstack(t, cloudDemo, "application", "credential", "delete", cred.ID) })
	provider, err := gcopenstack.AuthenticatedClient(context.Background(), gophercloud.AuthOptions{IdentityEndpoint: keystoneURL,
		ApplicationCredentialID: cred.ID, ApplicationCredentialSecret: cred.Secret})
	require.NoError(t, err)
	token := provider.Token()
	path := "/apis/cluster.x-k8s.io/v1beta2/namespaces/" + ns + "/clusters"
	require.True(t, time.Now().Before(expires), "the token expired before the first read; the machine is too slow for this test")
	require.Equal(t, http.StatusOK, apiStatus(t, token, path))
	require.Eventually(t, func() bool { return apiStatus(t, token, path) == http.StatusUnauthorized }, 150*time.Second, 2*time.Second,
		"the expired token is still accepted")
	t.Logf("token refused %s after its expiry", time.Since(expires).Round(time.Second))
	require.False(t, time.Now().Before(expires), "refused before it expired")
}

// projectNamespaceReady returns the project's namespace once it holds the viewer RoleBinding. The
// bridge makes both at the project's first cluster create, so on a fresh stack, where no other test
// has created one of the project's clusters yet, it creates one (the tenant view of a project with no
// namespace is a 403: RBAC has nothing to bind in a namespace that does not exist).
func projectNamespaceReady(t *testing.T, cloud, projectID string) string {
	t.Helper()
	ns := templates.NamespaceFor(zedPrefix, projectID)
	bound := func() bool {
		_, err := kubectl(t, mgmtKubeconfig, "get", "rolebinding", "-n", ns, capi.ViewerBindingName, "-o", "name")
		return err == nil
	}
	if bound() {
		return ns
	}
	createCluster(t, cloud, createTemplate(t, cloud), "tvns-"+testutil.RandomHex(3), "--node-count", "1")
	require.Eventually(t, bound, 2*time.Minute, time.Second, "no viewer RoleBinding in %s after a cluster create", ns)
	return ns
}
