package certs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
)

func TestOptionsFromConfigDefaults(t *testing.T) {
	f, err := config.Parse("[DEFAULT]\n")
	require.NoError(t, err)
	gen, sign, err := OptionsFromConfig(f)
	require.NoError(t, err)
	assert.Equal(t, GenerateOptions{RSAKeySize: 2048, ValidityDays: 1825}, gen)
	assert.False(t, sign.AllowCA)
	assert.Equal(t, 1825, sign.ValidityDays)
	assert.Equal(t, DefaultAllowedExtensions, sign.AllowedExtensions)
	assert.Equal(t, DefaultAllowedKeyUsage, sign.AllowedKeyUsage)
}

func TestOptionsFromConfigValues(t *testing.T) {
	f, err := config.Parse(`[x509]
allow_ca = true
term_of_validity = 90
rsa_key_size = 4096
allowed_extensions = keyUsage, subjectAltName
allowed_key_usage =
`)
	require.NoError(t, err)
	gen, sign, err := OptionsFromConfig(f)
	require.NoError(t, err)
	assert.Equal(t, 4096, gen.RSAKeySize)
	assert.Equal(t, 90, gen.ValidityDays)
	assert.True(t, sign.AllowCA)
	assert.Equal(t, []string{"keyUsage", "subjectAltName"}, sign.AllowedExtensions)
	assert.NotNil(t, sign.AllowedKeyUsage, "set but empty means none allowed, not the default")
	assert.Empty(t, sign.AllowedKeyUsage)
}

func TestOptionsFromConfigErrorsNameTheKey(t *testing.T) {
	for text, key := range map[string]string{
		"[x509]\nallowed_extensions = keyUsage, fooBar\n":  "[x509] allowed_extensions",
		"[x509]\nallowed_key_usage = Digital Signature, X": "[x509] allowed_key_usage",
		"[x509]\nrsa_key_size = 512\n":                     "[x509] rsa_key_size",
		"[x509]\nallow_ca = maybe\n":                       "[x509] allow_ca",
		"[x509]\nterm_of_validity = soon\n":                "[x509] term_of_validity",
	} {
		f, err := config.Parse(text)
		require.NoError(t, err)
		_, _, err = OptionsFromConfig(f)
		assert.ErrorContains(t, err, key)
	}
}
