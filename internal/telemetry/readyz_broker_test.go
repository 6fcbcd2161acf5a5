package telemetry

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc/rpctest"
)

// TestReadyzFollowsRabbitMQ stops and restarts a private RabbitMQ node (never the shared broker)
// under a consuming RPC server: /readyz must be 503 within 10 s of the stop and 200 again after the
// restart.
func TestReadyzFollowsRabbitMQ(t *testing.T) {
	node := rpctest.StartNode(t)
	o := rpc.DefaultOptions()
	o.Hosts = []rpc.Host{{Hostname: node.Host, Port: node.Port, Username: node.User, Password: node.Password}}
	o.VirtualHost = node.Vhost
	o.ServerID = "readyz-test"
	o.ReconnectInterval, o.ReconnectMax = 100*time.Millisecond, time.Second
	srv, err := rpc.NewServer(o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	checks := []Check{{Name: "rabbitmq", Fn: func(context.Context) (string, error) {
		if !srv.Consuming() {
			return "", errors.New("not consuming")
		}
		return "consuming", nil
	}}}
	hs := httptest.NewServer(Handler(New(), checks))
	defer hs.Close()
	status := func(want int) func() bool {
		return func() bool { code, _ := fetch(t, hs.URL+"/readyz"); return code == want }
	}
	require.Eventually(t, status(200), 30*time.Second, 100*time.Millisecond, "ready once consuming")

	stopped := time.Now()
	node.Stop(t)
	require.Eventually(t, status(503), 10*time.Second, 100*time.Millisecond, "not ready within 10 s of RabbitMQ stopping")
	t.Logf("/readyz 503 at most %.2f s after the broker stop began", time.Since(stopped).Seconds())

	node.Start(t)
	require.Eventually(t, status(200), 30*time.Second, 100*time.Millisecond, "ready again after RabbitMQ returns")
}
