package conductor

import (
	"context"
	"encoding/json"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

// Replicas: two conductors over the same rows, CAPI objects and key pairs, with operation claims
// shared through claimStore. Replica a is h.c; b is the leader (its Resync is the periodic resume).

func (h *harness) replicas(claims *claimStore) (a, b *Conductor) {
	h.c.opts.Claims = claims.replica("a")
	opts := h.c.opts
	opts.Claims = claims.replica("b")
	return h.c, New(h.store, h.kube, certs.NewManager(h.keys), opts)
}

func deliverTo(t *testing.T, c *Conductor, req *rpc.Request) {
	t.Helper()
	req.Attempt = 1
	_, err := c.Handlers()[req.Method](context.Background(), req)
	require.NoError(t, err)
}

// A non-leader replica dies (SIGKILL) in the middle of an operation its handler recorded: once its
// claim expires, the leader's periodic resume drives the operation to its end — and not before,
// while the claim could still be a live replica's.
func TestLeaderResumesTheOperationOfADeadReplica(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	id := h.created(2)
	claims := newClaimStore(h.clock)
	a, b := h.replicas(claims)

	h.f.failNext("kube.Apply", -1, errAPIServerDown)
	deliverTo(t, a, request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 4)}))
	retries, _ := settleOn(a, 1)
	require.Equal(t, 1, retries, "a's first apply fails; a dies before its retry")
	require.Equal(t, "a", claims.holder(id))
	h.f.clear()

	require.NoError(t, b.Resync(ctx))
	retries, waiting := settleOn(b, 10)
	require.Zero(t, retries+waiting)
	require.EqualValues(t, 2, h.kube.workerReplicas(t, "default-worker"), "a's claim is live: the leader leaves the operation to it")

	h.advance(21 * time.Second) // nobody renewed a's claim: it expired
	require.NoError(t, b.Resync(ctx))
	retries, _ = settleOn(b, 10)
	require.Zero(t, retries)
	require.Equal(t, "b", claims.holder(id), "the leader took the operation over")
	h.consistent(id, 4)

	h.complete(id) // the status sync saw CAPI converge
	b.renewClaims(ctx)
	require.Zero(t, claims.len(), "the claim ends with the operation")
}

// A live replica keeps its operation: the leader's resume never drives it a second time, however
// long CAPI takes to converge.
func TestLeaderLeavesALiveReplicasOperationAlone(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	id := h.created(2)
	claims := newClaimStore(h.clock)
	a, b := h.replicas(claims)

	deliverTo(t, a, request("cluster_update", map[string]json.RawMessage{"cluster": h.clusterArg(id), "node_count": jsonArg(t, 3)}))
	retries, _ := settleOn(a, 10)
	require.Zero(t, retries)
	h.consistent(id, 3)

	// Any apply from here on would be a second driver.
	h.f.failNext("kube.Apply", -1, errAPIServerDown)
	for range 10 {
		h.advance(10 * time.Second)
		a.renewClaims(ctx)
		require.NoError(t, b.Resync(ctx))
		retries, waiting := settleOn(b, 10)
		require.Zero(t, retries+waiting)
		require.Equal(t, "a", claims.holder(id))
	}
	require.Equal(t, magnum.StatusUpdateInProgress, h.store.cluster(t, id).Status.Or(""))
	h.f.clear()
	h.complete(id)
	a.renewClaims(ctx)
	require.Zero(t, claims.len())
}

// A delete handled by b while a drives the cluster's create waits for a's claim: a lets go once it
// is not busy with the cluster, b deletes, and nothing is left — no CAPI object re-applied after
// the delete, no key pair, no row, no claim.
func TestDeleteOnAnotherReplicaWaitsForTheCreatesClaim(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	claims := newClaimStore(h.clock)
	a, b := h.replicas(claims)

	req, id := h.createRequest("demo", 2)
	deliverTo(t, a, req)
	require.Equal(t, "a", claims.holder(id), "the create's handler claims the cluster before issuing anything")
	_, err := b.Handlers()["cluster_create"](ctx, req)
	require.True(t, rpc.IsRetryable(err), "the same create redelivered to b waits for a's claim: %v", err)

	deliverTo(t, b, request("cluster_delete", map[string]json.RawMessage{"uuid": jsonArg(t, id)}))
	_, waiting := settleOn(b, 10)
	require.Equal(t, 1, waiting, "b waits for a's claim")

	// a drives what the rows say now (the delete), then lets go.
	retries, _ := settleOn(a, 10)
	require.Zero(t, retries)
	require.Empty(t, h.kube.clusters(), "a applied nothing after the delete was recorded")
	a.renewClaims(ctx)
	require.Empty(t, claims.holder(id))

	b.ops.queue.Add(id) // b's recheck
	retries, _ = settleOn(b, 10)
	require.Zero(t, retries)
	_, err = h.store.GetCluster(ctx, id)
	require.ErrorIs(t, err, ErrNotFound)
	require.Zero(t, h.keys.count())
	require.Zero(t, claims.len())
}

// An operation's claim moves with the operation: a delete recorded by b while a still holds the
// claim of the converging create is driven by b once a, not busy with it, lets go.
func TestClaimMovesToTheReplicaThatRecordedTheNextOperation(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	claims := newClaimStore(h.clock)
	a, b := h.replicas(claims)

	req, id := h.createRequest("demo", 2)
	deliverTo(t, a, req)
	retries, _ := settleOn(a, 10)
	require.Zero(t, retries)
	require.Len(t, h.kube.clusters(), 1)
	require.Equal(t, 4, h.keys.count())

	deliverTo(t, b, request("cluster_delete", map[string]json.RawMessage{"uuid": jsonArg(t, id)}))
	_, waiting := settleOn(b, 10)
	require.Equal(t, 1, waiting)
	a.renewClaims(ctx) // the create ended (a delete replaced it): a lets go
	b.ops.queue.Add(id)
	settleOn(b, 10)
	require.Equal(t, "b", claims.holder(id))
	h.kube.finishDeleting()
	b.renewClaims(ctx) // the holder looks at its delete again: CAPI's Cluster is gone
	settleOn(b, 10)
	_, err := h.store.GetCluster(ctx, id)
	require.ErrorIs(t, err, ErrNotFound)
	require.Empty(t, h.kube.clusters())
	require.Zero(t, h.keys.count())
	require.Zero(t, claims.len())
}

// The leader sweeps claims whose replica died after the operation ended some other way (the
// status sync completed it).
func TestLeaderSweepsClaimsOfDeadReplicas(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	claims := newClaimStore(h.clock)
	a, b := h.replicas(claims)
	req, id := h.createRequest("demo", 2)
	deliverTo(t, a, req)
	settleOn(a, 10)
	h.complete(id) // a dies before it sees this
	require.NoError(t, b.Resync(ctx))
	require.Equal(t, "a", claims.holder(id), "not expired yet")
	h.advance(21 * time.Second)
	require.NoError(t, b.Resync(ctx))
	require.Zero(t, claims.len())
	_ = a
}
