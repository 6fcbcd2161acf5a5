package barbican

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
)

// Each Magnum release's dialect: python-barbicanclient up to 2026.1, openstacksdk from 2026.2.
func TestDialectFor(t *testing.T) {
	for release, want := range map[string]Dialect{
		"": DialectBarbicanClient, "zed": DialectBarbicanClient, "2023.2": DialectBarbicanClient,
		"2026.1": DialectBarbicanClient, "22": DialectBarbicanClient,
		"2026.2": DialectOpenStackSDK, "23": DialectOpenStackSDK, " Master ": DialectOpenStackSDK,
	} {
		got, err := DialectFor(release)
		require.NoError(t, err, release)
		assert.Equal(t, want, got, release)
	}
	_, err := DialectFor("kilo")
	require.Error(t, err)
}

// Certificates and keys are stored as python-barbicanclient stores Magnum's bytes (octet-stream,
// base64 in the request) or as openstacksdk's Magnum stores its text; the passphrase is text in
// both.
func TestSecretRequests(t *testing.T) {
	pem := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
	old := DialectBarbicanClient.secretOpts("Certificate", pem, true)
	assert.Equal(t, "application/octet-stream", old.PayloadContentType)
	assert.Equal(t, "base64", old.PayloadContentEncoding)
	decoded, err := base64.StdEncoding.DecodeString(old.Payload)
	require.NoError(t, err)
	assert.Equal(t, pem, string(decoded))
	assert.Equal(t, "Certificate", old.Name)
	assert.Nil(t, old.Expiration, "Magnum stores no expiration")

	sdk := DialectOpenStackSDK.secretOpts("Certificate", pem, true)
	assert.Equal(t, "text/plain", sdk.PayloadContentType)
	assert.Empty(t, sdk.PayloadContentEncoding)
	assert.Equal(t, pem, sdk.Payload)

	for _, d := range []Dialect{DialectBarbicanClient, DialectOpenStackSDK} {
		pass := d.secretOpts("Private Key Passphrase", "abcdefghijkl", false)
		assert.Equal(t, [2]string{"text/plain", "abcdefghijkl"}, [2]string{pass.PayloadContentType, pass.Payload})
	}
}

// Magnum's endpoint_type values and the plain interface names.
func TestAvailability(t *testing.T) {
	for in, want := range map[string]gophercloud.Availability{
		"": gophercloud.AvailabilityPublic, "publicURL": gophercloud.AvailabilityPublic, "public": gophercloud.AvailabilityPublic,
		"internalURL": gophercloud.AvailabilityInternal, "adminURL": gophercloud.AvailabilityAdmin, "admin": gophercloud.AvailabilityAdmin,
	} {
		got, err := Availability(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := Availability("nearest")
	require.Error(t, err)
}

// Refs are hrefs whose last segment is the uuid (as Magnum reads them), or a bare uuid; anything
// else is refused before a request is made.
func TestIDOf(t *testing.T) {
	id := "1b4d0f8e-3a2c-4f6e-9d7a-5c8b2e1f0a93"
	for _, ref := range []string{"https://kms.example:9311/v1/containers/" + id, "http://127.0.0.1:9311/v1/containers/" + id + "/", id} {
		got, err := idOf("container", ref)
		require.NoError(t, err, ref)
		assert.Equal(t, id, got)
	}
	for _, ref := range []string{"", "https://kms.example:9311/v1/containers/not-a-uuid", "https://kms.example:9311/v1/secrets/" + id} {
		_, err := idOf("container", ref)
		var be *Error
		require.ErrorAs(t, err, &be, ref)
		assert.Contains(t, err.Error(), "Barbican")
	}
}

// An error names Barbican, the operation and the ref for the operator; Brief keeps the URL out for
// a tenant; a 404 is certs' not-found, and a 403 says it is Barbican's policy.
func TestErrorMessages(t *testing.T) {
	ref := "http://127.0.0.1:9311/v1/containers/1b4d0f8e-3a2c-4f6e-9d7a-5c8b2e1f0a93"
	missing := newError("read certificate container", ref, gophercloud.ErrUnexpectedResponseCode{
		Expected: []int{200}, Actual: http.StatusNotFound,
		Body: []byte(`{"code": 404, "title": "Not Found", "description": "Not Found. Sorry but your container is in another castle."}`)})
	assert.Equal(t, "Barbican: read certificate container "+ref+": 404 Not Found: Not Found. Sorry but your container is in another castle.", missing.Error())
	assert.Equal(t, "read certificate container 1b4d0f8e-3a2c-4f6e-9d7a-5c8b2e1f0a93: Not Found", missing.Brief())
	assert.ErrorIs(t, fmt.Errorf("wrapped: %w", missing), certs.ErrKeyPairNotFound)

	refused := newError(`store secret "Certificate" of container "k8s"`, "", gophercloud.ErrUnexpectedResponseCode{
		Actual: http.StatusForbidden, Body: []byte(`{"code": 403, "title": "Forbidden", "description": "SecretCreate attempt not allowed - please review your user/project privileges"}`)})
	assert.Contains(t, refused.Error(), "403 Forbidden")
	assert.Contains(t, refused.Error(), "refused by Barbican's policy")
	assert.NotErrorIs(t, refused, certs.ErrKeyPairNotFound)

	down := newError("read certificate container", ref, errors.New(`Get "`+ref+`": dial tcp 127.0.0.1:9311: connect: connection refused`))
	assert.Contains(t, down.Error(), "Barbican: read certificate container "+ref)
	assert.Contains(t, down.Error(), "connection refused")
	assert.Equal(t, "read certificate container 1b4d0f8e-3a2c-4f6e-9d7a-5c8b2e1f0a93: no answer", down.Brief())
	assert.True(t, IsError(fmt.Errorf("x: %w", down)))

	echoed := newError("store secret", "", gophercloud.ErrUnexpectedResponseCode{
		Actual: http.StatusBadRequest, Body: []byte(`{"description": "bad payload s3cr3t-passphrase"}`)}, "s3cr3t-passphrase")
	assert.NotContains(t, echoed.Error(), "s3cr3t-passphrase")
}

// Not reaching Barbican at all is never "the container is gone", whatever status the way there
// answered (a wrong endpoint's 404 must not let a delete believe it is done).
func TestDuringKeepsTheStatusOut(t *testing.T) {
	ref := "http://127.0.0.1:9311/v1/containers/1b4d0f8e-3a2c-4f6e-9d7a-5c8b2e1f0a93"
	wrongEndpoint := newError("reach the key-manager endpoint", "", gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusNotFound})
	err := during(wrongEndpoint, "delete certificate container", ref)
	assert.NotErrorIs(t, err, certs.ErrKeyPairNotFound)
	assert.Equal(t, "Barbican: delete certificate container "+ref+": reach the key-manager endpoint: 404 Not Found", err.Error())
}
