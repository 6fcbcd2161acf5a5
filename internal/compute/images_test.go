package compute

// Looking a template's image up in the fake Glance of test/fakeopenstack, in process, as
// project-a (servergroups_test.go's tokens).

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

func glanceClient(t *testing.T, seed fakeopenstack.Seed) *Client {
	t.Helper()
	cloud, err := fakeopenstack.New(seed, fakeopenstack.WithCallers(projectOfToken))
	require.NoError(t, err)
	srv := httptest.NewServer(cloud.Handler(fakeopenstack.ImageService))
	t.Cleanup(srv.Close)
	provider, err := openstack.NewClient(srv.URL + "/")
	require.NoError(t, err)
	provider.HTTPClient = http.Client{Timeout: 10 * time.Second}
	provider.SetToken(testToken)
	provider.EndpointLocator = func(gophercloud.EndpointOpts) (string, error) { return srv.URL + "/", nil }
	return &Client{provider: provider, projectID: "project-a", scrub: []string{testToken}}
}

func TestFindImage(t *testing.T) {
	seed := fakeopenstack.DefaultSeed().Merge(fakeopenstack.Seed{Images: []fakeopenstack.Image{
		{ID: "11111111-0000-4000-8000-000000000001", Name: "twin", Visibility: "public"},
		{ID: "11111111-0000-4000-8000-000000000002", Name: "twin", Visibility: "public"},
		{ID: "11111111-0000-4000-8000-000000000003", Name: "no-property", Visibility: "public"},
	}})
	c := glanceClient(t, seed)
	ctx := context.Background()

	img, err := c.FindImage(ctx, fakeopenstack.ImageKube1363ID)
	require.NoError(t, err)
	require.Equal(t, &Image{ID: fakeopenstack.ImageKube1363ID, Name: "ubuntu-2404-kube-v1.36.3", KubeVersion: "v1.36.3"}, img, "by ID")

	img, err = c.FindImage(ctx, "ubuntu-2404-kube-v1.35.4")
	require.NoError(t, err)
	require.Equal(t, &Image{ID: fakeopenstack.ImageKube1354ID, Name: "ubuntu-2404-kube-v1.35.4", KubeVersion: "v1.35.4"}, img, "by name")

	img, err = c.FindImage(ctx, "no-property")
	require.NoError(t, err)
	require.Empty(t, img.KubeVersion)

	_, err = c.FindImage(ctx, "twin")
	require.ErrorContains(t, err, "2 images have that name")
	require.NotErrorIs(t, err, ErrNotFound)

	for _, missing := range []string{"nothing-of-that-name", "22222222-0000-4000-8000-000000000009"} {
		_, err = c.FindImage(ctx, missing)
		require.ErrorIs(t, err, ErrNotFound, missing)
		require.ErrorContains(t, err, "compute: look up image "+missing)
		require.NotContains(t, err.Error(), testToken)
	}
}
