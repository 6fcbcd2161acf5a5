package app

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
)

const keystoneAuthtoken = `
[keystone_authtoken]
auth_url = http://127.0.0.1:5000/v3
username = magnum
password = secret
project_name = service
`

func TestTenantViewAndDiscoveryOptions(t *testing.T) {
	o, err := quotaOptions(t, "")
	require.NoError(t, err)
	require.Nil(t, o.Bridge.TenantView, "off by default")
	require.Nil(t, o.Bridge.Discovery, "off by default")

	f, err := config.Parse(quotaBase + "tenant_view = true\ntoken_webhook_bind = 127.0.0.1:9514\ntenant_view_cache_ttl = 5\n" +
		"discovery_bind = 127.0.0.1:9513\ntenant_view_server = https://mgmt.example:6443\n" + keystoneAuthtoken)
	require.NoError(t, err)
	o, err = optionsFrom(f, nil)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9514", o.Bridge.TenantView.WebhookBind)
	require.Equal(t, 5*time.Second, o.Bridge.TenantView.CacheTTL)
	require.Equal(t, "http://127.0.0.1:5000/v3", o.Bridge.TenantView.KeystoneURL)
	require.Equal(t, "127.0.0.1:9513", o.Bridge.Discovery.Bind)
	require.Equal(t, "https://mgmt.example:6443", o.Bridge.Discovery.Server)
	require.Equal(t, time.Minute, o.Bridge.Discovery.CacheTTL)
	require.False(t, o.Bridge.TenantView.TenantAPI, "off by default")

	f, err = config.Parse(quotaBase + "tenant_view = true\ntenant_api = true\ncloud_region_name = RegionOne\n" + keystoneAuthtoken)
	require.NoError(t, err)
	o, err = optionsFrom(f, nil)
	require.NoError(t, err)
	require.True(t, o.Bridge.TenantView.TenantAPI)
	require.Equal(t, "RegionOne", o.Bridge.TenantView.TenantAPIRegion, "the cloud's region unless tenant_api_region_name says")
	f, err = config.Parse(quotaBase + "tenant_view = true\ntenant_api = true\ncloud_region_name = RegionOne\ntenant_api_region_name = RegionTwo\n" + keystoneAuthtoken)
	require.NoError(t, err)
	o, err = optionsFrom(f, nil)
	require.NoError(t, err)
	require.Equal(t, "RegionTwo", o.Bridge.TenantView.TenantAPIRegion)
}

func TestTenantViewOptionErrors(t *testing.T) {
	cases := map[string]struct{ lines, key string }{
		"plain HTTP off loopback": {"tenant_view = true\ntoken_webhook_bind = 0.0.0.0:9514\n" + keystoneAuthtoken, "token_webhook_bind"},
		"bad bind":                {"tenant_view = true\ntoken_webhook_bind = 9514\n" + keystoneAuthtoken, "token_webhook_bind"},
		"cert without key":        {"tenant_view = true\ntoken_webhook_cert_file = /etc/hostname\n" + keystoneAuthtoken, "token_webhook_cert_file"},
		"missing cert":            {"tenant_view = true\ntoken_webhook_cert_file = /nonexistent\ntoken_webhook_key_file = /nonexistent\n" + keystoneAuthtoken, "token_webhook_cert_file"},
		"no service user":         {"tenant_view = true\n", "auth_url"},
		"not a bool":              {"tenant_view = maybe\n", "tenant_view"},
		"bad discovery bind":      {"discovery_bind = nowhere\n" + keystoneAuthtoken, "discovery_bind"},
		"http server":             {"discovery_bind = 127.0.0.1:9513\ntenant_view_server = http://x\n" + keystoneAuthtoken, "tenant_view_server"},
		"bad ttl":                 {"discovery_bind = 127.0.0.1:9513\ndiscovery_cache_ttl = soon\n" + keystoneAuthtoken, "discovery_cache_ttl"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := config.Parse(quotaBase + tc.lines)
			require.NoError(t, err)
			_, err = optionsFrom(f, nil)
			require.Error(t, err)
			var ce *config.Error
			require.True(t, errors.As(err, &ce), "%T %v", err, err)
			require.Equal(t, tc.key, ce.Key, err.Error())
			require.NotContains(t, err.Error(), "secret")
		})
	}
}
