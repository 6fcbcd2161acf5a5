package app

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
)

const barbicanBase = `
[database]
connection = mysql://u@127.0.0.1/m
[keystone_auth]
auth_url = http://127.0.0.1:5000/v3
username = magnum
password = secretmagnum
project_name = service
[bridge]
default_infrastructure = inmemory
`

func barbicanOptions(t *testing.T, extra string) (*Options, error) {
	t.Helper()
	f, err := config.Parse(barbicanBase + extra)
	require.NoError(t, err)
	return optionsFrom(f, nil)
}

// Magnum's default cert manager, barbican, is the bridge's too; it reads the service user and
// [barbican_client] as Magnum does, and the dialect of [bridge] magnum_release.
func TestBarbicanOptions(t *testing.T) {
	o, err := barbicanOptions(t, "")
	require.NoError(t, err)
	assert.Equal(t, "barbican", o.CertManagerType, "unset: Magnum's default")
	require.NotNil(t, o.Barbican)
	assert.Equal(t, "magnum", o.Barbican.Service.Username)
	assert.Equal(t, "publicURL", o.Barbican.Interface)
	assert.Empty(t, o.Barbican.Region)
	assert.Equal(t, barbican.DialectBarbicanClient, o.Barbican.Dialect)

	o, err = barbicanOptions(t, "magnum_release = 23\n[barbican_client]\nregion_name = RegionTwo\nendpoint_type = internalURL\n")
	require.NoError(t, err)
	assert.Equal(t, "RegionTwo", o.Barbican.Region)
	assert.Equal(t, "internalURL", o.Barbican.Interface)
	assert.Equal(t, barbican.DialectOpenStackSDK, o.Barbican.Dialect)

	o, err = barbicanOptions(t, "[certificates]\ncert_manager_type = x509keypair\n")
	require.NoError(t, err)
	assert.Nil(t, o.Barbican)

	_, err = barbicanOptions(t, "[certificates]\ncert_manager_type = local\n")
	var ce *config.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "cert_manager_type", ce.Key)
}

// A check's error that names its service already is not prefixed twice.
func TestCheckErrorNamesTheDependencyOnce(t *testing.T) {
	assert.Equal(t, "Barbican: reach the key-manager endpoint: refused",
		(&CheckError{Dependency: "Barbican", Err: errors.New("Barbican: reach the key-manager endpoint: refused")}).Error())
	assert.Equal(t, "database: dial tcp: refused", (&CheckError{Dependency: "database", Err: errors.New("dial tcp: refused")}).Error())
}
