package conductor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

func cloudsYAML(credentialID string) []byte {
	return fmt.Appendf(nil, "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example.org/v3\n"+
		"      application_credential_id: %s\n      application_credential_secret: s3cr3t\n    region_name: RegionOne\n", credentialID)
}

// The add-ons are applied with the Cluster, configured with the workload credential (never
// CAPO's), retried on a transient failure, and removed with the cluster.
func TestAddonsUseTheWorkloadCredentialAndGoWithTheCluster(t *testing.T) {
	h := newHarness(t)
	req, id := h.createRequest("demo", 1)
	ns, stack := "magnum-"+demoProject, templates.ClusterName("demo", id)
	h.kube.secrets[ns+"/"+workloadCloudConfigSecretName(stack)] = map[string][]byte{cloudsYAMLKey: cloudsYAML("workload-credential")}
	h.kube.secrets[ns+"/"+templates.CloudConfigSecretName(stack)] = map[string][]byte{cloudsYAMLKey: cloudsYAML("capo-credential")}
	h.f.failNext("kube.ApplyAddons", 1, errDBDown)
	_, err := h.deliver(req, 1)
	require.NoError(t, err)
	require.Equal(t, 1, h.settle(10), "the failed add-on apply is retried")

	set := h.kube.addonSets[stack]
	require.NotNil(t, set)
	require.Equal(t, []string{addons.CNI, addons.CloudConfig, addons.CloudController, addons.CinderCSI, addons.KeystoneAuth, addons.MetricsServer}, set.Addons)
	require.Equal(t, ns, set.ResourceSet.GetNamespace())
	cfg := set.Objects[addons.CloudConfig][0].(*corev1.Secret)
	require.Contains(t, string(cfg.Data["cloud.conf"]), `application-credential-id="workload-credential"`)
	require.NotContains(t, string(cfg.Data["cloud.conf"]), "capo-credential")
	h.complete(id)

	_, err = h.deliver(request("cluster_delete", map[string]json.RawMessage{"uuid": jsonArg(t, id)}), 1)
	require.NoError(t, err)
	h.settle(10)
	h.kube.finishDeleting()
	require.NoError(t, h.c.ClusterGone(context.Background(), ns, stack))
	h.settle(10)
	require.Empty(t, h.kube.addonSets, "the ClusterResourceSet goes with the cluster")
}

// An add-on the bridge cannot render fails the create at once, naming what to fix.
func TestUnknownNetworkDriverFailsTheCreate(t *testing.T) {
	h := newHarness(t)
	h.store.templates[templateV136].NetworkDriver.Set("docker")
	req, id := h.createRequest("demo", 1)
	_, err := h.deliver(req, 1)
	require.NoError(t, err)
	require.Zero(t, h.settle(5))
	cl := h.store.cluster(t, id)
	require.Equal(t, magnum.StatusCreateFailed, cl.Status.Or(""))
	require.Contains(t, cl.StatusReason.Or(""), `network_driver "docker"`)
}

// fakeCredentials issues generation-numbered workload credentials and records what was deleted,
// and when: the rotation test checks the order.
type fakeCredentials struct {
	kube       *fakeKube
	generation int
	events     []string
}

func (f *fakeCredentials) issue() *IssuedCredentials {
	id := fmt.Sprintf("workload-r%d", f.generation)
	return &IssuedCredentials{Refs: []keystone.CredentialRef{{ID: id, Name: id}},
		CAPOCloudsYAML: cloudsYAML(fmt.Sprintf("capo-r%d", f.generation)), WorkloadCloudsYAML: cloudsYAML(id)}
}

func (f *fakeCredentials) Issue(context.Context, *rpc.Context, *magnum.Cluster) (*IssuedCredentials, error) {
	return f.issue(), nil
}

func (f *fakeCredentials) Rotate(_ context.Context, _ *rpc.Context, _ *magnum.Cluster, current []keystone.CredentialRef) (
	*IssuedCredentials, func(context.Context) error, func(context.Context), error) {
	f.generation++
	commit := func(context.Context) error {
		// What the workload cluster holds when the old credential goes.
		var holds string
		for _, set := range f.kube.addonSets {
			holds = string(set.Objects[addons.CloudConfig][0].(*corev1.Secret).Data["cloud.conf"])
		}
		f.events = append(f.events, fmt.Sprintf("delete %s while the add-ons hold %q", current[0].ID, credentialIDIn(holds)))
		return nil
	}
	return f.issue(), commit, func(context.Context) {}, nil
}

func (f *fakeCredentials) Revoke(context.Context, *rpc.Context, *magnum.Cluster, []keystone.CredentialRef) error {
	return nil
}

func credentialIDIn(cloudConf string) string {
	for _, l := range strings.Split(cloudConf, "\n") {
		if v, ok := strings.CutPrefix(l, "application-credential-id="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// A credential rotation puts the new workload credential into the add-on set before the old
// credential is deleted.
func TestCredentialRotationUpdatesTheAddonsFirst(t *testing.T) {
	h := newHarness(t)
	creds := &fakeCredentials{kube: h.kube}
	h.c.opts.Credentials = creds
	id := h.created(1)
	stack := h.store.cluster(t, id).StackID.Or("")
	require.Equal(t, "workload-r0", credentialIDIn(string(h.kube.addonSets[stack].Objects[addons.CloudConfig][0].(*corev1.Secret).Data["cloud.conf"])))

	_, err := h.deliver(request("credential_rotate", map[string]json.RawMessage{"cluster": h.clusterArg(id)}), 1)
	require.NoError(t, err)
	require.Equal(t, []string{`delete workload-r0 while the add-ons hold "workload-r1"`}, creds.events)
	require.Equal(t, []bool{false, true}, h.kube.addonPrunes[stack], "the create's set prunes nothing; a later one prunes what it drops")
}
