package fakeopenstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tokenCallers maps fixed test tokens to projects; any other token is invalid, "down" is a
// Keystone outage.
func tokenCallers(_ context.Context, token string) (Caller, error) {
	switch token {
	case "token-a":
		return Caller{ProjectID: "project-a", UserID: "user-a"}, nil
	case "token-b":
		return Caller{ProjectID: "project-b", UserID: "user-b"}, nil
	case "down":
		return Caller{}, errors.New("connection refused")
	}
	return Caller{}, ErrInvalidToken
}

func computeServer(t *testing.T, opts ...Option) string {
	t.Helper()
	cloud, err := New(DefaultSeed(), opts...)
	require.NoError(t, err)
	srv := httptest.NewServer(cloud.Handler(ComputeService))
	t.Cleanup(srv.Close)
	return srv.URL
}

// call sends a JSON body (if any) with a token and an optional microversion.
func call(t *testing.T, method, rawURL, token, version string, body any) (response, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("X-Auth-Token", token)
	}
	if version != "" {
		req.Header.Set("X-OpenStack-Nova-API-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var doc map[string]any
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &doc), string(raw))
	}
	return response{status: resp.StatusCode, header: resp.Header, body: raw}, doc
}

func group(name, policy string) map[string]any {
	return map[string]any{"server_group": map[string]any{"name": name, "policy": policy}}
}

func groupPolicies(name, policy string) map[string]any {
	return map[string]any{"server_group": map[string]any{"name": name, "policies": []string{policy}}}
}

func TestComputeVersionDocumentAdvertisesMicroversions(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		max  string
	}{{nil, DefaultComputeMaxMicroversion}, {[]Option{WithComputeMaxMicroversion("2.60")}, "2.60"}} {
		base := computeServer(t, tc.opts...)
		for _, path := range []string{"/v2.1/", "/v2.1"} {
			r, doc := call(t, http.MethodGet, base+path, "", "", nil)
			require.Equal(t, http.StatusOK, r.status, path)
			v := doc["version"].(map[string]any)
			assert.Equal(t, "v2.1", v["id"])
			assert.Equal(t, "CURRENT", v["status"])
			assert.Equal(t, tc.max, v["version"])
			assert.Equal(t, "2.1", v["min_version"])
		}
	}
	_, err := New(DefaultSeed(), WithComputeMaxMicroversion("3"))
	assert.ErrorContains(t, err, `compute max microversion "3"`)
}

func TestServerGroupLifecycleAtMicroversion264(t *testing.T) {
	base := computeServer(t, WithCallers(tokenCallers)) + "/v2.1/os-server-groups"
	r, doc := call(t, http.MethodPost, base, "token-a", "2.64", group("demo-control-plane", "anti-affinity"))
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	assert.Equal(t, "compute 2.64", r.header.Get("OpenStack-API-Version"))
	assert.Equal(t, "2.64", r.header.Get("X-OpenStack-Nova-API-Version"))
	sg := doc["server_group"].(map[string]any)
	id := sg["id"].(string)
	assert.Len(t, id, 36)
	assert.Equal(t, map[string]any{"id": id, "name": "demo-control-plane", "policy": "anti-affinity", "rules": map[string]any{},
		"members": []any{}, "project_id": "project-a", "user_id": "user-a"}, sg)

	r, doc = call(t, http.MethodPost, base, "token-a", "2.64", map[string]any{"server_group": map[string]any{
		"name": "demo-md-0", "policy": "anti-affinity", "rules": map[string]any{"max_server_per_host": 2}}})
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	assert.Equal(t, map[string]any{"max_server_per_host": 2.0}, doc["server_group"].(map[string]any)["rules"])

	r, doc = call(t, http.MethodGet, base, "token-a", "2.64", nil)
	require.Equal(t, http.StatusOK, r.status)
	list := doc["server_groups"].([]any)
	require.Len(t, list, 2)
	assert.Equal(t, "demo-control-plane", list[0].(map[string]any)["name"], "creation order")

	r, doc = call(t, http.MethodGet, base+"/"+id, "token-a", "2.64", nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, sg, doc["server_group"])

	// Another project sees nothing and cannot touch the group.
	r, doc = call(t, http.MethodGet, base, "token-b", "2.64", nil)
	require.Equal(t, http.StatusOK, r.status)
	assert.Empty(t, doc["server_groups"])
	r, _ = call(t, http.MethodGet, base+"/"+id, "token-b", "", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	r, _ = call(t, http.MethodDelete, base+"/"+id, "token-b", "", nil)
	assert.Equal(t, http.StatusNotFound, r.status)

	r, _ = call(t, http.MethodDelete, base+"/"+id, "token-a", "", nil)
	assert.Equal(t, http.StatusNoContent, r.status)
	assert.Empty(t, r.body)
	r, _ = call(t, http.MethodDelete, base+"/"+id, "token-a", "", nil)
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.JSONEq(t, fmt.Sprintf(`{"itemNotFound":{"code":404,"message":"Instance group %s could not be found."}}`, id), string(r.body))
	_, doc = call(t, http.MethodGet, base, "token-a", "", nil)
	assert.Len(t, doc["server_groups"], 1)
}

func TestServerGroupShapeFollowsTheMicroversion(t *testing.T) {
	base := computeServer(t) + "/v2.1/os-server-groups"
	// No microversion: 2.1, the `policies` list, an empty metadata and no project fields.
	r, doc := call(t, http.MethodPost, base, "any-token", "", groupPolicies("old", "affinity"))
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	assert.Equal(t, "compute 2.1", r.header.Get("OpenStack-API-Version"))
	sg := doc["server_group"].(map[string]any)
	assert.Equal(t, []any{"affinity"}, sg["policies"])
	assert.Equal(t, map[string]any{}, sg["metadata"])
	assert.NotContains(t, sg, "policy")
	assert.NotContains(t, sg, "project_id")

	// 2.15 adds the soft policies and (since 2.13) the project fields; 2.64 lists the same group
	// with `policy`. Without WithCallers every token shares one project.
	r, doc = call(t, http.MethodPost, base, "other-token", "2.15", groupPolicies("soft", "soft-anti-affinity"))
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	assert.Equal(t, SharedProjectID, doc["server_group"].(map[string]any)["project_id"])
	_, doc = call(t, http.MethodGet, base, "third-token", "latest", nil)
	list := doc["server_groups"].([]any)
	require.Len(t, list, 2)
	assert.Equal(t, "affinity", list[0].(map[string]any)["policy"])
	assert.Equal(t, "soft-anti-affinity", list[1].(map[string]any)["policy"])
	assert.NotContains(t, list[1], "policies")

	// The standard header form is honoured too.
	req, err := http.NewRequest(http.MethodGet, base, nil)
	require.NoError(t, err)
	req.Header.Set("X-Auth-Token", "t")
	req.Header.Set("OpenStack-API-Version", "volume 3.0, compute 2.70")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "compute 2.70", resp.Header.Get("OpenStack-API-Version"))
}

func TestServerGroupRequestsAreValidatedLikeNova(t *testing.T) {
	base := computeServer(t) + "/v2.1/os-server-groups"
	cases := []struct {
		version string
		body    any
		want    string
	}{
		{"2.64", groupPolicies("x", "affinity"), "Additional properties are not allowed ('policies' was unexpected)"},
		{"2.63", group("x", "affinity"), "Additional properties are not allowed ('policy' was unexpected)"},
		{"2.14", groupPolicies("x", "soft-affinity"), "'soft-affinity' is not one of ['anti-affinity', 'affinity']"},
		{"2.64", group("x", "spread"), "'spread' is not one of ['anti-affinity', 'affinity', 'soft-anti-affinity', 'soft-affinity']"},
		{"2.64", map[string]any{"server_group": map[string]any{"name": "x", "policy": "affinity", "rules": map[string]any{"max_server_per_host": 1}}},
			"Only anti-affinity policy supports rules."},
		{"2.64", map[string]any{"server_group": map[string]any{"name": "x", "policy": "anti-affinity", "rules": map[string]any{"max_server_per_host": 0}}},
			"Invalid input for field/attribute rules"},
		{"2.64", group(" padded", "affinity"), "Invalid input for field/attribute name"},
		{"2.64", group(strings.Repeat("n", 256), "affinity"), "Invalid input for field/attribute name"},
		{"2.64", map[string]any{"server_group": map[string]any{"name": "x"}}, "'policy' is a required property"},
		{"2.1", map[string]any{"server_group": map[string]any{"name": "x", "policies": []string{"affinity", "anti-affinity"}}}, "exactly one policy"},
		{"2.64", map[string]any{"server_group": map[string]any{"name": "x", "policy": "affinity"}, "extra": 1}, "'extra' was unexpected"},
		{"2.64", map[string]any{}, "'server_group' is a required property"},
	}
	for _, tc := range cases {
		r, _ := call(t, http.MethodPost, base, "t", tc.version, tc.body)
		assert.Equal(t, http.StatusBadRequest, r.status, "%v", tc.body)
		assert.Contains(t, string(r.body), `"badRequest"`)
		assert.Contains(t, string(r.body), tc.want)
	}
	r, _ := call(t, http.MethodGet, base+"?limit=x", "t", "", nil)
	assert.Equal(t, http.StatusBadRequest, r.status)
	_, doc := call(t, http.MethodGet, base, "t", "", nil)
	assert.Empty(t, doc["server_groups"], "nothing invalid was created")
}

func TestServerGroupMicroversionNegotiation(t *testing.T) {
	base := computeServer(t, WithComputeMaxMicroversion("2.60")) + "/v2.1/os-server-groups"
	r, _ := call(t, http.MethodGet, base, "t", "2.64", nil)
	assert.Equal(t, http.StatusNotAcceptable, r.status)
	assert.JSONEq(t, `{"computeFault":{"code":406,"message":"Version 2.64 is not supported by the API. Minimum is 2.1 and maximum is 2.60."}}`, string(r.body))
	r, _ = call(t, http.MethodGet, base, "t", "2.0", nil)
	assert.Equal(t, http.StatusNotAcceptable, r.status)
	r, _ = call(t, http.MethodGet, base, "t", "two", nil)
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Contains(t, string(r.body), "is of invalid format")
	r, _ = call(t, http.MethodGet, base, "t", "latest", nil)
	assert.Equal(t, http.StatusOK, r.status)
	assert.Equal(t, "2.60", r.header.Get("X-OpenStack-Nova-API-Version"))
}

func TestServerGroupsNeedAValidToken(t *testing.T) {
	base := computeServer(t, WithCallers(tokenCallers)) + "/v2.1/os-server-groups"
	for _, token := range []string{"", "expired"} {
		r, _ := call(t, http.MethodGet, base, token, "", nil)
		assert.Equal(t, http.StatusUnauthorized, r.status, token)
		assert.JSONEq(t, `{"error":{"code":401,"title":"Unauthorized","message":"The request you have made requires authentication."}}`, string(r.body))
		r, _ = call(t, http.MethodPost, base, token, "2.64", group("x", "affinity"))
		assert.Equal(t, http.StatusUnauthorized, r.status, token)
	}
	r, _ := call(t, http.MethodGet, base, "down", "", nil)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	// Without a token even the default (shared project) refuses, as Nova does.
	r, _ = call(t, http.MethodGet, computeServer(t)+"/v2.1/os-server-groups", "", "", nil)
	assert.Equal(t, http.StatusUnauthorized, r.status)
}

func TestServerGroupQuotaAndPagination(t *testing.T) {
	base := computeServer(t, WithCallers(tokenCallers), WithServerGroupQuota(3)) + "/v2.1/os-server-groups"
	for i := range 3 {
		r, _ := call(t, http.MethodPost, base, "token-a", "2.64", group(fmt.Sprintf("g%d", i), "soft-anti-affinity"))
		require.Equal(t, http.StatusOK, r.status)
	}
	r, _ := call(t, http.MethodPost, base, "token-a", "2.64", group("g3", "soft-anti-affinity"))
	assert.Equal(t, http.StatusForbidden, r.status)
	assert.JSONEq(t, `{"forbidden":{"code":403,"message":"Quota exceeded, too many server groups."}}`, string(r.body))
	r, _ = call(t, http.MethodPost, base, "token-b", "2.64", group("g3", "soft-anti-affinity"))
	assert.Equal(t, http.StatusOK, r.status, "the quota is per project")

	names := func(query string) []string {
		_, doc := call(t, http.MethodGet, base+query, "token-a", "2.64", nil)
		var out []string
		for _, g := range doc["server_groups"].([]any) {
			out = append(out, g.(map[string]any)["name"].(string))
		}
		return out
	}
	assert.Equal(t, []string{"g0", "g1", "g2"}, names(""))
	assert.Equal(t, []string{"g1"}, names("?limit=1&offset=1"))
	assert.Equal(t, []string{"g2"}, names("?offset=2"))
	assert.Empty(t, names("?offset=3"))
	assert.Equal(t, []string{"g0", "g1", "g2"}, names("?all_projects=True"), "non-admin callers see their own project only")
}
