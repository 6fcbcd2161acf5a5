package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/notify"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/telemetry"
)

// fakeStore is an in-memory conductor.Store with just the cluster rows these tests write.
type fakeStore struct {
	conductor.Store
	clusters map[string]*magnum.Cluster
}

func (f *fakeStore) GetCluster(_ context.Context, id string) (*magnum.Cluster, error) {
	if c, ok := f.clusters[id]; ok {
		return c, nil
	}
	return nil, conductor.ErrNotFound
}

func (f *fakeStore) ListNodeGroups(context.Context, string) ([]*magnum.NodeGroup, error) {
	return nil, nil
}

func (f *fakeStore) UpdateCluster(_ context.Context, id string, u conductor.ClusterUpdate) error {
	c, ok := f.clusters[id]
	if !ok {
		return conductor.ErrNotFound
	}
	if u.Status != nil {
		c.Status.Set(*u.Status)
	}
	return nil
}

func (f *fakeStore) DeleteCluster(_ context.Context, id string) error {
	delete(f.clusters, id)
	return nil
}

type sentNotes struct{ got []*rpc.Notification }

func (s *sentNotes) Notify(_ context.Context, n *rpc.Notification) error {
	s.got = append(s.got, n)
	return nil
}

func TestObservedStoreTimesOperationsAndNotifies(t *testing.T) {
	m := telemetry.New()
	notes := &sentNotes{}
	c := &magnum.Cluster{}
	c.UUID.Set("c-1")
	c.Status.Set("UPDATE_IN_PROGRESS")
	st := newObservedStore(&fakeStore{clusters: map[string]*magnum.Cluster{"c-1": c}}, m, notify.New(notes, "container-infra.h", nil, m.Notification))
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st.now = func() time.Time { return now }

	// An RPC handler starts an update.
	rctx := &rpc.Context{UserID: "u1", ProjectID: "p1", RequestID: "req-1"}
	ctx := rpcHandlerContext(t, rctx)
	inProgress := magnum.ClusterStatus("UPDATE_IN_PROGRESS")
	require.NoError(t, st.UpdateCluster(ctx, "c-1", conductor.ClusterUpdate{Status: &inProgress}))
	require.Len(t, notes.got, 1)
	assert.Equal(t, "magnum.cluster.update", notes.got[0].EventType)
	assert.Equal(t, "req-1", notes.got[0].Context.RequestID)

	// The status sync completes it 90 s later, 2 s after CAPI's transition.
	now = now.Add(90 * time.Second)
	syncCtx := context.WithValue(context.Background(), transitionKey{}, now.Add(-2*time.Second))
	complete := magnum.ClusterStatus("UPDATE_COMPLETE")
	require.NoError(t, st.UpdateCluster(syncCtx, "c-1", conductor.ClusterUpdate{Status: &complete}))
	assert.Equal(t, 1, testutil.CollectAndCount(m.Registry, "magnum_capi_bridge_status_lag_seconds"))
	lag := gatherSum(t, m, "magnum_capi_bridge_status_lag_seconds")
	assert.InDelta(t, 2.0, lag, 0.001)
	assert.InDelta(t, 90.0, gatherSum(t, m, "magnum_capi_bridge_operation_duration_seconds"), 0.001)
	require.Len(t, notes.got, 2)
	assert.True(t, notes.got[1].Context.IsAdmin, "the sync notifies as Magnum's admin context")
	assert.Contains(t, string(notes.got[1].Payload), `"outcome":"success"`)

	// A delete finishing removes the row: DELETE_COMPLETE, timed from its start.
	deleting := magnum.ClusterStatus("DELETE_IN_PROGRESS")
	require.NoError(t, st.UpdateCluster(ctx, "c-1", conductor.ClusterUpdate{Status: &deleting}))
	now = now.Add(30 * time.Second)
	require.NoError(t, st.DeleteCluster(syncCtx, "c-1"))
	assert.Contains(t, string(notes.got[len(notes.got)-1].Payload), `"DELETE_COMPLETE"`)
	assert.Equal(t, "magnum.cluster.delete", notes.got[len(notes.got)-1].EventType)
}

func gatherSum(t *testing.T, m *telemetry.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	var s float64
	for _, f := range families {
		if f.GetName() == name {
			for _, mm := range f.GetMetric() {
				s += mm.GetHistogram().GetSampleSum()
			}
		}
	}
	return s
}

// rpcHandlerContext is a context as the RPC server gives its handlers, carrying the request.
func rpcHandlerContext(t *testing.T, rctx *rpc.Context) context.Context {
	t.Helper()
	return rpc.WithRequest(context.Background(), &rpc.Request{Method: "cluster_update", Context: rctx, Cluster: "c-1"})
}

type recordingSink struct{ observed, gone int }

func (r *recordingSink) ClusterObserved(context.Context, string, capi.Observation) (time.Duration, error) {
	r.observed++
	return 0, nil
}

func (r *recordingSink) ClusterGone(context.Context, string, string) error { r.gone++; return nil }

func TestGatedSink(t *testing.T) {
	leader := false
	sink := &recordingSink{}
	g := &gatedSink{sink: sink, leader: func() bool { return leader }, kicked: &kickMarks{}}
	obs := capi.Observation{Cluster: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "magnum-p", Name: "c"}}}
	_, err := g.ClusterObserved(context.Background(), "id", obs)
	require.NoError(t, err)
	assert.Equal(t, 0, sink.observed, "a follower does not run the status sync")
	g.kicked.mark("magnum-p/c")
	_, _ = g.ClusterObserved(context.Background(), "id", obs)
	_, _ = g.ClusterObserved(context.Background(), "id", obs)
	assert.Equal(t, 1, sink.observed, "a cluster this replica kicked is looked at once")
	require.NoError(t, g.ClusterGone(context.Background(), "magnum-p", "c"))
	assert.Equal(t, 0, sink.gone)
	leader = true
	_, _ = g.ClusterObserved(context.Background(), "id", obs)
	require.NoError(t, g.ClusterGone(context.Background(), "magnum-p", "c"))
	assert.Equal(t, 2, sink.observed)
	assert.Equal(t, 1, sink.gone)
}

func TestLatestTransition(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cond := func(d time.Duration) []metav1.Condition {
		return []metav1.Condition{{Type: "Available", LastTransitionTime: metav1.NewTime(t0.Add(d))}}
	}
	obs := capi.Observation{Cluster: &clusterv1.Cluster{Status: clusterv1.ClusterStatus{Conditions: cond(time.Second)}},
		MachineDeployments: []clusterv1.MachineDeployment{{Status: clusterv1.MachineDeploymentStatus{Conditions: cond(5 * time.Second)}}},
		Machines:           []clusterv1.Machine{{Status: clusterv1.MachineStatus{Conditions: cond(3 * time.Second)}}}}
	assert.Equal(t, t0.Add(5*time.Second), latestTransition(obs))
	assert.True(t, latestTransition(capi.Observation{}).IsZero())
}

// The Keystone clients' HTTP client wraps whatever transport it was given, the default one included.
func TestCountingTransportCountsOnTheDefaultTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	counted := 0
	hc := &http.Client{Transport: countingTransport{count: func() { counted++ }}}
	resp, err := hc.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 1, counted)

	k := &keystoneCredentials{countError: func() { counted++ }}
	opts, err := k.clientOptions()
	require.NoError(t, err)
	require.NotEmpty(t, opts)
}
