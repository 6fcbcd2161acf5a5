package db

import (
	"context"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
)

func TestReportServiceUp(t *testing.T) {
	eachBackend(t, dbtest.Zed, func(t *testing.T, s *Store) {
		ctx := context.Background()
		t0 := time.Date(2026, 11, 30, 5, 0, 0, 500, time.UTC)
		setClock(s, t0)
		svc, err := s.ReportServiceUp(ctx, "conductor-host-1", magnum.ConductorBinary)
		require.NoError(t, err)
		assert.Equal(t, int64(1), svc.ReportCount)
		assert.Equal(t, t0.Truncate(time.Second), svc.CreatedAt)
		assert.Equal(t, t0.Truncate(time.Second), *svc.LastSeenUp)
		assert.Equal(t, t0.Truncate(time.Second), *svc.UpdatedAt)
		raw := rawRow(t, s, "magnum_service", s.quote("host")+" = ?", "conductor-host-1")
		assert.Equal(t, map[string]string{"id": raw["id"], "host": "conductor-host-1", "binary": "magnum-conductor",
			"report_count": "1", "disabled": "0", "disabled_reason": "NULL", "forced_down": "0",
			"created_at": "2026-11-30 05:00:00", "updated_at": "2026-11-30 05:00:00", "last_seen_up": "2026-11-30 05:00:00"}, raw)

		// An operator disables the service (`coe service` has no such command, but the row
		// may be edited): the heartbeat keeps those flags.
		execAdmin(t, s, "UPDATE magnum_service SET disabled = ?, disabled_reason = ?, forced_down = ?", true, "maintenance", true)
		setClock(s, t0.Add(60*time.Second))
		svc, err = s.ReportServiceUp(ctx, "conductor-host-1", magnum.ConductorBinary)
		require.NoError(t, err)
		assert.Equal(t, int64(2), svc.ReportCount)
		assert.True(t, svc.Disabled)
		assert.True(t, svc.ForcedDown)
		assert.Equal(t, "maintenance", *svc.DisabledReason)
		assert.Equal(t, t0.Add(60*time.Second).Truncate(time.Second), *svc.LastSeenUp)
		assert.Equal(t, t0.Truncate(time.Second), svc.CreatedAt)

		// Two replicas with the same host start together on an empty row: one row, two reports.
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.ReportServiceUp(ctx, "conductor-host-2", magnum.ConductorBinary)
				assert.NoError(t, err)
			}()
		}
		wg.Wait()
		rows := rawRows(t, s, "magnum_service", s.quote("host")+" = ?", "conductor-host-2")
		require.Len(t, rows, 1)
		assert.Equal(t, "2", rows[0]["report_count"])

		missing, err := s.GetService(ctx, "nobody", magnum.ConductorBinary)
		require.NoError(t, err)
		assert.Nil(t, missing)
	})
}

func TestHeartbeatRunner(t *testing.T) {
	eachBackend(t, dbtest.Zed, func(t *testing.T, s *Store) {
		ctx, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var beats []int64
		// A beat may last at most the interval: a second leaves room for a loaded CI machine.
		hb := &Heartbeat{Store: s, Host: "hb-host", Interval: time.Second, OnBeat: func(svc *MagnumService, err error) {
			mu.Lock()
			defer mu.Unlock()
			if assert.NoError(t, err) {
				beats = append(beats, svc.ReportCount)
			}
			if len(beats) == 4 {
				cancel()
			}
		}}
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- hb.Run(ctx) }()
		select {
		case err := <-done:
			require.NoError(t, err, "Run returns nil when its context ends")
		case <-time.After(30 * time.Second):
			t.Fatal("heartbeat did not stop")
		}
		elapsed := time.Since(start)
		mu.Lock()
		assert.Equal(t, []int64{1, 2, 3, 4}, beats, "a beat at start, then one per interval")
		mu.Unlock()
		assert.GreaterOrEqual(t, elapsed, 3*time.Second)
		svc, err := s.GetService(context.Background(), "hb-host", magnum.ConductorBinary)
		require.NoError(t, err)
		assert.Equal(t, int64(4), svc.ReportCount)
		assert.Equal(t, magnum.ConductorBinary, svc.Binary)
	})

	t.Run("paused while the bridge cannot consume", func(t *testing.T) {
		eachBackend(t, dbtest.Zed, func(t *testing.T, s *Store) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var alive atomic.Bool
			beats := make(chan int64, 100)
			// A beat's write may outlast its interval on a loaded machine (the beat is then retried):
			// the counts below tell whether beats happen, not each write's error.
			hb := &Heartbeat{Store: s, Host: "hb-gated", Interval: 300 * time.Millisecond, Alive: alive.Load,
				OnBeat: func(svc *MagnumService, err error) {
					if err == nil {
						beats <- svc.ReportCount
					}
				}}
			done := make(chan error, 1)
			go func() { done <- hb.Run(ctx) }()
			time.Sleep(400 * time.Millisecond)
			assert.Empty(t, beats, "no beat before the bridge consumes")
			svc, err := s.GetService(ctx, "hb-gated", magnum.ConductorBinary)
			require.NoError(t, err)
			assert.Nil(t, svc, "no row: magnum-api lists no conductor yet")

			alive.Store(true)
			select {
			case n := <-beats:
				assert.Equal(t, int64(1), n)
			case <-time.After(3 * time.Second):
				t.Fatal("no beat within 3 s of consuming")
			}
			alive.Store(false)
			time.Sleep(450 * time.Millisecond) // a beat already under way ends
			for len(beats) > 0 {
				<-beats
			}
			before, err := s.GetService(ctx, "hb-gated", magnum.ConductorBinary)
			require.NoError(t, err)
			time.Sleep(1200 * time.Millisecond)
			after, err := s.GetService(ctx, "hb-gated", magnum.ConductorBinary)
			require.NoError(t, err)
			assert.Equal(t, before.ReportCount, after.ReportCount, "no beat while not consuming")
			cancel()
			require.NoError(t, <-done)
		})
	})

	t.Run("bad configuration", func(t *testing.T) {
		err := (&Heartbeat{Store: &Store{}, Host: "h", Interval: 61 * time.Second}).Run(context.Background())
		assert.ErrorContains(t, err, "longer than 1m0s")
		err = (&Heartbeat{Host: "h"}).Run(context.Background())
		assert.ErrorContains(t, err, "a store and a host are required")
	})
}

func TestHostFromConfig(t *testing.T) {
	f, err := config.Parse("[DEFAULT]\nhost = conductor-a\n")
	require.NoError(t, err)
	h, err := HostFromConfig(f)
	require.NoError(t, err)
	assert.Equal(t, "conductor-a", h)
	f, err = config.Parse("[DEFAULT]\n")
	require.NoError(t, err)
	h, err = HostFromConfig(f)
	require.NoError(t, err)
	want, _ := os.Hostname()
	assert.Equal(t, want, h)
}

// The conversions the conductor uses between RPC objects and rows.
func TestObjectConversions(t *testing.T) {
	eachBackend(t, dbtest.Release23, func(t *testing.T, s *Store) {
		ctx := context.Background()
		// nodegroup_update: the API sends the nodegroup from the DB with the patched fields in
		// changes; Python saves exactly those.
		wire := wireObject(t, "23.0.0", "nodegroup_update_node_labels_taints", "nodegroup")
		view, err := magnum.DecodeNodeGroup(wire)
		require.NoError(t, err)
		ng := NodeGroupFromView(view)
		ng.NodeLabels, ng.NodeTaints = magnum.Dict{}, nil // as before the patch
		_, _, err = s.CreateNodeGroup(ctx, ng)
		require.NoError(t, err)
		set, err := ChangedFields(view)
		require.NoError(t, err)
		assert.Equal(t, []string{"node_labels", "node_taints"}, sortedKeys(set))
		view.Status.Set(magnum.StatusUpdateInProgress)
		set, err = ChangedFields(view)
		require.NoError(t, err)
		assert.Equal(t, []string{"node_labels", "node_taints", "status"}, sortedKeys(set))
		row, err := s.UpdateNodeGroup(ctx, ng.ClusterID, ng.UUID, set, Guard{})
		require.NoError(t, err)
		assert.Equal(t, magnum.StatusUpdateInProgress, row.Status)
		raw := rawRow(t, s, "nodegroup", s.quote("uuid")+" = ?", ng.UUID)
		assert.Equal(t, `{"tier": "gpu"}`, raw["node_labels"])
		assert.Equal(t, `[{"key": "gpu", "value": "true", "effect": "NoExecute"}]`, raw["node_taints"])

		// A row back to an object: every field set, no changes, and it encodes for either API.
		back := row.View()
		assert.Empty(t, magnum.Changed(back))
		obj, err := magnum.Encode(back, magnum.NewVersions(magnum.Versions23))
		require.NoError(t, err)
		assert.Equal(t, "1.2", obj.Version.String())
		assert.True(t, obj.Has("node_taints"))
		obj, err = magnum.Encode(back, magnum.NewVersions(magnum.VersionsZed))
		require.NoError(t, err)
		assert.False(t, obj.Has("node_taints"))

		// Cluster: wire → row → DB → row → object, same field values as the API sent.
		cw := wireObject(t, "23.0.0", "cluster_upgrade", "cluster")
		cv, err := magnum.DecodeCluster(cw)
		require.NoError(t, err)
		c := ClusterFromView(cv)
		_, _, err = s.CreateCluster(ctx, c)
		require.NoError(t, err)
		got, err := s.GetCluster(ctx, c.UUID)
		require.NoError(t, err)
		reenc, err := magnum.EncodeAt(got.View(), cw.Version, nil)
		require.NoError(t, err)
		for _, name := range cw.FieldNames() {
			want, _ := cw.Raw(name)
			have, ok := reenc.Raw(name)
			require.True(t, ok, name)
			assert.JSONEq(t, string(want), string(have), name)
		}
		_, err = ChangedFields(&magnum.Certificate{})
		assert.Error(t, err)
	})
}

func sortedKeys(f Fields) []string {
	out := make([]string, 0, len(f))
	for k := range f {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
