package app

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// The operator's [bridge] default_infrastructure is the default flavor; allowed_infrastructures is what a
// template's capi_infrastructure label may choose, and only the default unless it says otherwise.
func TestAllowedInfrastructures(t *testing.T) {
	const withKeystone = "cluster_credentials = false\n"
	o, err := quotaOptions(t, withKeystone)
	require.NoError(t, err)
	require.Equal(t, templates.FlavorInMemory, o.Bridge.Flavor)
	require.Equal(t, []templates.Flavor{templates.FlavorInMemory}, o.Bridge.AllowedFlavors, "default: the default flavor alone")
	require.False(t, o.Bridge.OffersOpenStack())

	f, err := config.Parse(quotaBase + "allowed_infrastructures = inmemory, openstack, inmemory\n" + keystoneAuthtoken)
	require.NoError(t, err)
	o, err = optionsFrom(f, nil)
	require.NoError(t, err)
	require.Equal(t, []templates.Flavor{templates.FlavorInMemory, templates.FlavorOpenStack}, o.Bridge.AllowedFlavors)
	require.True(t, o.Bridge.OffersOpenStack())
	require.NotNil(t, o.Bridge.Credentials, "machines that call the cloud get credentials by default")
	require.Len(t, requiredAPIResources(o.Bridge.AllowedFlavors), 12, "--check-config wants both providers' templates")

	for name, lines := range map[string]string{
		"unknown flavor":          "allowed_infrastructures = inmemory, heat\n",
		"default not allowed":     "allowed_infrastructures = openstack\n" + keystoneAuthtoken,
		"openstack without creds": "allowed_infrastructures = inmemory, openstack\ncluster_credentials = false\n" + keystoneAuthtoken,
	} {
		t.Run(name, func(t *testing.T) {
			f, err := config.Parse(quotaBase + lines)
			require.NoError(t, err)
			_, err = optionsFrom(f, nil)
			var ce *config.Error
			require.True(t, errors.As(err, &ce), "%T %v", err, err)
			if name == "openstack without creds" {
				require.Equal(t, "cluster_credentials", ce.Key)
				return
			}
			require.Equal(t, "allowed_infrastructures", ce.Key, err.Error())
		})
	}
}

// A release that renames an option reads the former name with a warning, and an option this release
// does not know is a warning, never a refusal (an operator rolling back keeps the newer
// release's configuration).
func TestFormerAndUnknownOptionsAreWarnings(t *testing.T) {
	f, err := config.Parse(strings.Replace(quotaBase, "default_infrastructure = inmemory", "infrastructure = inmemory", 1) +
		"cluster_credentials = false\nautoscaler_image = registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.0\n")
	require.NoError(t, err)
	o, err := optionsFrom(f, nil)
	require.NoError(t, err)
	require.Equal(t, templates.FlavorInMemory, o.Bridge.Flavor, "the former name still sets the option")
	require.Equal(t, []string{
		"[bridge] infrastructure is deprecated: it is now default_infrastructure, and the former name will not be read after the next release",
		"[bridge] autoscaler_image is not an option of this release: ignored",
	}, o.Warnings)

	o, err = quotaOptions(t, "cluster_credentials = false\n")
	require.NoError(t, err)
	require.Empty(t, o.Warnings, "every option of the base configuration is known")
}
