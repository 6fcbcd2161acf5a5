package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican/barbicantest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// barbicanObjects lists the hrefs of every secret and container in the service user's project.
func barbicanObjects(t *testing.T, auth keystone.PasswordAuth) []string {
	t.Helper()
	kc, err := keystone.NewPasswordClient(context.Background(), auth)
	require.NoError(t, err)
	km, err := openstack.NewKeyManagerV1(kc.ProviderClient(), gophercloud.EndpointOpts{})
	require.NoError(t, err)
	return barbicantest.ProjectObjects(t, km)
}

// barbicanStore is the local Barbican, a store on a fresh MariaDB with Magnum's schema, and Magnum's
// service user, as the Barbican tests of this package use them.
func barbicanStore(t *testing.T) (testutil.Barbican, store, keystone.PasswordAuth) {
	t.Helper()
	target := testutil.RequireBarbican(t)
	s, err := db.Open(context.Background(), dbtest.NewMySQL(t))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	auth := keystone.PasswordAuth{AuthURL: target.KeystoneURL, Username: target.Username, UserDomainID: "default",
		Password: keystone.NewSecret(target.Password), ProjectName: target.ProjectName, ProjectDomainID: "default"}
	return target, store{s}, auth
}

// With cert_manager_type = barbican a new cluster's set goes to the real Barbican and its row refers
// to the containers; a retry keeps the set; a set Barbican refuses half-way leaves nothing behind
// and the row unset; a missing cluster gets nothing written; a delete removes what Magnum removes.
func TestBarbicanStoreClusterSet(t *testing.T) {
	target, st, auth := barbicanStore(t)
	ctx := context.Background()
	o := &Options{Barbican: &BarbicanOptions{Service: auth, Region: target.Region, Dialect: barbican.DialectBarbicanClient}}
	backend, err := certBackend(o, st, nil)
	require.NoError(t, err)
	m := certs.NewManager(backend)
	owner := certs.Owner{ProjectID: "p-1", UserID: "u-1"}
	newCluster := func(name string) string {
		cl := &magnum.Cluster{}
		cl.UUID.Set(uuid.NewString())
		cl.Name.Set(name)
		cl.ProjectID.Set(owner.ProjectID)
		cl.UserID.Set(owner.UserID)
		cl.Status.Set(magnum.StatusCreateInProgress)
		_, err := st.CreateCluster(ctx, cl, nil)
		require.NoError(t, err)
		return cl.UUID.Or("")
	}
	rowRefs := func(id string) certs.Refs {
		row, err := st.Store.GetCluster(ctx, id)
		require.NoError(t, err)
		return refsOfRow(row)
	}
	generate := func(issuer string) *certs.ClusterPKI {
		pki, err := certs.GenerateClusterWithOptions(issuer, certs.GenerateOptions{RSAKeySize: 2048})
		require.NoError(t, err)
		return pki
	}
	before := barbicanObjects(t, auth)

	_, err = m.StoreNewCluster(ctx, uuid.NewString(), generate("gone"), owner)
	require.ErrorIs(t, err, conductor.ErrNotFound)
	assert.Equal(t, before, barbicanObjects(t, auth), "nothing written for a cluster without a row")

	broken := newCluster("k8s-broken")
	pki := generate("k8s-broken")
	pki.FrontProxyCA.Stored.Certificate = "" // Barbican refuses an empty payload: the third container fails
	_, err = m.StoreNewCluster(ctx, broken, pki, owner)
	require.Error(t, err)
	assert.True(t, barbican.IsError(err), "%v", err)
	assert.Contains(t, err.Error(), "Barbican: store secret \"Certificate\" of container \"k8s-broken\": 400 Bad Request")
	assert.Equal(t, before, barbicanObjects(t, auth), "the two containers written before are removed")
	assert.Equal(t, certs.Refs{ClusterUUID: broken}, rowRefs(broken), "the row refers to nothing")

	id := newCluster("k8s-demo")
	first := generate("k8s-demo")
	got, err := m.StoreNewCluster(ctx, id, first, owner)
	require.NoError(t, err)
	assert.Same(t, first, got)
	refs := rowRefs(id)
	for _, ref := range []string{refs.CACertRef, refs.EtcdCACertRef, refs.FrontProxyCACertRef, refs.MagnumCertRef} {
		assert.True(t, strings.HasPrefix(ref, target.URL+"/v1/containers/"), "a container href: %s", ref)
	}
	assert.Len(t, barbicanObjects(t, auth), len(before)+4+4*3, "four containers of a certificate, a key and a passphrase each")

	again, err := m.StoreNewCluster(ctx, id, generate("k8s-demo"), owner)
	require.NoError(t, err)
	assert.Equal(t, first.KubernetesCA.Certificate.Raw, again.KubernetesCA.Certificate.Raw, "a retry keeps the first set")
	assert.Equal(t, first.MagnumClient.Stored, again.MagnumClient.Stored)
	assert.Equal(t, refs, rowRefs(id))
	assert.Len(t, barbicanObjects(t, auth), len(before)+16, "and writes nothing")

	// Two attempts at once (a redelivery next to a retry, two replicas): one set wins, the other
	// attempt's containers go, and both return the winner.
	raced := newCluster("k8s-raced")
	results := make(chan *certs.ClusterPKI, 2)
	for range 2 {
		go func() {
			got, err := m.StoreNewCluster(ctx, raced, generate("k8s-raced"), owner)
			assert.NoError(t, err)
			results <- got
		}()
	}
	one, two := <-results, <-results
	require.NotNil(t, one)
	require.NotNil(t, two)
	assert.Equal(t, one.KubernetesCA.Certificate.Raw, two.KubernetesCA.Certificate.Raw, "both attempts end with the same CA")
	racedRefs := rowRefs(raced)
	assert.Len(t, barbicanObjects(t, auth), len(before)+2*16, "the losing attempt's containers are gone")
	require.NoError(t, m.DeleteCluster(ctx, racedRefs))
	for _, ref := range []string{racedRefs.EtcdCACertRef, racedRefs.FrontProxyCACertRef} {
		require.NoError(t, backend.(barbicanCerts).Delete(ctx, ref))
	}

	require.NoError(t, m.DeleteCluster(ctx, refs))
	left := barbicanObjects(t, auth)
	assert.Len(t, left, len(before)+8, "the etcd and front-proxy CAs stay, as with Magnum")
	assert.Contains(t, left, refs.EtcdCACertRef)
	assert.Contains(t, left, refs.FrontProxyCACertRef)
	assert.NotContains(t, left, refs.CACertRef)
	assert.NotContains(t, left, refs.MagnumCertRef)
	b, err := newBarbican(o.Barbican, nil)
	require.NoError(t, err)
	require.NoError(t, b.Delete(ctx, refs.EtcdCACertRef))
	require.NoError(t, b.Delete(ctx, refs.FrontProxyCACertRef))
	assert.Equal(t, before, barbicanObjects(t, auth))
}

// flakyNetwork is the network between the bridge and Barbican: it goes down (connections refused,
// as when barbican-api stops) at the request that would write the downAt-th container, and stays
// down until up is called. Keystone stays reachable.
type flakyNetwork struct {
	barbicanHost string
	downAt       atomic.Int32
	down         atomic.Bool
}

func (f *flakyNetwork) client() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == f.barbicanHost && f.down.Load() {
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connect: connection refused")}
			}
			return dialer.DialContext(ctx, network, addr)
		},
		DisableKeepAlives: true,
	}}
}

// wrap makes c count container writes, so that the network goes down at the downAt-th.
func (f *flakyNetwork) wrap(c *http.Client) *http.Client {
	next := c.Transport
	c.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/containers") && f.downAt.Add(-1) == 0 {
			f.down.Store(true)
		}
		return next.RoundTrip(r)
	})
	return c
}

func (f *flakyNetwork) up() { f.down.Store(false) }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Barbican going away in the middle of a new cluster's set: the create fails naming Barbican, the
// row refers to nothing, and what was written and could not be removed then is removed by the retry
// once Barbican is back, which stores the set.
func TestBarbicanGoneHalfWayThroughASet(t *testing.T) {
	target, st, auth := barbicanStore(t)
	ctx := context.Background()
	network := &flakyNetwork{barbicanHost: strings.TrimPrefix(target.URL, "http://")}
	vault := barbican.New(barbican.Options{Service: auth, Region: target.Region, Dialect: barbican.DialectOpenStackSDK,
		HTTPClient: network.wrap(network.client())})
	m := certs.NewManager(barbicanCerts{Backend: vault, st: st.Store})
	before := barbicanObjects(t, auth)

	cl := &magnum.Cluster{}
	cl.UUID.Set(uuid.NewString())
	cl.Name.Set("k8s-flaky")
	cl.Status.Set(magnum.StatusCreateInProgress)
	_, err := st.CreateCluster(ctx, cl, nil)
	require.NoError(t, err)
	id := cl.UUID.Or("")
	pki, err := certs.GenerateClusterWithOptions("k8s-flaky", certs.GenerateOptions{RSAKeySize: 2048})
	require.NoError(t, err)

	network.downAt.Store(3)
	_, err = m.StoreNewCluster(ctx, id, pki, certs.Owner{})
	require.Error(t, err)
	assert.True(t, barbican.IsError(err), "%v", err)
	assert.Contains(t, err.Error(), `Barbican: store certificate container "k8s-flaky"`)
	assert.Contains(t, err.Error(), "connection refused")
	row, err := st.Store.GetCluster(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, certs.Refs{ClusterUUID: id}, refsOfRow(row), "the row refers to nothing")
	assert.Len(t, vault.Leftovers(), 2+3, "two containers and the third's three secrets wait for Barbican")
	assert.Len(t, barbicanObjects(t, auth), len(before)+2*4+3)

	network.up()
	got, err := m.StoreNewCluster(ctx, id, pki, certs.Owner{})
	require.NoError(t, err)
	assert.Same(t, pki, got)
	assert.Empty(t, vault.Leftovers())
	assert.Len(t, barbicanObjects(t, auth), len(before)+16, "only the stored set is left")

	row, err = st.Store.GetCluster(ctx, id)
	require.NoError(t, err)
	refs := refsOfRow(row)
	require.NoError(t, m.DeleteCluster(ctx, refs))
	require.NoError(t, vault.Delete(ctx, refs.EtcdCACertRef))
	require.NoError(t, vault.Delete(ctx, refs.FrontProxyCACertRef))
	assert.Equal(t, before, barbicanObjects(t, auth))
}
