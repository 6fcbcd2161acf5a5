package rpc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc/rpctest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// Integration tests talk to the machine's RabbitMQ. Tests that need broker-side connection
// closes get a vhost of their own; the others share one vhost created for this package run
// (deleted by TestMain) and use unique exchange and topic names.

var (
	pkgBrokerOnce sync.Once
	pkgBroker     *rpctest.Broker
	pkgVhost      string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if pkgVhost != "" {
		if err := rpctest.DeleteVhost(pkgVhost); err != nil {
			fmt.Fprintln(os.Stderr, "cleanup:", err)
		}
	}
	os.Exit(code)
}

// sharedBroker returns the package's vhost (created on first use). Integration tier: the test is
// skipped without the `integration` build tag (before the Once, so that a skip never leaves it unset).
func sharedBroker(t testing.TB) *rpctest.Broker {
	t.Helper()
	testutil.Require(t, testutil.Integration)
	pkgBrokerOnce.Do(func() {
		b := rpctest.Shared(t)
		if rpctest.CtlAvailable() {
			name := "mcbtest-rpc-" + rpctest.RandomSuffix()
			if err := rpctest.CreateVhost(name, b.User); err == nil {
				pkgVhost = name
				b.Vhost, b.Isolated = name, true
			} else {
				t.Logf("cannot create a package vhost, sharing %q: %v", b.Vhost, err)
			}
		}
		pkgBroker = b
	})
	requireBroker(t, pkgBroker)
	return pkgBroker
}

// rpctestNewVhost gives a test its own vhost (needed to cut connections from the broker side).
func rpctestNewVhost(t testing.TB) *rpctest.Broker {
	t.Helper()
	b := rpctest.NewVhost(t)
	requireBroker(t, b)
	return b
}

// requireBroker fails (not skips: the integration tier is running) when the broker does not answer.
func requireBroker(t testing.TB, b *rpctest.Broker) {
	t.Helper()
	conn, err := amqp.DialConfig(b.URL(), amqp.Config{Vhost: b.Vhost})
	if err != nil {
		t.Fatalf("RabbitMQ at %s:%d vhost %q is required for this test: %v", b.Host, b.Port, b.Vhost, err)
	}
	_ = conn.Close()
}

// logSink collects the package's logs so tests can check that no secret was written; set
// MCB_RPC_TEST_LOG=1 to also see them.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newLogger() (*slog.Logger, *logSink) {
	sink := &logSink{}
	var w io.Writer = sink
	if os.Getenv("MCB_RPC_TEST_LOG") != "" {
		w = io.MultiWriter(sink, os.Stderr)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})), sink
}

// testOptions targets b with unique names and test-sized timings.
func testOptions(t testing.TB, b *rpctest.Broker) (Options, *logSink) {
	t.Helper()
	o := DefaultOptions()
	o.Hosts = []Host{{Hostname: b.Host, Port: b.Port, Username: b.User, Password: b.Password}}
	o.VirtualHost = b.Vhost
	suffix := rpctest.RandomSuffix()
	o.Exchange = "mcbtest-" + suffix
	o.Topic = "mcbtest-conductor-" + suffix
	o.ServerID = "srv-" + suffix
	o.ConnectionName = "mcbtest-" + suffix
	o.ReconnectInterval = 50 * time.Millisecond
	o.ReconnectMax = 500 * time.Millisecond
	o.RetryMin = 20 * time.Millisecond
	o.RetryMax = 200 * time.Millisecond
	o.ShutdownTimeout = 5 * time.Second
	o.MissingReplyQueueTimeout = 2 * time.Second
	o.TransientQueuesTTL = 120 * time.Second
	o.Heartbeat = 10 * time.Second
	var sink *logSink
	o.Logger, sink = newLogger()
	if !b.Isolated {
		// Shared vhost: remove what we declare when the test ends.
		t.Cleanup(func() { deleteEntities(b, o) })
	}
	return o, sink
}

func deleteEntities(b *rpctest.Broker, o Options) {
	conn, err := amqp.DialConfig(b.URL(), amqp.Config{Vhost: b.Vhost})
	if err != nil {
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	for _, q := range []string{o.Topic, o.Topic + "." + o.ServerID, o.parkingQueue().Name} {
		_, _ = ch.QueueDelete(q, false, false, false)
	}
	_ = ch.ExchangeDelete(o.Exchange, false, false)
}

// runningServer is a Server running in the background.
type runningServer struct {
	*Server
	cancel context.CancelFunc
	errc   chan error
	once   sync.Once
	err    error
}

func startServer(t testing.TB, o Options, handlers map[string]Handler) *runningServer {
	t.Helper()
	s, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	for m, h := range handlers {
		s.Register(m, h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &runningServer{Server: s, cancel: cancel, errc: make(chan error, 1)}
	go func() { rs.errc <- s.Run(ctx) }()
	select {
	case <-s.Ready():
	case err := <-rs.errc:
		t.Fatalf("server stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("server not ready after 30s")
	}
	t.Cleanup(func() { _ = rs.stop() })
	return rs
}

// stop cancels the server and waits for Run to return.
func (rs *runningServer) stop() error {
	rs.once.Do(func() {
		rs.cancel()
		select {
		case rs.err = <-rs.errc:
		case <-time.After(60 * time.Second):
			rs.err = fmt.Errorf("server did not stop within 60s")
		}
	})
	return rs.err
}

func newClient(t testing.TB, o Options) *Client {
	t.Helper()
	c, err := NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// settledGoroutines waits until the goroutine count stops falling and returns it.
func settledGoroutines() int {
	prev := runtime.NumGoroutine()
	for i := 0; i < 50; i++ {
		time.Sleep(40 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n == prev {
			return n
		}
		prev = n
	}
	return prev
}

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	s := string(buf[:n])
	var keep []string
	for _, g := range strings.Split(s, "\n\n") {
		if strings.Contains(g, "internal/rpc") || strings.Contains(g, "amqp091") {
			keep = append(keep, g)
		}
	}
	return strings.Join(keep, "\n\n")
}

// testContext is a request context like magnum-api's (with a token that must never be logged).
func testContext() *Context {
	return &Context{
		User: "u-1", UserID: "u-1", UserName: "demo", ProjectID: "p-1", Project: "p-1", ProjectName: "demo",
		Roles: []string{"reader", "member"}, RequestID: "req-" + rpctest.RandomSuffix(), IsAdminProject: true,
		AuthToken: testToken, AuthURL: "http://127.0.0.1:5000/v3",
	}
}
