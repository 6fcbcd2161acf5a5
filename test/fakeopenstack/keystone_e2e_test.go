package fakeopenstack

// End-to-end: the simulator validates real tokens of the local stack's Keystone (KeystoneCallers),
// including an application credential's, the way CAPO authenticates with the credential the
// bridge stores. It runs its own in-process simulator, never the stack's fake-openstack.
//
// It is of the e2e tier (build tag `e2e`, testutil.E2E): skipped without the tag; with it, an
// unreachable Keystone fails it.

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

func TestSimulatorValidatesKeystoneAndApplicationCredentialTokens(t *testing.T) {
	testutil.Require(t, testutil.E2E)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cloud := testutil.Cloud(t, "devstack")
	authURL := cloud.AuthInfo.AuthURL
	demoToken, altToken := testutil.PasswordToken(ctx, t, "devstack"), testutil.PasswordToken(ctx, t, "devstack-alt")
	demo, err := keystone.NewClient(ctx, authURL, keystone.NewSecret(demoToken))
	require.NoError(t, err)
	clusterUUID := uuid.NewString()
	creds, err := demo.CreateClusterCredentials(ctx, clusterUUID, keystone.CreateOptions{ClusterName: "fakeopenstack-e2e"})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := keystone.DeleteClusterCredentials(ctx, keystone.Cleanup{ClusterUUID: clusterUUID, Known: creds.Refs()}, demo); err != nil && !keystone.OnlyNotFound(err) {
			t.Errorf("deleting the test's application credentials: %v", err)
		}
	})
	appCredToken := testutil.KeystoneToken(ctx, t, gophercloud.AuthOptions{IdentityEndpoint: authURL,
		ApplicationCredentialID: creds.CAPO.ID, ApplicationCredentialSecret: creds.CAPO.Secret.Reveal()})

	sim := startSim(t, WithCallers(KeystoneCallers(authURL, nil)))
	capo, alt := sim.clients(appCredToken), sim.clients(altToken)
	net, err := networks.Create(ctx, capo.network, networks.CreateOpts{Name: "fakeopenstack-e2e-" + clusterUUID[:8]}).Extract()
	require.NoError(t, err)
	assert.Equal(t, creds.ProjectID, net.ProjectID, "the network belongs to the credential's project")
	_, err = networks.Get(ctx, alt.network, net.ID).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusNotFound), "alt_demo cannot see demo's network: %v", err)
	_, err = networks.Create(ctx, sim.clients("gAAAAA-not-a-keystone-token").network, networks.CreateOpts{Name: "x"}).Extract()
	assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusUnauthorized), "a token Keystone refuses: %v", err)
	require.NoError(t, networks.Delete(ctx, capo.network, net.ID).ExtractErr())
	assert.Empty(t, sim.cloud.ProjectResources(creds.ProjectID))

	var logged bool
	for _, req := range sim.cloud.Requests() {
		if req.Method == http.MethodPost && req.Path == "/v2.0/networks" && req.Status == http.StatusCreated {
			assert.Equal(t, creds.ProjectID, req.ProjectID)
			assert.Equal(t, creds.CAPO.ID, req.ApplicationCredentialID)
			assert.Contains(t, req.AuthMethods, "application_credential")
			logged = true
		}
	}
	assert.True(t, logged, "the request log shows the application credential that created the network")
}
