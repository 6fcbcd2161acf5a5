package compute

// Server groups against the fake Nova of test/fakeopenstack, in process. The client is built
// around a fixed token here (the fake resolves it to a project with WithCallers); authentication
// and the catalog are covered by e2e_test.go against the local stack's Keystone.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack"
)

const testToken = "token-of-project-a"

func projectOfToken(_ context.Context, token string) (fakeopenstack.Caller, error) {
	switch token {
	case testToken:
		return fakeopenstack.Caller{ProjectID: "project-a", UserID: "user-a"}, nil
	case "token-of-project-b":
		return fakeopenstack.Caller{ProjectID: "project-b", UserID: "user-b"}, nil
	}
	return fakeopenstack.Caller{}, fakeopenstack.ErrInvalidToken
}

type fakeNova struct {
	cloud *fakeopenstack.Cloud
	url   string // the compute endpoint, ".../v2.1/"
}

func startFakeNova(t *testing.T, opts ...fakeopenstack.Option) *fakeNova {
	t.Helper()
	cloud, err := fakeopenstack.New(fakeopenstack.DefaultSeed(), append([]fakeopenstack.Option{fakeopenstack.WithCallers(projectOfToken)}, opts...)...)
	require.NoError(t, err)
	srv := httptest.NewServer(cloud.Handler(fakeopenstack.ComputeService))
	t.Cleanup(srv.Close)
	return &fakeNova{cloud: cloud, url: srv.URL + "/v2.1/"}
}

// client acts with a token of the fake's project-a (or the given token).
func (f *fakeNova) client(t *testing.T, token string) *Client {
	t.Helper()
	provider, err := openstack.NewClient(f.url)
	require.NoError(t, err)
	provider.HTTPClient = http.Client{Timeout: 10 * time.Second}
	provider.SetToken(token)
	return &Client{compute: &gophercloud.ServiceClient{ProviderClient: provider, Endpoint: f.url, Type: "compute"},
		projectID: "project-a", scrub: []string{token}}
}

// groups lists a project's groups straight from the fake as name → policies, in either shape.
func (f *fakeNova) groups(t *testing.T, token string) map[string][]string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.url+"os-server-groups", nil)
	require.NoError(t, err)
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("X-OpenStack-Nova-API-Version", "latest")
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
		out[g.Name] = append(out[g.Name], policyOf(g))
	}
	return out
}

// create adds a group behind the client's back, as another tool (or a racing create) would.
func (f *fakeNova) create(t *testing.T, name, policy string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"server_group": map[string]any{"name": name, "policy": policy}})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, f.url+"os-server-groups", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Auth-Token", testToken)
	req.Header.Set("X-OpenStack-Nova-API-Version", "2.64")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// posts counts the creates the fake received.
func (f *fakeNova) posts() int {
	n := 0
	for _, r := range f.cloud.Requests() {
		if r.Method == http.MethodPost && r.Route == "POST /v2.1/os-server-groups" {
			n++
		}
	}
	return n
}

var demoGroups = []templates.ServerGroup{
	{Name: "demo-control-plane", Policy: "soft-anti-affinity"},
	{Name: "demo-default-worker", Policy: "anti-affinity"},
	{Name: "demo-gpu", Policy: "affinity"},
}

func TestEnsureCreatesOnceWithPolicyAt264(t *testing.T) {
	nova := startFakeNova(t)
	c := nova.client(t, testToken)
	ctx := context.Background()

	require.NoError(t, c.EnsureServerGroups(ctx, demoGroups))
	assert.Equal(t, "2.64", c.microversion, "the fake advertises 2.93")
	assert.Equal(t, map[string][]string{"demo-control-plane": {"soft-anti-affinity"},
		"demo-default-worker": {"anti-affinity"}, "demo-gpu": {"affinity"}}, nova.groups(t, testToken))
	assert.Equal(t, 3, nova.posts())

	// Second call: a no-op (no create), also with the list repeated and reordered.
	require.NoError(t, c.EnsureServerGroups(ctx, append(slices.Clone(demoGroups), demoGroups[1], demoGroups[0])))
	assert.Equal(t, 3, nova.posts(), "a second Ensure must not create anything")
	assert.Len(t, nova.groups(t, testToken), 3)

	// A new group is added next to the existing ones.
	require.NoError(t, c.EnsureServerGroups(ctx, append(slices.Clone(demoGroups), templates.ServerGroup{Name: "demo-md-2", Policy: "soft-affinity"})))
	assert.Equal(t, 4, nova.posts())
	assert.Equal(t, []string{"soft-affinity"}, nova.groups(t, testToken)["demo-md-2"])

	// The groups are project-a's only.
	assert.Empty(t, nova.groups(t, "token-of-project-b"))
	require.NoError(t, c.EnsureServerGroups(ctx, nil))
}

func TestEnsureFallsBackToPoliciesBefore264(t *testing.T) {
	nova := startFakeNova(t, fakeopenstack.WithComputeMaxMicroversion("2.60"))
	c := nova.client(t, testToken)
	ctx := context.Background()
	require.NoError(t, c.EnsureServerGroups(ctx, demoGroups))
	assert.Equal(t, "2.15", c.microversion)
	assert.Equal(t, []string{"soft-anti-affinity"}, nova.groups(t, testToken)["demo-control-plane"])
	require.NoError(t, c.EnsureServerGroups(ctx, demoGroups))
	assert.Equal(t, 3, nova.posts(), "policies read back from the `policies` list compare equal")
	err := c.EnsureServerGroups(ctx, []templates.ServerGroup{{Name: "demo-gpu", Policy: "anti-affinity"}})
	assert.ErrorIs(t, err, ErrPolicyMismatch)

	// A Nova older than 2.15 has no soft policies: its refusal names the group and the reason.
	old := startFakeNova(t, fakeopenstack.WithComputeMaxMicroversion("2.14"))
	c = old.client(t, testToken)
	err = c.EnsureServerGroups(ctx, demoGroups)
	assert.Equal(t, "", c.microversion, "2.1: no microversion header")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "compute: create server group demo-control-plane: 400 Bad Request: Invalid input for field/attribute policies")
	assert.Contains(t, err.Error(), "'soft-anti-affinity' is not one of ['anti-affinity', 'affinity']")
	assert.Equal(t, map[string][]string{"demo-default-worker": {"anti-affinity"}, "demo-gpu": {"affinity"}}, old.groups(t, testToken),
		"the hard-policy groups are still created")
}

func TestEnsureRefusesAnotherPolicy(t *testing.T) {
	nova := startFakeNova(t)
	nova.create(t, "demo-control-plane", "affinity")
	c := nova.client(t, testToken)
	err := c.EnsureServerGroups(context.Background(), demoGroups)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrPolicyMismatch)
	assert.NotErrorIs(t, err, ErrNotFound)
	assert.Regexp(t, `^compute: ensure server group demo-control-plane: exists in project project-a with policy affinity \(id [0-9a-f-]{36}\), not soft-anti-affinity; Nova cannot change`, err.Error())
	var cerr *Error
	require.ErrorAs(t, err, &cerr)
	assert.Equal(t, "demo-control-plane", cerr.Group)
	// The group is left alone; the others are created.
	assert.Equal(t, map[string][]string{"demo-control-plane": {"affinity"},
		"demo-default-worker": {"anti-affinity"}, "demo-gpu": {"affinity"}}, nova.groups(t, testToken))
}

func TestEnsureReducesDuplicatesToOne(t *testing.T) {
	nova := startFakeNova(t)
	nova.create(t, "demo-control-plane", "soft-anti-affinity")
	nova.create(t, "demo-control-plane", "soft-anti-affinity")
	c := nova.client(t, testToken)
	require.NoError(t, c.EnsureServerGroups(context.Background(), demoGroups[:1]))
	assert.Equal(t, map[string][]string{"demo-control-plane": {"soft-anti-affinity"}}, nova.groups(t, testToken))
}

func TestEnsureReportsNovasRefusals(t *testing.T) {
	nova := startFakeNova(t, fakeopenstack.WithServerGroupQuota(2))
	c := nova.client(t, testToken)
	err := c.EnsureServerGroups(context.Background(), demoGroups)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrForbidden)
	assert.Equal(t, "compute: create server group demo-gpu: 403 Forbidden: Quota exceeded, too many server groups.", err.Error())
	assert.Len(t, nova.groups(t, testToken), 2)

	for _, bad := range [][]templates.ServerGroup{
		{{Name: "", Policy: "affinity"}},
		{{Name: "x", Policy: ""}},
		{{Name: "x", Policy: "affinity"}, {Name: "x", Policy: "anti-affinity"}},
	} {
		err := c.EnsureServerGroups(context.Background(), bad)
		assert.ErrorContains(t, err, "compute: ensure server group", "%v", bad)
	}

	// An invalid token: Keystone's refusal, without the token.
	bad := nova.client(t, "revoked-token-value")
	err = bad.EnsureServerGroups(context.Background(), demoGroups)
	assert.ErrorIs(t, err, ErrUnauthorized)
	assert.Contains(t, err.Error(), "The request you have made requires authentication.")
	assert.NotContains(t, err.Error(), "revoked-token-value")
}

func TestDeleteServerGroups(t *testing.T) {
	nova := startFakeNova(t)
	c := nova.client(t, testToken)
	ctx := context.Background()
	require.NoError(t, c.EnsureServerGroups(ctx, demoGroups))
	nova.create(t, "demo-gpu", "affinity") // a duplicate goes too
	nova.create(t, "other-cluster-control-plane", "affinity")

	require.NoError(t, c.DeleteServerGroups(ctx, []string{"demo-control-plane", "demo-gpu", "demo-never-created"}))
	assert.Equal(t, map[string][]string{"demo-default-worker": {"anti-affinity"},
		"other-cluster-control-plane": {"affinity"}}, nova.groups(t, testToken))

	// Deleting what is gone is fine: by name, and by id (a group deleted between list and delete).
	require.NoError(t, c.DeleteServerGroups(ctx, []string{"demo-control-plane", "demo-gpu"}))
	require.NoError(t, c.DeleteServerGroups(ctx, nil))
	sc, err := c.serverGroupClient(ctx)
	require.NoError(t, err)
	require.NoError(t, c.deleteServerGroup(ctx, sc, servergroups.ServerGroup{ID: "5b3bb2b8-0000-4000-8000-000000000000", Name: "demo-gone"}))

	// Other failures are reported with the group.
	bad := nova.client(t, "revoked-token-value")
	bad.negotiated, bad.microversion = true, "2.64"
	err = bad.DeleteServerGroups(ctx, []string{"demo-default-worker"})
	assert.ErrorIs(t, err, ErrUnauthorized)
	assert.Contains(t, err.Error(), "compute: list server groups of project project-a: 401 Unauthorized")
}

// Nova caps a page at max_limit (1000): a group on the second page must still be found.
func TestListFollowsOffsetPages(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 1001 server groups")
	}
	nova := startFakeNova(t, fakeopenstack.WithServerGroupQuota(-1), fakeopenstack.WithHistory(5000))
	for i := range 1000 {
		nova.create(t, fmt.Sprintf("filler-%04d", i), "affinity")
	}
	nova.create(t, "demo-control-plane", "soft-anti-affinity")
	c := nova.client(t, testToken)
	ctx := context.Background()
	before := nova.posts()
	require.NoError(t, c.EnsureServerGroups(ctx, demoGroups[:1]))
	assert.Equal(t, before, nova.posts(), "the group on page two was found")
	require.NoError(t, c.DeleteServerGroups(ctx, []string{"demo-control-plane"}))
	assert.NotContains(t, nova.groups(t, testToken), "demo-control-plane")
}
