package certs

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestManagerStoreLoadDelete(t *testing.T) {
	ctx := context.Background()
	pki := clusterPKI(t)
	backend := newFakeBackend()
	m := NewManager(backend)
	owner := Owner{ProjectID: "p-1", UserID: "u-1"}

	refs, err := m.StoreCluster(ctx, pki, owner)
	require.NoError(t, err)
	all := []string{refs.CACertRef, refs.EtcdCACertRef, refs.FrontProxyCACertRef, refs.MagnumCertRef}
	for _, r := range all {
		require.NotEmpty(t, r)
	}
	assert.Len(t, map[string]bool{all[0]: true, all[1]: true, all[2]: true, all[3]: true}, 4, "distinct refs")
	require.Equal(t, 4, backend.count())
	for ref, wantName := range map[string]string{refs.CACertRef: "k8s-demo", refs.EtcdCACertRef: "k8s-demo",
		refs.FrontProxyCACertRef: "k8s-demo", refs.MagnumCertRef: ClientCertName} {
		row := backend.rows[ref]
		assert.Equal(t, wantName, row.name)
		assert.Equal(t, owner, row.owner)
	}
	assert.Equal(t, pki.MagnumClient.Stored, backend.rows[refs.MagnumCertRef].kp)

	for caType, want := range map[string]Credential{
		"": pki.KubernetesCA, "kubernetes": pki.KubernetesCA, "etcd": pki.EtcdCA,
		"front_proxy": pki.FrontProxyCA, "front-proxy": pki.FrontProxyCA,
	} {
		kp, err := m.LoadCA(ctx, refs, caType)
		require.NoError(t, err, caType)
		assert.Equal(t, want.Stored, kp, "ca type %q", caType)
	}
	_, err = m.LoadCA(ctx, refs, "kube")
	require.ErrorIs(t, err, ErrUnknownCAType)
	assert.Contains(t, err.Error(), `"kube"`)

	loaded, err := m.LoadCluster(ctx, refs, "k8s-demo")
	require.NoError(t, err)
	assert.Equal(t, pki.EtcdCA.Certificate.Raw, loaded.EtcdCA.Certificate.Raw)
	assert.True(t, publicKeysEqual(pki.ServiceAccountKey().Public(), loaded.ServiceAccountKey().Public()))

	csrPEM, _ := magnumclientCSR(t)
	certPEM, err := m.SignCSR(ctx, refs, "", "k8s-demo", csrPEM, signOpts())
	require.NoError(t, err)
	verifyClientCert(t, parseCertPEM(t, certPEM), pki.KubernetesCA.Certificate)
	_, err = m.SignCSR(ctx, refs, "bogus", "k8s-demo", csrPEM, signOpts())
	require.ErrorIs(t, err, ErrUnknownCAType)

	require.NoError(t, m.DeleteCluster(ctx, refs))
	assert.Equal(t, 0, backend.count(), "all four key pairs are deleted, etcd and front-proxy included")
	require.NoError(t, m.DeleteCluster(ctx, refs), "deleting again is not an error")
	_, err = m.LoadCA(ctx, refs, "etcd")
	require.ErrorIs(t, err, ErrKeyPairNotFound)
}

func TestManagerMissingRefs(t *testing.T) {
	ctx := context.Background()
	m := NewManager(newFakeBackend())
	refs := Refs{CACertRef: "a", MagnumCertRef: "d"} // a cluster from before etcd/front-proxy CAs
	_, err := m.LoadCA(ctx, refs, "front-proxy")
	require.ErrorIs(t, err, ErrMissingRef)
	assert.Contains(t, err.Error(), "front_proxy_ca_cert_ref")
	_, err = m.LoadCluster(ctx, refs, "x")
	require.ErrorIs(t, err, ErrMissingRef)
	require.NoError(t, m.DeleteCluster(ctx, Refs{}), "nothing to delete")
}

func TestManagerStoreRollsBackOnFailure(t *testing.T) {
	backend := newFakeBackend()
	backend.failStoreAt = 3
	_, err := NewManager(backend).StoreCluster(context.Background(), clusterPKI(t), Owner{ProjectID: "p"})
	require.ErrorContains(t, err, "injected store failure")
	assert.Equal(t, 0, backend.count(), "the two stored key pairs are deleted again")
}

func TestManagerDeleteContinuesAfterFailure(t *testing.T) {
	ctx := context.Background()
	backend := newFakeBackend()
	m := NewManager(backend)
	refs, err := m.StoreCluster(ctx, clusterPKI(t), Owner{})
	require.NoError(t, err)
	backend.failDelete = refs.EtcdCACertRef
	err = m.DeleteCluster(ctx, refs)
	require.ErrorContains(t, err, refs.EtcdCACertRef)
	assert.Equal(t, 1, backend.count(), "the other three are deleted anyway")
	_, err = backend.Load(ctx, refs.EtcdCACertRef)
	require.NoError(t, err)
}

// A new cluster's set is stored under refs derived from its uuid and recorded in its row; a second
// attempt gets the first one's set back, loaded, whatever it generated itself.
func TestManagerStoreNewClusterOnce(t *testing.T) {
	ctx := context.Background()
	backend := newFakeBackend()
	m := NewManager(backend)
	id := "6f1e5a2c-9b7d-4c1e-8f3a-2d4b6c8e0a1f"
	owner := Owner{ProjectID: "p-1", UserID: "u-1"}
	first := clusterPKI(t)

	_, err := m.StoreNewCluster(ctx, id, first, owner)
	require.ErrorContains(t, err, "not found", "no cluster row, no key pairs")
	assert.Zero(t, backend.count())

	backend.clusters[id] = Refs{}
	got, err := m.StoreNewCluster(ctx, id, first, owner)
	require.NoError(t, err)
	assert.Same(t, first, got, "what was stored is not read back")
	assert.Equal(t, ClusterRefs(id), backend.clusters[id])
	assert.Equal(t, 4, backend.count())

	second, err := GenerateClusterWithOptions("k8s-demo", GenerateOptions{Now: testNow})
	require.NoError(t, err)
	got, err = m.StoreNewCluster(ctx, id, second, owner)
	require.NoError(t, err)
	assert.Equal(t, first.KubernetesCA.Certificate.Raw, got.KubernetesCA.Certificate.Raw, "the first set stays")
	assert.Equal(t, first.MagnumClient.Stored, got.MagnumClient.Stored)
	assert.Equal(t, 4, backend.count())

	_, err = NewManager(noSetBackend{backend}).StoreNewCluster(ctx, id, first, owner)
	require.ErrorContains(t, err, "cannot store a cluster's key pairs as one set")
}

// noSetBackend is a Backend without ClusterSetStore.
type noSetBackend struct{ b *fakeBackend }

func (n noSetBackend) Store(ctx context.Context, name string, kp KeyPair, owner Owner) (string, error) {
	return n.b.Store(ctx, name, kp, owner)
}
func (n noSetBackend) Load(ctx context.Context, ref string) (KeyPair, error) {
	return n.b.Load(ctx, ref)
}
func (n noSetBackend) Delete(ctx context.Context, ref string) error { return n.b.Delete(ctx, ref) }
