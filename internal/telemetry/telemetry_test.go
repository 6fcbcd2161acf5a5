package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
)

func TestReadiness(t *testing.T) {
	consuming := true
	checks := []Check{
		{Name: "rabbitmq", Fn: func(context.Context) (string, error) {
			if !consuming {
				return "", errors.New("not consuming")
			}
			return "consuming", nil
		}},
		{Name: "leadership", Informational: true, Fn: func(context.Context) (string, error) { return "follower", nil }},
		{Name: "slow", Fn: func(ctx context.Context) (string, error) {
			<-ctx.Done() // a hung dependency: bounded by checkTimeout
			return "", ctx.Err()
		}},
	}
	srv := httptest.NewServer(Handler(New(), checks[:2]))
	defer srv.Close()
	code, body := fetch(t, srv.URL+"/readyz")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "[+]rabbitmq consuming")
	assert.Contains(t, body, "[+]leadership follower")
	consuming = false
	code, body = fetch(t, srv.URL+"/readyz")
	assert.Equal(t, 503, code)
	assert.Contains(t, body, "[-]rabbitmq failed: not consuming")
	code, _ = fetch(t, srv.URL+"/healthz")
	assert.Equal(t, 200, code, "alive even when not ready")

	start := time.Now()
	ok, body := Ready(context.Background(), checks[2:])
	assert.False(t, ok)
	assert.Contains(t, body, "[-]slow failed")
	assert.Less(t, time.Since(start), checkTimeout+time.Second)
}

func TestRPCMetrics(t *testing.T) {
	m := New()
	m.Methods([]string{"cluster_create"})
	m.WatchRPC(func() rpc.Stats { return rpc.Stats{InFlight: 3, Parked: 2, Retried: 5} }, func() bool { return true })
	m.ObserveRPC(rpc.Observation{Method: "cluster_create", Outcome: rpc.OutcomeOK, Duration: 120 * time.Millisecond})
	m.ObserveRPC(rpc.Observation{Method: "", Outcome: rpc.OutcomeRejected})
	assert.Equal(t, 1.0, testutil.ToFloat64(m.rpcMessages.WithLabelValues("cluster_create", "ok")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.rpcMessages.WithLabelValues("unknown", "rejected")), "names a sender chose never become labels")
	assert.Equal(t, 0.0, testutil.ToFloat64(m.rpcMessages.WithLabelValues("cluster_create", "error")), "declared methods start at zero")
	srv := httptest.NewServer(Handler(m, nil))
	defer srv.Close()
	_, body := fetch(t, srv.URL+"/metrics")
	for _, want := range []string{
		"magnum_capi_bridge_rpc_messages_in_flight 3",
		"magnum_capi_bridge_rpc_parked_total 2",
		"magnum_capi_bridge_rpc_retries_total 5",
		"magnum_capi_bridge_rpc_consuming 1",
		`magnum_capi_bridge_rpc_handler_duration_seconds_count{method="cluster_create",outcome="ok"} 1`,
		`magnum_capi_bridge_dependency_errors_total{dependency="database"} 0`,
	} {
		assert.Contains(t, body, want)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") || line == "" {
			continue
		}
		name := strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]
		if !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			assert.True(t, strings.HasPrefix(name, "magnum_capi_bridge_"), name)
		}
	}
}

func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
