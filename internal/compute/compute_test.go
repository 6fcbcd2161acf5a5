package compute

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
)

const testSecret = "s3cr3t-application-credential-secret"

func rendered(t *testing.T, p keystone.CloudsYAMLParams) []byte {
	t.Helper()
	if p.AuthURL == "" {
		p.AuthURL = "https://keystone.example:5000/v3"
	}
	p.ApplicationCredentialID = "0123456789abcdef0123456789abcdef"
	p.ApplicationCredentialSecret = keystone.NewSecret(testSecret)
	out, err := keystone.RenderCloudsYAML(p)
	require.NoError(t, err)
	return out
}

func TestParseWhatTheBridgeRenders(t *testing.T) {
	cfg, err := parseCloudsYAML(rendered(t, keystone.CloudsYAMLParams{RegionName: "RegionTwo", Interface: "internal", CACertFile: "/etc/certs/ca.pem"}), keystone.CloudName)
	require.NoError(t, err)
	assert.Equal(t, "https://keystone.example:5000/v3", cfg.authURL)
	assert.Equal(t, "0123456789abcdef0123456789abcdef", cfg.auth.ApplicationCredentialID)
	assert.Equal(t, testSecret, cfg.auth.ApplicationCredentialSecret)
	assert.True(t, cfg.auth.AllowReauth)
	assert.Equal(t, "RegionTwo", cfg.region)
	assert.Equal(t, gophercloud.AvailabilityInternal, cfg.availability)
	assert.False(t, cfg.insecure)

	cfg, err = parseCloudsYAML(rendered(t, keystone.CloudsYAMLParams{}), keystone.CloudName)
	require.NoError(t, err)
	assert.Equal(t, "", cfg.region, "no region: any")
	assert.Equal(t, gophercloud.AvailabilityPublic, cfg.availability)
}

func TestParseOtherApplicationCredentialForms(t *testing.T) {
	byName := `clouds:
  mine:
    auth:
      auth_url: http://127.0.0.1:5000/v3
      application_credential_name: capo
      application_credential_secret: ` + testSecret + `
      username: demo
    auth_type: v3applicationcredential
    verify: false
    interface: admin
`
	cfg, err := parseCloudsYAML([]byte(byName), "mine")
	require.NoError(t, err)
	assert.Equal(t, "capo", cfg.auth.ApplicationCredentialName)
	assert.Equal(t, "demo", cfg.auth.Username)
	assert.Equal(t, "default", cfg.auth.DomainID, "keystoneauth's default user domain")
	assert.True(t, cfg.insecure)
	assert.Equal(t, gophercloud.AvailabilityAdmin, cfg.availability)
}

func TestParseRefusesWhatItCannotUse(t *testing.T) {
	good := string(rendered(t, keystone.CloudsYAMLParams{}))
	cases := map[string]struct{ yaml, cloud, want string }{
		"empty":        {"", keystone.CloudName, "empty clouds.yaml"},
		"not yaml":     {"clouds: [" + testSecret, keystone.CloudName, "clouds.yaml is not valid YAML"},
		"other cloud":  {good, "devstack", "cloud devstack does not exist in clouds.yaml"},
		"password":     {strings.Replace(good, "v3applicationcredential", "password", 1), keystone.CloudName, `auth_type "password"`},
		"no secret":    {strings.Replace(good, testSecret, "", 1), keystone.CloudName, "no application_credential_secret"},
		"no id":        {strings.Replace(good, "0123456789abcdef0123456789abcdef", "", 1), keystone.CloudName, "names no application credential"},
		"relative url": {strings.Replace(good, "https://keystone.example:5000/v3", "keystone:5000", 1), keystone.CloudName, "is not an absolute http(s) URL"},
		"interface":    {strings.Replace(good, "interface: public", "interface: private", 1), keystone.CloudName, `interface "private"`},
	}
	for name, tc := range cases {
		_, err := parseCloudsYAML([]byte(tc.yaml), tc.cloud)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "compute: read clouds.yaml: ", name)
		assert.Contains(t, err.Error(), tc.want, name)
		assert.NotContains(t, fmt.Sprintf("%v %+v %#v", err, err, err), testSecret, name)
	}
}

func TestConstructorErrorsNeverCarryTheSecret(t *testing.T) {
	ctx := context.Background()
	// Nobody listens on port 1: the transport error names the URL, never the secret.
	yaml := rendered(t, keystone.CloudsYAMLParams{AuthURL: "http://127.0.0.1:1/v3"})
	_, err := NewFromCloudsYAML(ctx, yaml, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "compute: authenticate as application credential 0123456789abcdef0123456789abcdef: ")
	assert.NotContains(t, fmt.Sprintf("%v %+v", err, err), testSecret)

	_, err = NewFromCloudsYAML(ctx, yaml, []byte("not a certificate"))
	assert.EqualError(t, err, "compute: configure client: the CA bundle holds no PEM certificate")
	_, err = NewFromCloudsYAML(ctx, yaml, nil, WithCloud("elsewhere"))
	assert.ErrorContains(t, err, "cloud elsewhere does not exist")
}

func TestNewFromTokenRefusesWhatItCannotUse(t *testing.T) {
	const token = "gAAAAAB-the-users-token"
	body := func(project, catalog string) []byte {
		return []byte(`{"token": {"project": ` + project + `, "catalog": ` + catalog + `}}`)
	}
	compute := `[{"type": "compute", "name": "nova", "endpoints": [{"interface": "public", "region_id": "RegionOne", "region": "RegionOne", "url": "http://nova.example/v2.1"}]}]`
	cases := map[string]struct {
		token Token
		want  string
	}{
		"no token":     {Token{Info: body(`{"id": "p"}`, compute)}, "the request carries no token"},
		"no body":      {Token{Value: token}, "no token body (auth_token_info)"},
		"not a body":   {Token{Value: token, Info: []byte(`{"access": {}}`)}, "no token body (auth_token_info)"},
		"unscoped":     {Token{Value: token, Info: body(`null`, compute)}, "the token is not project-scoped"},
		"no catalog":   {Token{Value: token, Info: body(`{"id": "p"}`, `[]`)}, "the token's body has no catalog"},
		"interface":    {Token{Value: token, Info: body(`{"id": "p"}`, compute), Interface: "private"}, `interface "private"`},
		"other region": {Token{Value: token, Info: body(`{"id": "p"}`, compute), Region: "RegionTwo"}, "the catalog of project p has no compute endpoint with interface public in RegionTwo"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.token.AuthURL = "http://keystone.example/v3"
			_, err := NewFromToken(tc.token, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, fmt.Sprintf("%v %+v", err, err), token)
		})
	}
	c, err := NewFromToken(Token{AuthURL: "http://keystone.example/v3", Value: token, Info: body(`{"id": "p"}`, compute), Region: "RegionOne"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "p", c.ProjectID())
	assert.Equal(t, "http://nova.example/v2.1/", c.Endpoint())
}
