package app

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
)

// The x509keypair backend stores a new cluster's set with its refs in Magnum's database, on both
// servers, and reports a cluster without a row as the conductor's not-found.
func TestKeyPairsStoreClusterSet(t *testing.T) {
	pki, err := certs.GenerateCluster("k8s-demo")
	require.NoError(t, err)
	for name, newDB := range map[string]func(testing.TB, ...dbtest.Release) string{"mariadb": dbtest.NewMySQL, "postgres": dbtest.NewPostgres} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := db.Open(ctx, newDB(t))
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			st := store{s}
			m := certs.NewManager(st.KeyPairs())
			owner := certs.Owner{ProjectID: "p-1", UserID: "u-1"}

			_, err = m.StoreNewCluster(ctx, uuid.NewString(), pki, owner)
			require.ErrorIs(t, err, conductor.ErrNotFound)

			cl := &magnum.Cluster{}
			cl.UUID.Set(uuid.NewString())
			cl.Name.Set("k8s-demo")
			cl.ProjectID.Set(owner.ProjectID)
			cl.UserID.Set(owner.UserID)
			cl.Status.Set(magnum.StatusCreateInProgress)
			_, err = st.CreateCluster(ctx, cl, nil)
			require.NoError(t, err)
			got, err := m.StoreNewCluster(ctx, cl.UUID.Or(""), pki, owner)
			require.NoError(t, err)
			assert.Same(t, pki, got)

			row, err := st.GetCluster(ctx, cl.UUID.Or(""))
			require.NoError(t, err)
			refs := certs.ClusterRefs(cl.UUID.Or(""))
			assert.Equal(t, refs, certs.Refs{CACertRef: row.CACertRef.Or(""), EtcdCACertRef: row.EtcdCACertRef.Or(""),
				FrontProxyCACertRef: row.FrontProxyCACertRef.Or(""), MagnumCertRef: row.MagnumCertRef.Or(""), ClusterUUID: row.UUID.Or("")})
			loaded, err := m.LoadCluster(ctx, refs, "k8s-demo")
			require.NoError(t, err)
			assert.Equal(t, pki.FrontProxyCA.Certificate.Raw, loaded.FrontProxyCA.Certificate.Raw)
			assert.Equal(t, pki.MagnumClient.Stored, loaded.MagnumClient.Stored)
			kp, err := s.GetX509KeyPair(ctx, refs.MagnumCertRef)
			require.NoError(t, err)
			assert.Equal(t, owner.ProjectID, *kp.ProjectID)
			assert.Nil(t, kp.Intermediates, "no intermediates: NULL, as Magnum leaves it")
		})
	}
}
