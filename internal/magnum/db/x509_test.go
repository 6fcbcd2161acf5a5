package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
)

// clusterKeyPairs are a cluster's four key pairs under fresh uuids; tag marks their content.
func clusterKeyPairs(t testing.TB, tag string) []ClusterKeyPair {
	out := make([]ClusterKeyPair, len(clusterRefColumns))
	for i, col := range clusterRefColumns {
		out[i] = ClusterKeyPair{RefColumn: col, KeyPair: &X509KeyPair{UUID: newUUID(t),
			Certificate:          Ptr("-----BEGIN CERTIFICATE-----\n" + tag + " " + col + "\n-----END CERTIFICATE-----"),
			PrivateKey:           Ptr(magnum.Secret("-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + tag + "\n-----END ENCRYPTED PRIVATE KEY-----")),
			PrivateKeyPassphrase: Ptr(magnum.Secret("kmdqt2mx5mh" + strconv.Itoa(i))), ProjectID: Ptr("p-1"), UserID: Ptr("u-1")}}
	}
	return out
}

// under are pairs with the uuids of refs (another attempt's content for the same cluster).
func under(refs, pairs []ClusterKeyPair) []ClusterKeyPair {
	out := make([]ClusterKeyPair, len(pairs))
	for i, p := range pairs {
		kp := *p.KeyPair
		kp.UUID = refs[i].KeyPair.UUID
		out[i] = ClusterKeyPair{RefColumn: p.RefColumn, KeyPair: &kp}
	}
	return out
}

func TestStoreClusterKeyPairs(t *testing.T) {
	eachBackend(t, dbtest.Zed, func(t *testing.T, s *Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
		setClock(s, t0)
		newClusterRow := func(t *testing.T) string {
			c, m, w := newCluster(t)
			_, _, err := s.CreateCluster(ctx, c, m, w)
			require.NoError(t, err)
			return c.UUID
		}
		stored := func(t *testing.T, pairs []ClusterKeyPair) []map[string]string {
			args := make([]any, len(pairs))
			for i, p := range pairs {
				args[i] = p.KeyPair.UUID
			}
			return rawRows(t, s, "x509keypair", s.quote("uuid")+" IN ("+placeholders(len(args))+")", args...)
		}
		refsOf := func(t *testing.T, id string) []string {
			row := rawRow(t, s, "cluster", s.quote("uuid")+" = ?", id)
			out := make([]string, len(clusterRefColumns))
			for i, col := range clusterRefColumns {
				out[i] = row[col]
			}
			return out
		}
		uuidsOf := func(pairs []ClusterKeyPair) []string {
			out := make([]string, len(pairs))
			for i, p := range pairs {
				out[i] = p.KeyPair.UUID
			}
			return out
		}
		// contents are the stored certificates, in id order.
		contents := func(rows []map[string]string) []string {
			out := make([]string, len(rows))
			for i, r := range rows {
				out[i] = r["certificate"]
			}
			return out
		}
		certificates := func(pairs []ClusterKeyPair) []string {
			out := make([]string, len(pairs))
			for i, p := range pairs {
				out[i] = *p.KeyPair.Certificate
			}
			return out
		}
		none := []string{"NULL", "NULL", "NULL", "NULL"}

		t.Run("one commit: the rows as Python writes them and the cluster's refs", func(t *testing.T) {
			id := newClusterRow(t)
			pairs := clusterKeyPairs(t, "first")
			var statements []string
			s.hooks.statement = func(q string) { statements = append(statements, strings.Fields(q)[0]) }
			ok, err := s.StoreClusterKeyPairs(ctx, id, pairs)
			s.hooks.statement = nil
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, []string{"BEGIN", "INSERT", "UPDATE", "COMMIT"}, statements, "four round trips, one commit")

			rows := stored(t, pairs)
			require.Len(t, rows, 4)
			for i, row := range rows { // ids ascending in the order given
				assert.Equal(t, pairs[i].KeyPair.UUID, row["uuid"])
			}
			// Each row is what a single insert writes (python_rows_test pins that to Python's rows).
			for i, p := range pairs {
				single := *p.KeyPair
				single.UUID = newUUID(t)
				_, created, err := s.CreateX509KeyPair(ctx, &single)
				require.NoError(t, err)
				require.True(t, created)
				want := rawRow(t, s, "x509keypair", s.quote("uuid")+" = ?", single.UUID)
				for _, col := range []string{"id", "uuid"} {
					delete(want, col)
					delete(rows[i], col)
				}
				assert.Equal(t, want, rows[i])
				assert.Equal(t, t0.Format(time.DateTime), rows[i]["created_at"])
				assert.Equal(t, "NULL", rows[i]["updated_at"])
			}
			assert.Equal(t, uuidsOf(pairs), refsOf(t, id))
			assert.Equal(t, t0.Format(time.DateTime), rawRow(t, s, "cluster", s.quote("uuid")+" = ?", id)["updated_at"])
		})

		t.Run("an earlier attempt's set is kept and referred to", func(t *testing.T) {
			id := newClusterRow(t)
			first := clusterKeyPairs(t, "first")
			ok, err := s.StoreClusterKeyPairs(ctx, id, first)
			require.NoError(t, err)
			require.True(t, ok)
			ok, err = s.StoreClusterKeyPairs(ctx, id, under(first, clusterKeyPairs(t, "second")))
			require.NoError(t, err)
			assert.False(t, ok, "the caller reads the stored set")
			assert.Equal(t, certificates(first), contents(stored(t, first)))
			assert.Equal(t, uuidsOf(first), refsOf(t, id))
		})

		t.Run("a failure on the fourth row leaves none", func(t *testing.T) {
			id := newClusterRow(t)
			pairs := clusterKeyPairs(t, "broken")
			pairs[3].KeyPair.ProjectID = Ptr(strings.Repeat("p", 300)) // project_id is VARCHAR(255)
			_, err := s.StoreClusterKeyPairs(ctx, id, pairs)
			require.Error(t, err)
			assert.Empty(t, stored(t, pairs))
			assert.Equal(t, none, refsOf(t, id))
		})

		t.Run("a failed commit leaves none", func(t *testing.T) {
			id := newClusterRow(t)
			pairs := clusterKeyPairs(t, "uncommitted")
			s.hooks.beforeCommit = func(context.Context, int, *sql.Tx) error { return errors.New("the bridge died") }
			_, err := s.StoreClusterKeyPairs(ctx, id, pairs)
			s.hooks.beforeCommit = nil
			require.ErrorContains(t, err, "the bridge died")
			assert.Empty(t, stored(t, pairs))
			assert.Equal(t, none, refsOf(t, id))
		})

		t.Run("a cluster without a row gets no key pairs", func(t *testing.T) {
			pairs := clusterKeyPairs(t, "orphan")
			_, err := s.StoreClusterKeyPairs(ctx, newUUID(t), pairs)
			require.ErrorIs(t, err, magnum.ErrClusterNotFound)
			assert.Empty(t, stored(t, pairs))
		})

		t.Run("lost commit acknowledgement: the retry keeps this call's own set", func(t *testing.T) {
			id := newClusterRow(t)
			pairs := clusterKeyPairs(t, "acked-late")
			s.hooks.afterCommit = func(attempt int) error {
				if attempt == 1 {
					return driver.ErrBadConn
				}
				return nil
			}
			ok, err := s.StoreClusterKeyPairs(ctx, id, pairs)
			s.hooks.afterCommit = nil
			require.NoError(t, err)
			assert.False(t, ok, "the retry found the set stored: the caller reads it")
			assert.Equal(t, certificates(pairs), contents(stored(t, pairs)))
			assert.Equal(t, uuidsOf(pairs), refsOf(t, id))
		})

		t.Run("a partial set is replaced", func(t *testing.T) {
			id := newClusterRow(t)
			pairs := clusterKeyPairs(t, "whole")
			// What an attempt storing one row at a time left when it died after two.
			for _, p := range under(pairs[:2], clusterKeyPairs(t, "partial")[:2]) {
				_, created, err := s.CreateX509KeyPair(ctx, p.KeyPair)
				require.NoError(t, err)
				require.True(t, created)
			}
			ok, err := s.StoreClusterKeyPairs(ctx, id, pairs)
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, certificates(pairs), contents(stored(t, pairs)))
			assert.Equal(t, uuidsOf(pairs), refsOf(t, id))
		})

		t.Run("concurrent attempts store one set", func(t *testing.T) {
			id := newClusterRow(t)
			first := clusterKeyPairs(t, "a")
			attempts := [][]ClusterKeyPair{first, under(first, clusterKeyPairs(t, "b")), under(first, clusterKeyPairs(t, "c"))}
			var wg sync.WaitGroup
			won := make([]bool, len(attempts))
			errs := make([]error, len(attempts))
			for i, pairs := range attempts {
				wg.Go(func() { won[i], errs[i] = s.StoreClusterKeyPairs(ctx, id, pairs) })
			}
			wg.Wait()
			winner := -1
			for i := range attempts {
				require.NoError(t, errs[i])
				if won[i] {
					require.Equal(t, -1, winner, "one attempt stores its set")
					winner = i
				}
			}
			require.NotEqual(t, -1, winner)
			assert.Equal(t, certificates(attempts[winner]), contents(stored(t, first)))
			assert.Equal(t, uuidsOf(first), refsOf(t, id))
		})
	})
}
