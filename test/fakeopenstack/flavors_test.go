package fakeopenstack

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/stretchr/testify/require"
)

// A flavor created with gophercloud is listed, refused twice, and gone after its delete.
func TestCreateAndDeleteFlavor(t *testing.T) {
	c, err := New(DefaultSeed())
	require.NoError(t, err)
	srv := httptest.NewServer(c.Handler(ComputeService))
	defer srv.Close()
	compute := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{}, Endpoint: srv.URL + "/v2.1/"}
	ctx := context.Background()
	names := func() []string {
		pages, err := flavors.ListDetail(compute, nil).AllPages(ctx)
		require.NoError(t, err)
		fl, err := flavors.ExtractFlavors(pages)
		require.NoError(t, err)
		var out []string
		for _, f := range fl {
			out = append(out, f.Name)
		}
		return out
	}
	public := true
	f, err := flavors.Create(ctx, compute, flavors.CreateOpts{Name: "m1.xlarge", VCPUs: 8, RAM: 16384, Disk: gophercloud.IntToPointer(160), IsPublic: &public}).Extract()
	require.NoError(t, err)
	require.Equal(t, 8, f.VCPUs)
	require.True(t, f.IsPublic)
	require.Equal(t, []string{"m1.small", "m1.medium", "m1.large", "m1.xlarge"}, names())

	_, err = flavors.Create(ctx, compute, flavors.CreateOpts{Name: "m1.xlarge", VCPUs: 8, RAM: 16384, Disk: gophercloud.IntToPointer(1)}).Extract()
	require.ErrorContains(t, err, "duplicate")
	_, err = flavors.Create(ctx, compute, flavors.CreateOpts{Name: "zero", VCPUs: 0, RAM: 1, Disk: gophercloud.IntToPointer(1)}).Extract()
	require.Error(t, err)

	require.NoError(t, flavors.Delete(ctx, compute, f.ID).ExtractErr())
	require.Equal(t, []string{"m1.small", "m1.medium", "m1.large"}, names())
	require.Error(t, flavors.Delete(ctx, compute, f.ID).ExtractErr())
}
