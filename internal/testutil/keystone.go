package testutil

import (
	"context"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/utils/v2/openstack/clientconfig"
	"github.com/stretchr/testify/require"
)

// The helpers below are of the E2E tier: what they cannot reach fails the test with a hint to
// start the local stack, since a missing stack must not look like a pass.

const stackHint = "the e2e tier needs the local stack: `make up`"

// Cloud is the clouds.yaml entry of the local stack's OpenStack (deploy/local/openstack/up.sh
// writes /etc/openstack/clouds.yaml).
func Cloud(t testing.TB, name string) *clientconfig.Cloud {
	t.Helper()
	cloud, err := clientconfig.GetCloudFromYAML(&clientconfig.ClientOpts{Cloud: name})
	if err != nil {
		t.Fatalf("no cloud %s in clouds.yaml: %v (%s)", name, err, stackHint)
	}
	return cloud
}

// KeystoneToken authenticates with opts and returns the token.
func KeystoneToken(ctx context.Context, t testing.TB, opts gophercloud.AuthOptions) string {
	t.Helper()
	provider, err := openstack.AuthenticatedClient(ctx, opts)
	if err != nil {
		t.Fatalf("Keystone at %s does not authenticate: %v (%s)", opts.IdentityEndpoint, err, stackHint)
	}
	return provider.Token()
}

// PasswordToken is a project-scoped token of a clouds.yaml entry by password authentication, as
// magnum-api's keystonemiddleware would have received it from the user.
func PasswordToken(ctx context.Context, t testing.TB, cloud string) string {
	t.Helper()
	opts, err := clientconfig.AuthOptions(&clientconfig.ClientOpts{Cloud: cloud})
	require.NoError(t, err, cloud)
	return KeystoneToken(ctx, t, *opts)
}
