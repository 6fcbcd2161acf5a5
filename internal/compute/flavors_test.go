package compute

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack"
)

func TestFindFlavor(t *testing.T) {
	seed := fakeopenstack.DefaultSeed().Merge(fakeopenstack.Seed{Flavors: []fakeopenstack.Flavor{
		{ID: "g1", Name: "g1.large", VCPUs: 8, RAM: 32768, Disk: 100, ExtraSpecs: map[string]string{"resources:VGPU": "1"}},
	}})
	cloud, err := fakeopenstack.New(seed, fakeopenstack.WithCallers(projectOfToken))
	require.NoError(t, err)
	srv := httptest.NewServer(cloud.Handler(fakeopenstack.ComputeService))
	t.Cleanup(srv.Close)
	provider, err := openstack.NewClient(srv.URL + "/v2.1/")
	require.NoError(t, err)
	provider.HTTPClient = http.Client{Timeout: 10 * time.Second}
	provider.SetToken(testToken)
	c := &Client{compute: &gophercloud.ServiceClient{ProviderClient: provider, Endpoint: srv.URL + "/v2.1/", Type: "compute"},
		projectID: "project-a", scrub: []string{testToken}}
	ctx := context.Background()

	f, err := c.FindFlavor(ctx, "m1.medium")
	require.NoError(t, err)
	require.Equal(t, &Flavor{ID: "3", Name: "m1.medium", VCPUs: 2, RAMMiB: 4096, DiskGiB: 40, ExtraSpecs: map[string]string{}}, f, "by name")

	f, err = c.FindFlavor(ctx, "g1")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"resources:VGPU": "1"}, f.ExtraSpecs, "by ID, with its extra specs")
	require.Equal(t, 32768, f.RAMMiB)

	_, err = c.FindFlavor(ctx, "nothing-of-that-name")
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorContains(t, err, "compute: look up flavor nothing-of-that-name")
	require.NotContains(t, err.Error(), testToken)
}
