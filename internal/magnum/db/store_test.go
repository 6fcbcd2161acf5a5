package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
)

// newCluster is a cluster as cluster_create inserts it, with its two default nodegroups.
func newCluster(t testing.TB) (*Cluster, *NodeGroup, *NodeGroup) {
	c := &Cluster{UUID: newUUID(t), Name: Ptr("k8s-demo"), ProjectID: Ptr("p-1"), UserID: Ptr("u-1"),
		ClusterTemplateID: Ptr(newUUID(t)), Keypair: Ptr("default"), DockerVolumeSize: Ptr[int64](10),
		Labels: magnum.NewDict("kube_tag", "v1.30.4", "auto_scaling_enabled", "false"), MasterFlavorID: Ptr("m1.medium"),
		FlavorID: Ptr("m1.small"), Status: magnum.StatusCreateInProgress, CreateTimeout: Ptr[int64](60),
		FloatingIPEnabled: true}
	ng := func(role string, n int64) *NodeGroup {
		return &NodeGroup{UUID: newUUID(t), Name: "default-" + role, ProjectID: "p-1", Labels: c.Labels,
			NodeCount: Ptr(n), MinNodeCount: Ptr[int64](0), Role: Ptr(role), IsDefault: true, ImageID: Ptr("ubuntu"),
			Status: magnum.StatusCreateInProgress}
	}
	return c, ng("master", 1), ng("worker", 2)
}

func TestClusterLifecycle(t *testing.T) {
	for _, rel := range []dbtest.Release{dbtest.Zed, dbtest.Release23} {
		t.Run(rel.String(), func(t *testing.T) {
			eachBackend(t, rel, func(t *testing.T, s *Store) {
				ctx := context.Background()
				t0 := time.Date(2026, 11, 30, 4, 8, 3, 987654321, time.UTC)
				setClock(s, t0)
				c, m, w := newCluster(t)
				row, created, err := s.CreateCluster(ctx, c, m, w)
				require.NoError(t, err)
				assert.True(t, created)
				assert.NotZero(t, row.ID)
				assert.Equal(t, t0.Truncate(time.Second), row.CreatedAt, "naive UTC, whole seconds")
				assert.Nil(t, row.UpdatedAt)
				assert.Equal(t, []string{"kube_tag", "auto_scaling_enabled"}, row.Labels.Keys(), "label order kept")
				assert.Equal(t, magnum.StatusCreateInProgress, row.Status)
				assert.Nil(t, row.APIAddress)
				assert.Equal(t, 0, row.HealthStatusReason.Len())
				raw := rawRow(t, s, "cluster", s.quote("uuid")+" = ?", c.UUID)
				assert.Equal(t, "{}", raw["health_status_reason"], "NULL JSON is stored as {}")
				assert.Equal(t, `{"kube_tag": "v1.30.4", "auto_scaling_enabled": "false"}`, raw["labels"])
				assert.Equal(t, "1", raw["floating_ip_enabled"])
				assert.Equal(t, "0", raw["master_lb_enabled"])
				assert.Equal(t, "NULL", raw["api_address"])
				assert.Equal(t, "2026-11-30 04:08:03", raw["created_at"])

				ngs, err := s.ListNodeGroups(ctx, c.UUID)
				require.NoError(t, err)
				require.Len(t, ngs, 2)
				assert.Equal(t, "default-master", ngs[0].Name)
				assert.Equal(t, "default-worker", ngs[1].Name)
				assert.Equal(t, c.UUID, ngs[1].ClusterID)
				assert.Equal(t, []string{}, ngs[1].NodeAddresses)
				nraw := rawRow(t, s, "nodegroup", s.quote("uuid")+" = ?", w.UUID)
				assert.Equal(t, "[]", nraw["node_addresses"])
				assert.Equal(t, "1", nraw["is_default"])
				if s.Schema().NodeGroupLabelsTaints {
					assert.Equal(t, "{}", nraw["node_labels"])
					assert.Equal(t, "[]", nraw["node_taints"])
				}

				// A redelivered cluster_create: no error, nothing duplicated.
				again, m2, w2 := *c, *m, *w
				m2.UUID, w2.UUID = newUUID(t), newUUID(t) // the conductor would generate new nodegroup uuids
				row2, created, err := s.CreateCluster(ctx, &again, &m2, &w2)
				require.NoError(t, err)
				assert.False(t, created)
				assert.Equal(t, row.ID, row2.ID)
				ngs, err = s.ListNodeGroups(ctx, c.UUID)
				require.NoError(t, err)
				assert.Len(t, ngs, 2)

				// Updates set updated_at; the returned row is what was written.
				t1 := t0.Add(4 * time.Second)
				setClock(s, t1)
				upd, err := s.UpdateCluster(ctx, c.UUID, Fields{"stack_id": "capi-k8s-demo", "api_address": "https://10.0.0.5:6443",
					"status": magnum.StatusCreateComplete, "status_reason": nil, "health_status": magnum.HealthHealthy,
					"health_status_reason": magnum.NewDict("cluster", "Ready", "controlplane", "Ready")}, IfStatus(magnum.StatusCreateInProgress))
				require.NoError(t, err)
				assert.Equal(t, t1.Truncate(time.Second), *upd.UpdatedAt)
				assert.Equal(t, "https://10.0.0.5:6443", *upd.APIAddress)
				assert.Equal(t, magnum.HealthHealthy, upd.HealthStatus)
				raw = rawRow(t, s, "cluster", s.quote("uuid")+" = ?", c.UUID)
				assert.Equal(t, `{"cluster": "Ready", "controlplane": "Ready"}`, raw["health_status_reason"])
				assert.Equal(t, "2026-11-30 04:08:07", raw["updated_at"])

				ng, err := s.UpdateNodeGroup(ctx, c.UUID, w.UUID, Fields{"node_count": 3, "node_addresses": []string{"10.0.0.20"},
					"status": magnum.StatusUpdateInProgress}, IfStatus(magnum.NodeGroupAllowedStatuses...))
				require.ErrorIs(t, err, ErrConflict, "the nodegroup is still CREATE_IN_PROGRESS")
				assert.Nil(t, ng)
				ng, err = s.UpdateNodeGroup(ctx, c.UUID, w.UUID, Fields{"node_count": 3, "node_addresses": []string{"10.0.0.20"},
					"status": magnum.StatusUpdateInProgress}, Guard{})
				require.NoError(t, err)
				assert.Equal(t, int64(3), *ng.NodeCount)
				assert.Equal(t, []string{"10.0.0.20"}, ng.NodeAddresses)

				// Status-sync view of the world after a restart.
				list, err := s.ListClustersByStatus(ctx, magnum.SyncStatuses...)
				require.NoError(t, err)
				assert.Empty(t, list)
				list, err = s.ListClustersByStatus(ctx, magnum.StatusCreateComplete)
				require.NoError(t, err)
				require.Len(t, list, 1)
				assert.Equal(t, c.UUID, list[0].UUID)

				// Extra nodegroup: create (idempotent), name clash, delete.
				extra := &NodeGroup{UUID: newUUID(t), Name: "ng-extra", ClusterID: c.UUID, ProjectID: "p-1", NodeCount: Ptr[int64](1),
					MinNodeCount: Ptr[int64](0), Role: Ptr("worker"), Status: magnum.StatusCreateInProgress,
					Labels: magnum.NewDict("foo", "bar")}
				if s.Schema().NodeGroupLabelsTaints {
					extra.NodeLabels = magnum.NewDict("tier", "batch")
					extra.NodeTaints = []magnum.Dict{magnum.NewDict("key", "dedicated", "value", "batch", "effect", "NoSchedule")}
				}
				got, created, err := s.CreateNodeGroup(ctx, extra)
				require.NoError(t, err)
				assert.True(t, created)
				assert.False(t, got.IsDefault)
				_, created, err = s.CreateNodeGroup(ctx, extra)
				require.NoError(t, err)
				assert.False(t, created)
				clash := *extra
				clash.UUID = newUUID(t)
				_, _, err = s.CreateNodeGroup(ctx, &clash)
				assert.ErrorIs(t, err, magnum.ErrConflict)
				assert.Contains(t, err.Error(), "A node group with name ng-extra already exists")
				if s.Schema().NodeGroupLabelsTaints {
					nraw := rawRow(t, s, "nodegroup", s.quote("uuid")+" = ?", extra.UUID)
					assert.Equal(t, `[{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]`, nraw["node_taints"])
				}
				deleted, err := s.DeleteNodeGroup(ctx, c.UUID, extra.UUID)
				require.NoError(t, err)
				assert.True(t, deleted)
				deleted, err = s.DeleteNodeGroup(ctx, c.UUID, extra.UUID)
				require.NoError(t, err)
				assert.False(t, deleted)
				_, err = s.GetNodeGroup(ctx, c.UUID, extra.UUID)
				assert.ErrorIs(t, err, magnum.ErrNodeGroupNotFound)

				// Delete: cluster and nodegroups go together; afterwards clients get 404.
				deleted, err = s.DeleteCluster(ctx, c.UUID)
				require.NoError(t, err)
				assert.True(t, deleted)
				_, err = s.GetCluster(ctx, c.UUID)
				require.ErrorIs(t, err, magnum.ErrClusterNotFound)
				var exc *magnum.Exception
				require.True(t, errors.As(err, &exc))
				assert.Equal(t, 404, exc.Code)
				ngs, err = s.ListNodeGroups(ctx, c.UUID)
				require.NoError(t, err)
				assert.Empty(t, ngs)
				deleted, err = s.DeleteCluster(ctx, c.UUID)
				require.NoError(t, err)
				assert.False(t, deleted)
				_, err = s.UpdateCluster(ctx, c.UUID, Fields{"status": magnum.StatusDeleteComplete}, Guard{})
				assert.ErrorIs(t, err, magnum.ErrClusterNotFound)
			})
		})
	}
}

// magnum-api reads a cluster's row and then its node groups in separate queries: a cluster row
// must never be visible without its node groups. DeleteCluster removes the row at once (clients
// get 404) and the node groups only after NodeGroupDeleteDelay; node groups whose delayed removal
// never ran (store closed) go with a later delete, once the delay is past.
func TestDeleteClusterKeepsNodeGroupsForReaders(t *testing.T) {
	eachBackend(t, dbtest.Zed, func(t *testing.T, s *Store) {
		ctx := context.Background()
		s.opts.NodeGroupDeleteDelay = 300 * time.Millisecond
		c, m, w := newCluster(t)
		_, _, err := s.CreateCluster(ctx, c, m, w)
		require.NoError(t, err)

		start := time.Now()
		deleted, err := s.DeleteCluster(ctx, c.UUID)
		require.NoError(t, err)
		require.True(t, deleted)
		require.Less(t, time.Since(start), 300*time.Millisecond, "the caller does not wait for the delay")
		_, err = s.GetCluster(ctx, c.UUID)
		require.ErrorIs(t, err, magnum.ErrClusterNotFound, "404 from the delete on")
		ngs, err := s.ListNodeGroups(ctx, c.UUID)
		require.NoError(t, err)
		require.Len(t, ngs, 2, "a reader that read the cluster row just before still finds its node groups")
		require.Eventually(t, func() bool {
			ngs, err := s.ListNodeGroups(ctx, c.UUID)
			return err == nil && len(ngs) == 0
		}, 5*time.Second, 20*time.Millisecond, "gone once the delay is past")
		require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

		// A delayed removal cut short (a long delay, the store closed before it) is caught up by a
		// later delete once the delay is past, not before.
		s.opts.NodeGroupDeleteDelay = time.Hour
		now := time.Now()
		setClock(s, now)
		a, am, aw := newCluster(t)
		b, bm, bw := newCluster(t)
		for _, x := range [][]any{{a, am, aw}, {b, bm, bw}} {
			_, _, err := s.CreateCluster(ctx, x[0].(*Cluster), x[1].(*NodeGroup), x[2].(*NodeGroup))
			require.NoError(t, err)
		}
		_, err = s.DeleteCluster(ctx, a.UUID)
		require.NoError(t, err)
		setClock(s, now.Add(59*time.Minute))
		_, err = s.DeleteCluster(ctx, b.UUID)
		require.NoError(t, err)
		ngs, err = s.ListNodeGroups(ctx, a.UUID)
		require.NoError(t, err)
		require.Len(t, ngs, 2, "within the delay")
		setClock(s, now.Add(2*time.Hour))
		c2, c2m, c2w := newCluster(t)
		_, _, err = s.CreateCluster(ctx, c2, c2m, c2w)
		require.NoError(t, err)
		_, err = s.DeleteCluster(ctx, c2.UUID)
		require.NoError(t, err)
		for _, gone := range []string{a.UUID, b.UUID} {
			ngs, err = s.ListNodeGroups(ctx, gone)
			require.NoError(t, err)
			require.Empty(t, ngs, "orphans past the delay are removed")
		}
		ngs, err = s.ListNodeGroups(ctx, c2.UUID)
		require.NoError(t, err)
		require.Len(t, ngs, 2, "the cluster just deleted keeps its node groups for the delay")
		start = time.Now()
		require.NoError(t, s.Close())
		require.Less(t, time.Since(start), 5*time.Second, "Close does not wait for pending delays")
	})
}

func TestSchemaSpecificColumns(t *testing.T) {
	t.Run("23.0.0 has no trust columns", func(t *testing.T) {
		eachBackend(t, dbtest.Release23, func(t *testing.T, s *Store) {
			ctx := context.Background()
			c, m, w := newCluster(t)
			c.TrustID = Ptr("t-1")
			_, _, err := s.CreateCluster(ctx, c, m, w)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `column "trust_id" does not exist in this database (Magnum 23.0.0`)
			c.TrustID = nil // NULL trust fields (a view decoded from a Zed message) are simply not written
			_, created, err := s.CreateCluster(ctx, c, m, w)
			require.NoError(t, err)
			assert.True(t, created)
			_, err = s.UpdateCluster(ctx, c.UUID, Fields{"trustee_password": "x"}, Guard{})
			assert.ErrorContains(t, err, `column "trustee_password" does not exist`)
		})
	})
	t.Run("Zed has no node labels, but trusts", func(t *testing.T) {
		eachBackend(t, dbtest.Zed, func(t *testing.T, s *Store) {
			ctx := context.Background()
			c, m, w := newCluster(t)
			c.TrustID, c.TrusteePassword = Ptr("t-1"), Ptr(magnum.Secret("pw-in-clear-text"))
			w.NodeLabels = magnum.NewDict("tier", "batch")
			_, _, err := s.CreateCluster(ctx, c, m, w)
			assert.ErrorContains(t, err, `column "node_labels" does not exist in this database (Magnum 15.0.1`)
			w.NodeLabels = magnum.Dict{}
			row, _, err := s.CreateCluster(ctx, c, m, w)
			require.NoError(t, err)
			assert.Equal(t, "t-1", *row.TrustID)
			assert.Equal(t, "pw-in-clear-text", row.TrusteePassword.Reveal())
			assert.NotContains(t, fmt.Sprintf("%v %+v", *row, row.TrusteePassword), "pw-in-clear-text")
		})
	})
	t.Run("cluster_template.driver from 18.0.0", func(t *testing.T) {
		for _, rel := range []dbtest.Release{dbtest.Zed, dbtest.Release2024} {
			eachBackend(t, rel, func(t *testing.T, s *Store) {
				id := newUUID(t)
				cols, vals := "uuid, name, coe, public, server_type", []any{id, "k8s", "kubernetes", false, "vm"}
				if s.Schema().ClusterTemplateDriver {
					cols, vals = cols+", driver", append(vals, "k8s_capi_helm_v1")
				}
				execAdmin(t, s, "INSERT INTO cluster_template ("+cols+") VALUES ("+placeholders(len(vals))+")", vals...)
				tmpl, err := s.GetClusterTemplate(context.Background(), id)
				require.NoError(t, err)
				assert.Equal(t, "kubernetes", *tmpl.COE)
				assert.True(t, tmpl.FloatingIPEnabled, "NULL reads as the object's default")
				obj, err := magnum.EncodeAt(tmpl.View(), magnum.MustVersion("1.21"), nil)
				require.NoError(t, err)
				if s.Schema().ClusterTemplateDriver {
					assert.Equal(t, "k8s_capi_helm_v1", *tmpl.Driver)
					raw, _ := obj.Raw("driver")
					assert.Equal(t, `"k8s_capi_helm_v1"`, string(raw))
				} else {
					assert.Nil(t, tmpl.Driver)
					assert.False(t, obj.Has("driver"), "no column, no field")
				}
				raw, _ := obj.Raw("coe")
				assert.Equal(t, `"kubernetes"`, string(raw))
				_, err = s.GetClusterTemplate(context.Background(), newUUID(t))
				assert.ErrorContains(t, err, "could not be found")
			})
		}
	})
}

// Two bridge replicas (or the API and the bridge) race to move a cluster out of
// CREATE_IN_PROGRESS: exactly one wins, the others learn what they lost to.
func TestGuardedUpdateLosesRace(t *testing.T) {
	eachBackend(t, dbtest.Zed, func(t *testing.T, s *Store) {
		ctx := context.Background()
		c, m, w := newCluster(t)
		_, _, err := s.CreateCluster(ctx, c, m, w)
		require.NoError(t, err)
		// A second replica: its own pool on the same database.
		other := openTest(t, s.opts.Connection)

		const racers = 8
		var wg sync.WaitGroup
		results := make([]error, racers)
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				store := s
				if i%2 == 1 {
					store = other
				}
				status := magnum.StatusCreateComplete
				if i%3 == 0 {
					status = magnum.StatusCreateFailed
				}
				_, results[i] = store.UpdateCluster(ctx, c.UUID, Fields{"status": status, "status_reason": fmt.Sprintf("racer %d", i)},
					IfStatus(magnum.StatusCreateInProgress))
			}(i)
		}
		wg.Wait()
		winners := 0
		for _, err := range results {
			if err == nil {
				winners++
				continue
			}
			var ce *ConflictError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, ErrConflict)
			assert.NotEqual(t, magnum.StatusCreateInProgress, ce.Status, "the loser sees the winner's status")
		}
		assert.Equal(t, 1, winners)

		// updated_at guard: read, someone else writes later, the stale write is refused.
		read, err := s.GetCluster(ctx, c.UUID)
		require.NoError(t, err)
		setClock(other, read.UpdatedAt.Add(3*time.Second))
		_, err = other.UpdateCluster(ctx, c.UUID, Fields{"health_status": magnum.HealthUnhealthy}, Guard{})
		require.NoError(t, err)
		_, err = s.UpdateCluster(ctx, c.UUID, Fields{"health_status": magnum.HealthHealthy}, IfUnchangedSince(read.UpdatedAt))
		var ce *ConflictError
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, err.Error(), "updated_at is")
		fresh, err := s.GetCluster(ctx, c.UUID)
		require.NoError(t, err)
		assert.Equal(t, magnum.HealthUnhealthy, fresh.HealthStatus)
		_, err = s.UpdateCluster(ctx, c.UUID, Fields{"health_status": magnum.HealthHealthy}, IfUnchangedSince(fresh.UpdatedAt))
		require.NoError(t, err)

		// A guard on a row never updated: updated_at must still be NULL.
		ng, err := s.GetNodeGroup(ctx, c.UUID, w.UUID)
		require.NoError(t, err)
		require.Nil(t, ng.UpdatedAt)
		_, err = s.UpdateNodeGroup(ctx, c.UUID, w.UUID, Fields{"stack_id": "x"}, IfUnchangedSince(nil))
		require.NoError(t, err)
		_, err = s.UpdateNodeGroup(ctx, c.UUID, w.UUID, Fields{"stack_id": "y"}, IfUnchangedSince(nil))
		assert.ErrorIs(t, err, ErrConflict)
	})
}

// killConnection ends the transaction's server session from another connection, so that the
// COMMIT that follows fails as after a network cut or a database failover.
func killConnection(ctx context.Context, s *Store, tx *sql.Tx) error {
	var id int64
	q := "SELECT CONNECTION_ID()"
	kill := "KILL %d"
	if s.name() == Postgres {
		q, kill = "SELECT pg_backend_pid()", "SELECT pg_terminate_backend(%d)"
	}
	if err := tx.QueryRowContext(ctx, q).Scan(&id); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, fmt.Sprintf(kill, id))
	return err
}

func TestRetriesNeverApplyTwice(t *testing.T) {
	eachBackend(t, dbtest.Zed, func(t *testing.T, s *Store) {
		ctx := context.Background()

		t.Run("connection killed before commit: the write is retried once", func(t *testing.T) {
			c, m, w := newCluster(t)
			attempts := 0
			s.hooks.beforeCommit = func(ctx context.Context, attempt int, tx *sql.Tx) error {
				attempts = attempt
				if attempt == 1 {
					return killConnection(ctx, s, tx)
				}
				return nil
			}
			defer func() { s.hooks.beforeCommit = nil }()
			row, created, err := s.CreateCluster(ctx, c, m, w)
			require.NoError(t, err)
			assert.True(t, created)
			assert.Equal(t, 2, attempts, "the first commit failed on the killed connection")
			ngs, err := s.ListNodeGroups(ctx, row.UUID)
			require.NoError(t, err)
			assert.Len(t, ngs, 2)
		})

		// The commit went through but the client never heard: the retry must notice.
		lostAck := func() func() {
			s.hooks.afterCommit = func(attempt int) error {
				if attempt == 1 {
					return driver.ErrBadConn
				}
				return nil
			}
			return func() { s.hooks.afterCommit = nil }
		}

		t.Run("lost commit acknowledgement: guarded status update", func(t *testing.T) {
			c, m, w := newCluster(t)
			_, _, err := s.CreateCluster(ctx, c, m, w)
			require.NoError(t, err)
			defer lostAck()()
			// The retry finds the status already CREATE_COMPLETE: that is its own write, not a conflict.
			row, err := s.UpdateCluster(ctx, c.UUID, Fields{"status": magnum.StatusCreateComplete}, IfStatus(magnum.StatusCreateInProgress))
			require.NoError(t, err)
			assert.Equal(t, magnum.StatusCreateComplete, row.Status)
		})

		t.Run("lost commit acknowledgement: insert", func(t *testing.T) {
			c, m, w := newCluster(t)
			defer lostAck()()
			_, created, err := s.CreateCluster(ctx, c, m, w)
			require.NoError(t, err)
			assert.True(t, created, "the row is this call's own")
			ngs, err := s.ListNodeGroups(ctx, c.UUID)
			require.NoError(t, err)
			assert.Len(t, ngs, 2)
		})

		t.Run("lost commit acknowledgement: heartbeat counts once", func(t *testing.T) {
			host := "host-" + newUUID(t)
			_, err := s.ReportServiceUp(ctx, host, magnum.ConductorBinary)
			require.NoError(t, err)
			setClock(s, time.Now().Add(time.Minute))
			defer setClock(s, time.Now())
			restore := lostAck()
			svc, err := s.ReportServiceUp(ctx, host, magnum.ConductorBinary)
			restore()
			require.NoError(t, err)
			assert.Equal(t, int64(2), svc.ReportCount)
			got, err := s.GetService(ctx, host, magnum.ConductorBinary)
			require.NoError(t, err)
			assert.Equal(t, int64(2), got.ReportCount)
		})

		t.Run("errors that are not transient are not retried", func(t *testing.T) {
			calls := 0
			s.hooks.beforeCommit = func(context.Context, int, *sql.Tx) error { calls++; return errors.New("boom") }
			defer func() { s.hooks.beforeCommit = nil }()
			_, err := s.ReportServiceUp(ctx, "h", magnum.ConductorBinary)
			assert.ErrorContains(t, err, "boom")
			assert.Equal(t, 1, calls)
		})
	})
}

func TestX509KeyPairs(t *testing.T) {
	eachBackend(t, dbtest.Zed, func(t *testing.T, s *Store) {
		ctx := context.Background()
		kp := &X509KeyPair{UUID: newUUID(t), Certificate: Ptr("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"),
			PrivateKey: Ptr(magnum.Secret("-----BEGIN ENCRYPTED PRIVATE KEY-----\nsecret-key\n")), PrivateKeyPassphrase: Ptr(magnum.Secret("kmdqt2mx5mhv")),
			ProjectID: Ptr("p-1"), UserID: Ptr("u-1")}
		row, created, err := s.CreateX509KeyPair(ctx, kp)
		require.NoError(t, err)
		assert.True(t, created)
		assert.Equal(t, "kmdqt2mx5mhv", row.PrivateKeyPassphrase.Reveal())
		assert.Nil(t, row.Intermediates)
		assert.NotContains(t, fmt.Sprintf("%+v %v %v", *row, *row.PrivateKey, *row.PrivateKeyPassphrase), "secret-key")
		_, created, err = s.CreateX509KeyPair(ctx, kp)
		require.NoError(t, err)
		assert.False(t, created)
		deleted, err := s.DeleteX509KeyPair(ctx, kp.UUID)
		require.NoError(t, err)
		assert.True(t, deleted)
		_, err = s.GetX509KeyPair(ctx, kp.UUID)
		assert.ErrorIs(t, err, magnum.ErrX509KeyPairNotFound)
	})
}

func TestFindClusterTemplates(t *testing.T) {
	eachBackend(t, dbtest.Zed, func(t *testing.T, s *Store) {
		ctx := context.Background()
		insert := func(name, project string, public bool) string {
			id := newUUID(t)
			execAdmin(t, s, "INSERT INTO cluster_template (uuid, name, coe, public, server_type, project_id) VALUES (?, ?, ?, ?, ?, ?)",
				id, name, "kubernetes", public, "vm", project)
			return id
		}
		own := insert("k8s-own", "p-1", false)
		public := insert("k8s-public", "p-9", true)
		other := insert("k8s-other", "p-2", false)
		insert("k8s-twice", "p-1", false)
		insert("k8s-twice", "p-9", true)

		ids := func(project, ident string) []string {
			found, err := s.FindClusterTemplates(ctx, project, ident)
			require.NoError(t, err)
			var out []string
			for _, f := range found {
				out = append(out, f.UUID)
			}
			return out
		}
		assert.Equal(t, []string{own}, ids("p-1", "k8s-own"))
		assert.Equal(t, []string{own}, ids("p-1", own), "by uuid")
		assert.Equal(t, []string{public}, ids("p-1", "k8s-public"), "a public template of another project")
		assert.Empty(t, ids("p-1", "k8s-other"), "another project's private template")
		assert.Empty(t, ids("p-1", other))
		assert.Len(t, ids("p-1", "k8s-twice"), 2)
		assert.Empty(t, ids("p-1", "nope"))
	})
}
