package compute

// Releasing CAPO's leftover floating IPs against the fake Neutron of test/fakeopenstack, in
// process, as project-a (servergroups_test.go's tokens).

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack"
)

type fakeNeutron struct{ url string }

func startFakeNeutron(t *testing.T) *fakeNeutron {
	t.Helper()
	cloud, err := fakeopenstack.New(fakeopenstack.DefaultSeed(), fakeopenstack.WithCallers(projectOfToken))
	require.NoError(t, err)
	srv := httptest.NewServer(cloud.Handler(fakeopenstack.NetworkService))
	t.Cleanup(srv.Close)
	return &fakeNeutron{url: srv.URL + "/"}
}

// client is a Client of project-a whose catalog has only this Neutron.
func (f *fakeNeutron) client(t *testing.T) *Client {
	t.Helper()
	provider, err := openstack.NewClient(f.url)
	require.NoError(t, err)
	provider.HTTPClient = http.Client{Timeout: 10 * time.Second}
	provider.SetToken(testToken)
	provider.EndpointLocator = func(gophercloud.EndpointOpts) (string, error) { return f.url, nil }
	return &Client{provider: provider, projectID: "project-a", scrub: []string{testToken}}
}

// post creates a Neutron resource as the token's project and returns its document.
func (f *fakeNeutron) post(t *testing.T, token, collection, kind string, body map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(map[string]any{kind: body})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, f.url+"v2.0/"+collection, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("X-Auth-Token", token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "POST %s", collection)
	var out map[string]map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out[kind]
}

func (f *fakeNeutron) addresses(t *testing.T, token string) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.url+"v2.0/floatingips", nil)
	require.NoError(t, err)
	req.Header.Set("X-Auth-Token", token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		FloatingIPs []struct {
			Address string `json:"floating_ip_address"`
		} `json:"floatingips"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	var addrs []string
	for _, f := range out.FloatingIPs {
		addrs = append(addrs, f.Address)
	}
	return addrs
}

// The API address CAPO allocated for a cluster whose control plane never had a server is released;
// an address still attached, another cluster's, and another project's are not.
func TestReleaseLeftoverFloatingIPs(t *testing.T) {
	neutron := startFakeNeutron(t)
	const public = "9b1c0e7a-0000-4000-8000-0000000000e1" // the seed's external network
	fip := func(token, description string, extra map[string]any) string {
		body := map[string]any{"floating_network_id": public, "description": description}
		for k, v := range extra {
			body[k] = v
		}
		return neutron.post(t, token, "floatingips", "floatingip", body)["floating_ip_address"].(string)
	}
	const mine = "magnum-p-os1-af0928e2"
	leaked := fip(testToken, capoFloatingIPDescription+mine, nil)
	network := neutron.post(t, testToken, "networks", "network", map[string]any{"name": "n"})
	neutron.post(t, testToken, "subnets", "subnet", map[string]any{"network_id": network["id"], "cidr": "10.0.0.0/24", "ip_version": 4})
	port := neutron.post(t, testToken, "ports", "port", map[string]any{"network_id": network["id"]})
	attached := fip(testToken, capoFloatingIPDescription+mine, map[string]any{"port_id": port["id"]})
	other := fip(testToken, capoFloatingIPDescription+mine+"-x", nil)
	elsewhere := fip("token-of-project-b", capoFloatingIPDescription+mine, nil)

	released, err := neutron.client(t).ReleaseLeftoverFloatingIPs(context.Background(), mine)
	require.NoError(t, err)
	require.Equal(t, []string{leaked}, released)
	require.ElementsMatch(t, []string{attached, other}, neutron.addresses(t, testToken))
	require.Equal(t, []string{elsewhere}, neutron.addresses(t, "token-of-project-b"))

	released, err = neutron.client(t).ReleaseLeftoverFloatingIPs(context.Background(), mine)
	require.NoError(t, err)
	require.Empty(t, released, "a second delete finds nothing to release")
}
