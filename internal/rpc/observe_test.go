package rpc

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/logctx"
)

// TestObserveAndConsuming: every delivery is reported with its method and outcome, handlers see
// the request and its log attributes in their context, the in-flight count returns to zero, and
// Consuming follows the connection (it is what /readyz and the heartbeat read).
func TestObserveAndConsuming(t *testing.T) {
	b := rpctestNewVhost(t)
	o, _ := testOptions(t, b)
	var mu sync.Mutex
	var seen []Observation
	o.Observe = func(ob Observation) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, ob)
	}
	attempts := 0
	attrs := make(chan [3]string, 10)
	srv := startServer(t, o, map[string]Handler{
		"cluster_update": func(ctx context.Context, r *Request) (any, error) {
			if RequestFrom(ctx) != r {
				t.Error("the handler's context does not carry its request")
			}
			attrs <- [3]string{logctx.Value(ctx, "cluster"), logctx.Value(ctx, "method"), logctx.Value(ctx, "request_id")}
			attempts++
			if attempts == 1 {
				return nil, Retry(errors.New("database is down"))
			}
			time.Sleep(20 * time.Millisecond)
			return nil, nil
		},
	})
	if !srv.Consuming() {
		t.Fatal("not consuming after Ready")
	}
	c := newClient(t, o)
	rctx := testContext()
	rctx.RequestID = "req-observe-1"
	if err := c.Cast(context.Background(), "cluster_update", map[string]any{"uuid": "c-7"}, rctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Cast(context.Background(), "no_such_thing", map[string]any{}, rctx); err != nil {
		t.Fatal(err)
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 3
	}, 10*time.Second, 20*time.Millisecond, "both messages finished")
	mu.Lock()
	byOutcome := map[string]Observation{}
	for _, ob := range seen {
		byOutcome[ob.Outcome] = ob
	}
	mu.Unlock()
	if ob := byOutcome[OutcomeRetry]; ob.Method != "cluster_update" || ob.Duration <= 0 {
		t.Errorf("retry observation %+v", ob)
	}
	if ob := byOutcome[OutcomeOK]; ob.Method != "cluster_update" || ob.Duration < 20*time.Millisecond {
		t.Errorf("ok observation %+v", ob)
	}
	if ob, ok := byOutcome[OutcomeRejected]; !ok || ob.Method != "" {
		t.Errorf("an unknown method is reported without its name: %+v", ob)
	}
	if a := <-attrs; a != [3]string{"c-7", "cluster_update", "req-observe-1"} {
		t.Errorf("log attributes %v", a)
	}
	require.Eventually(t, func() bool { return srv.Stats().InFlight == 0 }, 5*time.Second, 20*time.Millisecond, "nothing in flight")

	b.CloseConnections(t, "test: broker gone")
	require.Eventually(t, func() bool { return !srv.Consuming() || srv.Stats().Sessions >= 2 }, 2*time.Second, 20*time.Millisecond, "not consuming once the connection is cut")
	require.Eventually(t, func() bool { return srv.Consuming() && srv.Stats().Sessions >= 2 }, 10*time.Second, 20*time.Millisecond, "consuming again")
}
