package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/test/fakeopenstack"
)

func TestKubernetesVersionOptions(t *testing.T) {
	o, err := quotaOptions(t, "")
	require.NoError(t, err)
	require.False(t, o.Bridge.AllowKubeTagImageMismatch, "refused by default")
	require.Equal(t, addons.SupportedKubernetesVersions(), o.Bridge.KubernetesVersions)

	o, err = quotaOptions(t, "allow_kube_tag_image_mismatch = true\n")
	require.NoError(t, err)
	require.True(t, o.Bridge.AllowKubeTagImageMismatch)

	_, err = quotaOptions(t, "allow_kube_tag_image_mismatch = maybe\n")
	var ce *config.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "allow_kube_tag_image_mismatch", ce.Key)

	_, err = quotaOptions(t, "default_kubernetes_version = v1.29.6\n")
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "default_kubernetes_version", ce.Key)
	require.Contains(t, err.Error(), "outside the Kubernetes versions the bridge supports (v1.31 to v1.36")
}

// The conductor's Glance lookup acts as the request's token, finds Glance in the token's catalog
// and keeps an answer for a minute.
func TestGlanceImagesAsTheRequestsToken(t *testing.T) {
	const token = "token-of-the-demo-project"
	cloud, err := fakeopenstack.New(fakeopenstack.DefaultSeed(), fakeopenstack.WithCallers(func(_ context.Context, tok string) (fakeopenstack.Caller, error) {
		if tok != token {
			return fakeopenstack.Caller{}, fakeopenstack.ErrInvalidToken
		}
		return fakeopenstack.Caller{ProjectID: "demo", UserID: "u"}, nil
	}))
	require.NoError(t, err)
	var gets atomic.Int32
	glance := cloud.Handler(fakeopenstack.ImageService)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		glance.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	info, err := json.Marshal(map[string]any{"token": map[string]any{"project": map[string]any{"id": "demo"}, "catalog": []any{
		map[string]any{"type": "compute", "name": "nova", "endpoints": []any{map[string]any{"interface": "public", "region_id": "RegionOne", "region": "RegionOne", "url": "http://127.0.0.1:1/v2.1"}}},
		map[string]any{"type": "image", "name": "glance", "endpoints": []any{map[string]any{"interface": "public", "region_id": "RegionOne", "region": "RegionOne", "url": srv.URL}}},
	}}})
	require.NoError(t, err)
	caller := &rpc.Context{AuthToken: token, AuthTokenInfo: info, ProjectID: "demo"}

	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	g := newGlanceImages(novaServerGroups{region: "RegionOne", iface: "public"})
	g.now = func() time.Time { return now }
	ctx := context.Background()
	img, err := g.FindImage(ctx, caller, "demo", fakeopenstack.ImageKube1354ID)
	require.NoError(t, err)
	require.Equal(t, templates.Image{Name: "ubuntu-2404-kube-v1.35.4", KubeVersion: "v1.35.4"}, img)
	_, err = g.FindImage(ctx, caller, "demo", fakeopenstack.ImageKube1354ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, gets.Load(), "the second answer is the cached one")
	now = now.Add(imageCacheTTL)
	_, err = g.FindImage(ctx, caller, "demo", fakeopenstack.ImageKube1354ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, gets.Load(), "asked again after the TTL")

	_, err = g.FindImage(ctx, caller, "demo", "no-such-image")
	require.Error(t, err)
	_, err = g.FindImage(ctx, caller, "another-project", "ubuntu-2404-kube-v1.36.3")
	require.ErrorContains(t, err, "scoped to project demo", "another project's token is not used")
}
