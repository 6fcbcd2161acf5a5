package compute

// End-to-end: a real application credential of the local stack's Keystone (user demo), rendered
// into the clouds.yaml the bridge stores, authenticates; the client finds the stack's fake Nova in
// Keystone's catalog (deploy/local/openstack/identity.py registers it) and manages server groups
// there, in project demo (the fake validates the token with Keystone, up.sh --keystone-url).
//
// They are of the e2e tier (build tag `e2e`, testutil.E2E): skipped without the tag; with it, an
// unreachable Keystone or fake Nova fails them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/utils/v2/openstack/clientconfig"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

type e2eEnv struct {
	authURL, region string
	demo            *keystone.Client
	// Password-issued tokens of demo and alt_demo, to look at the fake directly; never logged.
	demoToken, altToken string
	clusterUUID         string
	creds               *keystone.ClusterCredentials
}

// computeE2E issues a fresh pair of cluster credentials for demo and deletes them at the end.
func computeE2E(t *testing.T) *e2eEnv {
	t.Helper()
	testutil.Require(t, testutil.E2E)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cloud := testutil.Cloud(t, "devstack")
	env := &e2eEnv{authURL: cloud.AuthInfo.AuthURL, region: cloud.RegionName}
	env.demoToken = testutil.PasswordToken(ctx, t, "devstack")
	env.altToken = testutil.PasswordToken(ctx, t, "devstack-alt")
	var err error
	env.demo, err = keystone.NewClient(ctx, env.authURL, keystone.NewSecret(env.demoToken))
	require.NoError(t, err)
	env.clusterUUID = uuid.NewString()
	env.creds, err = env.demo.CreateClusterCredentials(ctx, env.clusterUUID, keystone.CreateOptions{ClusterName: "compute-e2e"})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := keystone.DeleteClusterCredentials(ctx, keystone.Cleanup{ClusterUUID: env.clusterUUID, Known: env.creds.Refs()}, env.demo)
		if err != nil && !keystone.OnlyNotFound(err) { // a test may have deleted them already
			t.Errorf("deleting the test's application credentials: %v", err)
		}
	})
	return env
}

// cloudsYAML renders the CAPO credential as the bridge stores it.
func (env *e2eEnv) cloudsYAML(t *testing.T, region string) []byte {
	t.Helper()
	out, err := keystone.RenderCloudsYAML(keystone.CloudsYAMLParams{AuthURL: env.authURL, RegionName: region, Interface: "public",
		ApplicationCredentialID: env.creds.CAPO.ID, ApplicationCredentialSecret: env.creds.CAPO.Secret})
	require.NoError(t, err)
	return out
}

// groupsSeenBy lists the server groups a password token's project holds in the stack's fake Nova.
func groupsSeenBy(t *testing.T, endpoint, token string) map[string][]string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, endpoint+"os-server-groups", nil)
	require.NoError(t, err)
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("OpenStack-API-Version", "compute 2.64")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		ServerGroups []servergroups.ServerGroup `json:"server_groups"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	out := map[string][]string{}
	for _, g := range body.ServerGroups {
		out[g.Name] = append(out[g.Name], g.ID+" "+policyOf(g))
	}
	return out
}

func TestE2EServerGroupsThroughKeystoneCatalog(t *testing.T) {
	env := computeE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	yaml := env.cloudsYAML(t, env.region)

	start := time.Now()
	c, err := NewFromCloudsYAML(ctx, yaml, nil, WithUserAgent("compute-e2e"))
	require.NoError(t, err)
	t.Logf("authenticated as the CAPO credential and found Nova in %s: %s", time.Since(start), c)
	assert.Equal(t, env.demo.Identity().ProjectID, c.ProjectID())
	if !strings.HasSuffix(c.Endpoint(), ":8774/v2.1/") {
		t.Fatalf("Nova endpoint from the catalog: %s", c.Endpoint())
	}

	// Names unique to this run; the groups are removed at the end whatever happens.
	prefix := "e2e-" + env.clusterUUID[:8]
	groups := []templates.ServerGroup{
		{Name: prefix + "-control-plane", Policy: "soft-anti-affinity"},
		{Name: prefix + "-default-worker", Policy: "anti-affinity"},
	}
	names := []string{groups[0].Name, groups[1].Name}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, c.DeleteServerGroups(ctx, names), "cleanup")
	})

	// Create.
	start = time.Now()
	require.NoError(t, c.EnsureServerGroups(ctx, groups))
	t.Logf("created %d server groups in %s (microversion %s)", len(groups), time.Since(start), c.microversion)
	assert.Equal(t, "2.64", c.microversion)
	seen := groupsSeenBy(t, c.Endpoint(), env.demoToken)
	require.Len(t, seen[names[0]], 1)
	require.Len(t, seen[names[1]], 1)
	assert.True(t, strings.HasSuffix(seen[names[0]][0], " soft-anti-affinity"), seen[names[0]])
	assert.True(t, strings.HasSuffix(seen[names[1]][0], " anti-affinity"), seen[names[1]])
	// The fake keyed them by the token's project: alt_demo's project does not see them.
	seenByAlt := groupsSeenBy(t, c.Endpoint(), env.altToken)
	assert.NotContains(t, seenByAlt, names[0], "alt_demo sees demo's server group: the stack's fake does not validate tokens with Keystone (--keystone-url)")

	// Second Ensure, from a new client (as after a bridge restart): a no-op, same ids.
	again, err := NewFromCloudsYAML(ctx, yaml, nil)
	require.NoError(t, err)
	start = time.Now()
	require.NoError(t, again.EnsureServerGroups(ctx, groups))
	t.Logf("second Ensure (no-op) in %s", time.Since(start))
	assert.Equal(t, seen[names[0]], groupsSeenBy(t, c.Endpoint(), env.demoToken)[names[0]])
	assert.Equal(t, seen[names[1]], groupsSeenBy(t, c.Endpoint(), env.demoToken)[names[1]])

	// Policy mismatch.
	err = again.EnsureServerGroups(ctx, []templates.ServerGroup{{Name: names[0], Policy: "affinity"}})
	require.ErrorIs(t, err, ErrPolicyMismatch)
	assert.Contains(t, err.Error(), names[0])
	assert.Contains(t, err.Error(), "with policy soft-anti-affinity (id ")
	t.Logf("mismatch: %v", err)

	// Delete, then delete again (missing: fine).
	start = time.Now()
	require.NoError(t, c.DeleteServerGroups(ctx, names))
	t.Logf("deleted in %s", time.Since(start))
	seen = groupsSeenBy(t, c.Endpoint(), env.demoToken)
	assert.NotContains(t, seen, names[0])
	assert.NotContains(t, seen, names[1])
	require.NoError(t, c.DeleteServerGroups(ctx, names))
	require.NoError(t, c.DeleteServerGroups(ctx, []string{prefix + "-never-created"}))
}

// TestE2EServerGroupsAsTheRequestsToken: groups made with the token magnum-api passes on (the
// request's user, no token request) are the ones the cluster's CAPO credential finds by name: its
// Ensure is a no-op with the same ids, and it deletes them.
func TestE2EServerGroupsAsTheRequestsToken(t *testing.T) {
	env := computeE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cloud, err := clientconfig.GetCloudFromYAML(&clientconfig.ClientOpts{Cloud: "devstack"})
	require.NoError(t, err)
	opts, err := clientconfig.AuthOptions(&clientconfig.ClientOpts{Cloud: "devstack"})
	require.NoError(t, err)
	provider, err := openstack.NewClient(opts.IdentityEndpoint)
	require.NoError(t, err)
	identity, err := openstack.NewIdentityV3(provider, gophercloud.EndpointOpts{})
	require.NoError(t, err)
	created := tokens.Create(ctx, identity, opts)
	require.NoError(t, created.Err)
	info, err := json.Marshal(created.Body) // {"token": {...}}, as keystonemiddleware passes it on
	require.NoError(t, err)
	value, err := created.ExtractTokenID()
	require.NoError(t, err)

	start := time.Now()
	asUser, err := NewFromToken(Token{AuthURL: env.authURL, Value: value, Info: info, Region: env.region, Interface: "public"}, nil)
	require.NoError(t, err)
	assert.Equal(t, env.demo.Identity().ProjectID, asUser.ProjectID())
	prefix := "e2e-tok-" + env.clusterUUID[:8]
	groups := []templates.ServerGroup{{Name: prefix + "-control-plane", Policy: "soft-anti-affinity"}}
	require.NoError(t, asUser.EnsureServerGroups(ctx, groups))
	t.Logf("created a server group as the request's token in %s (region %q)", time.Since(start), cloud.RegionName)
	seen := groupsSeenBy(t, asUser.Endpoint(), env.demoToken)[groups[0].Name]
	require.Len(t, seen, 1)

	asCredential, err := NewFromCloudsYAML(ctx, env.cloudsYAML(t, env.region), nil)
	require.NoError(t, err)
	require.NoError(t, asCredential.EnsureServerGroups(ctx, groups))
	assert.Equal(t, seen, groupsSeenBy(t, asUser.Endpoint(), env.demoToken)[groups[0].Name], "the CAPO credential made another group")
	require.NoError(t, asCredential.DeleteServerGroups(ctx, []string{groups[0].Name}))
	assert.NotContains(t, groupsSeenBy(t, asUser.Endpoint(), env.demoToken), groups[0].Name)
}

func TestE2EConstructorErrors(t *testing.T) {
	env := computeE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secret := env.creds.CAPO.Secret.Reveal()
	var errs []error

	// A region without Nova.
	_, err := NewFromCloudsYAML(ctx, env.cloudsYAML(t, "NoSuchRegion"), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "compute: find Nova: the catalog of project "+env.demo.Identity().ProjectID+" has no compute endpoint with interface public in NoSuchRegion")
	errs = append(errs, err)

	// A wrong secret: 401.
	wrong := "A" + secret[1:]
	if secret[0] == 'A' {
		wrong = "B" + secret[1:]
	}
	yaml := strings.Replace(string(env.cloudsYAML(t, env.region)), secret, wrong, 1)
	_, err = NewFromCloudsYAML(ctx, []byte(yaml), nil)
	assert.ErrorIs(t, err, ErrUnauthorized)
	errs = append(errs, err)

	// The deleted credential: 404.
	yaml = string(env.cloudsYAML(t, env.region))
	deleted, err := keystone.DeleteClusterCredentials(ctx, keystone.Cleanup{ClusterUUID: env.clusterUUID, Known: env.creds.Refs()}, env.demo)
	require.NoError(t, err)
	require.Len(t, deleted, 2)
	_, err = NewFromCloudsYAML(ctx, []byte(yaml), nil)
	assert.ErrorIs(t, err, ErrNotFound)
	errs = append(errs, err)

	for _, err := range errs {
		msg := fmt.Sprintf("%v | %+v | %#v", err, err, err.Error())
		if strings.Contains(msg, secret) || strings.Contains(msg, wrong) {
			t.Errorf("an error leaks the secret")
			continue
		}
		var cerr *Error
		assert.True(t, errors.As(err, &cerr), "%T", err)
		t.Logf("%v", err)
	}
}
