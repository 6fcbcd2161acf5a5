// Package barbicantest holds what the Barbican tests of more than one package share.
package barbicantest

import (
	"context"
	"slices"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/keymanager/v1/containers"
	"github.com/gophercloud/gophercloud/v2/openstack/keymanager/v1/secrets"
	"github.com/stretchr/testify/require"
)

// ProjectObjects lists the hrefs of every secret and container in the project of km's user, sorted:
// the tests compare them before and after to see that nothing was left behind.
func ProjectObjects(t testing.TB, km *gophercloud.ServiceClient) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	pages, err := secrets.List(km, secrets.ListOpts{Limit: 100}).AllPages(ctx)
	require.NoError(t, err)
	ss, err := secrets.ExtractSecrets(pages)
	require.NoError(t, err)
	for _, s := range ss {
		out = append(out, s.SecretRef)
	}
	pages, err = containers.List(km, containers.ListOpts{Limit: 100}).AllPages(ctx)
	require.NoError(t, err)
	cs, err := containers.ExtractContainers(pages)
	require.NoError(t, err)
	for _, c := range cs {
		out = append(out, c.ContainerRef)
	}
	slices.Sort(out)
	return out
}
