package conductor

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
)

// Keystone's refusals end a create or delete with a reason; outages are retried.
func TestCloudErrorsArePermanentOnlyWhenKeystoneRefused(t *testing.T) {
	cases := map[string]struct {
		err       error
		permanent bool
	}{
		"missing role (checked before asking)": {&keystone.Error{Op: "create application credential", Message: "no role"}, true},
		"forbidden":                            {&keystone.Error{Op: "delete", StatusCode: http.StatusForbidden}, true},
		"expired token":                        {&keystone.Error{Op: "validate token", StatusCode: http.StatusUnauthorized}, true},
		"keystone down":                        {&keystone.Error{Op: "validate token", Err: errors.New("connection refused")}, false},
		"keystone failing":                     {&keystone.Error{Op: "create", StatusCode: http.StatusServiceUnavailable}, false},
		"rate limited":                         {&keystone.Error{Op: "create", StatusCode: http.StatusTooManyRequests}, false},
		"role the token holds denied (Keystone under concurrent creates)": {&keystone.Error{Op: "create application credential",
			StatusCode: http.StatusBadRequest, Message: "Invalid application credential: Cannot create an application credential with unassigned role"}, false},
		"other bad request":     {&keystone.Error{Op: "create application credential", StatusCode: http.StatusBadRequest, Message: "Invalid input"}, true},
		"joined, first refused": {errors.Join(&keystone.Error{Op: "delete", StatusCode: http.StatusForbidden}, errors.New("x")), true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := cloudError("deleting the cluster's application credentials failed", c.err)
			require.Equal(t, c.permanent, permanent(err))
			if c.permanent {
				require.Contains(t, New(nil, nil, nil, Options{}).reasonFor("c", err), "deleting the cluster's application credentials failed")
			}
		})
	}
}

// The CAPO Secret is what CAPO's identityRef names; both Secrets record which credentials they hold.
func TestCloudConfigSecrets(t *testing.T) {
	refs := []keystone.CredentialRef{{ID: "a", Name: "magnum-x-capo", UserID: "u"}, {ID: "b", Name: "magnum-x-workload", UserID: "u"}}
	secrets, err := cloudConfigSecrets("demo-abc123", &IssuedCredentials{Refs: refs, CAPOCloudsYAML: []byte("capo"),
		WorkloadCloudsYAML: []byte("workload")})
	require.NoError(t, err)
	require.Len(t, secrets, 2)
	require.Equal(t, "demo-abc123-cloud-config", secrets[0].Name)
	require.Equal(t, "capo", string(secrets[0].Data["clouds.yaml"]))
	require.Equal(t, "demo-abc123-workload-cloud-config", secrets[1].Name)
	require.Equal(t, "workload", string(secrets[1].Data["clouds.yaml"]))
	require.NotContains(t, secrets[0].Data, "cacert", "no CA bundle configured, no cacert key")
	var back []keystone.CredentialRef
	require.NoError(t, json.Unmarshal(secrets[0].Data[credentialRefsKey], &back))
	require.Equal(t, refs, back)

	secrets, err = cloudConfigSecrets("c", &IssuedCredentials{Refs: refs, CACert: []byte("PEM")})
	require.NoError(t, err)
	require.Equal(t, "PEM", string(secrets[0].Data["cacert"]))
	require.Equal(t, "PEM", string(secrets[1].Data["cacert"]))
}
