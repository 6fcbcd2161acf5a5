// Package rpctest gives tests their own corner of RabbitMQ: a throw-away virtual host on the
// machine's shared broker (so parallel test packages never see each other's queues), a way to
// cut a vhost's connections from the broker side, and a private RabbitMQ node that a test may
// stop and restart without touching the shared broker.
//
// Vhosts are managed with rabbitmqctl (the management HTTP API is not enabled on the shared
// broker). Without rabbitmqctl, NewVhost falls back to the vhost of testutil.AMQPURL() and
// reports Isolated=false, so callers must use unique queue and exchange names anyway.
//
// All of it is the integration tier (testutil.Integration): Shared, NewVhost and StartNode skip the
// test unless it is built with the `integration` tag.
package rpctest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// Broker is where a test connects.
type Broker struct {
	Host     string
	Port     int
	User     string
	Password string
	Vhost    string
	// Isolated is true when Vhost was created for this test (and is deleted afterwards).
	Isolated bool
	// ctlNode is the node name for rabbitmqctl -n ("" = the default node) and ctlCookie the
	// file holding that node's Erlang cookie (private nodes have their own).
	ctlNode, ctlCookie string
}

// URL is the amqp:// URL of the broker and vhost.
func (b *Broker) URL() string {
	return "amqp://" + url.UserPassword(b.User, b.Password).String() + "@" +
		net.JoinHostPort(b.Host, strconv.Itoa(b.Port)) + "/" + url.PathEscape(b.Vhost)
}

// Shared is the machine's broker, from testutil.AMQPURL(). Integration tier: it skips the test
// without the `integration` build tag.
func Shared(t testing.TB) *Broker {
	t.Helper()
	testutil.Require(t, testutil.Integration)
	uri, err := amqp.ParseURI(testutil.AMQPURL())
	if err != nil {
		t.Fatalf("rpctest: bad AMQP URL: %v", err)
	}
	return &Broker{Host: uri.Host, Port: uri.Port, User: uri.Username, Password: uri.Password, Vhost: uri.Vhost}
}

// RandomSuffix returns 8 random hex characters for unique names.
func RandomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CtlAvailable reports whether rabbitmqctl can manage the shared broker from here.
func CtlAvailable() bool {
	if _, err := exec.LookPath("rabbitmqctl"); err != nil {
		return false
	}
	return os.Geteuid() == 0
}

func ctl(node, cookieFile string, args ...string) error {
	if cookieFile != "" {
		cookie, err := os.ReadFile(cookieFile)
		if err != nil {
			return err
		}
		args = append([]string{"--erlang-cookie", strings.TrimSpace(string(cookie))}, args...)
	}
	if node != "" {
		args = append([]string{"-n", node}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "rabbitmqctl", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("rabbitmqctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// CreateVhost adds a vhost on the shared broker and grants the test user full rights on it.
func CreateVhost(name, user string) error {
	if err := ctl("", "", "add_vhost", name); err != nil {
		return err
	}
	return ctl("", "", "set_permissions", "-p", name, user, ".*", ".*", ".*")
}

// DeleteVhost removes a vhost (and everything in it) from the shared broker.
func DeleteVhost(name string) error { return ctl("", "", "delete_vhost", name) }

// NewVhost creates a vhost for this test and deletes it at cleanup. Without rabbitmqctl it
// returns the shared vhost (Isolated=false).
func NewVhost(t testing.TB) *Broker {
	t.Helper()
	b := Shared(t)
	if !CtlAvailable() {
		t.Logf("rpctest: rabbitmqctl not usable here; sharing vhost %q (names must be unique)", b.Vhost)
		return b
	}
	name := "mcbtest-" + RandomSuffix()
	if err := CreateVhost(name, b.User); err != nil {
		t.Fatalf("rpctest: %v", err)
	}
	t.Cleanup(func() {
		if err := DeleteVhost(name); err != nil {
			t.Logf("rpctest: cleanup: %v", err)
		}
	})
	b.Vhost, b.Isolated = name, true
	return b
}

// CloseConnections makes the broker close every client connection of the vhost (as a broker
// restart or a network cut would, from the clients' point of view). Requires Isolated.
func (b *Broker) CloseConnections(t testing.TB, reason string) {
	t.Helper()
	if !b.Isolated {
		t.Skip("rpctest: closing connections needs a private vhost (rabbitmqctl unavailable)")
	}
	if err := ctl(b.ctlNode, b.ctlCookie, "close_all_connections", "--vhost", b.Vhost, reason); err != nil {
		t.Fatalf("rpctest: %v", err)
	}
}

// Dial opens a plain amqp091 connection to the broker (for raw publishing in tests).
func (b *Broker) Dial(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.DialConfig(b.URL(), amqp.Config{Vhost: b.Vhost})
	if err != nil {
		t.Fatalf("rpctest: dial %s@%s:%d/%s: %v", b.User, b.Host, b.Port, b.Vhost, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// ---- private node -------------------------------------------------------------------------------

// Node is a private RabbitMQ node (its own name, ports, data and log directories) that a test
// may stop and start at will; the machine's shared broker is never touched.
type Node struct {
	Broker
	name    string
	dir     string
	env     []string
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
}

// StartNode starts a private node, or skips the test (saying why) when that cannot work here.
// Integration tier: it skips the test without the `integration` build tag.
func StartNode(t testing.TB) *Node {
	t.Helper()
	testutil.Require(t, testutil.Integration)
	server := "/usr/lib/rabbitmq/bin/rabbitmq-server"
	if _, err := os.Stat(server); err != nil {
		if p, lerr := exec.LookPath("rabbitmq-server"); lerr == nil {
			server = p
		} else {
			t.Skip("rpctest: rabbitmq-server is not installed; cannot start a private node")
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("rpctest: a private RabbitMQ node needs root here (the packaged scripts switch users)")
	}
	dir, err := os.MkdirTemp("", "mcbrmq-")
	if err != nil {
		t.Fatal(err)
	}
	port, dist := freePort(t), freePort(t)
	name := fmt.Sprintf("mcbtest-%d-%s@localhost", os.Getpid(), RandomSuffix())
	conf := filepath.Join(dir, "rabbitmq.conf")
	// The packaged /etc/rabbitmq/rabbitmq.conf pins the listener to 5672: use our own files.
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("listeners.tcp.default = 127.0.0.1:%d\n", port)), 0o644); err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(dir, "rabbitmq-env.conf")
	if err := os.WriteFile(envFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n := &Node{
		Broker: Broker{Host: "127.0.0.1", Port: port, User: "guest", Password: "guest", Vhost: "/", Isolated: true,
			ctlNode: name, ctlCookie: filepath.Join(dir, ".erlang.cookie")},
		name:    name,
		dir:     dir,
		logPath: filepath.Join(dir, "server.out"),
	}
	n.env = append(os.Environ(),
		"HOME="+dir, // the node's Erlang cookie lives here
		"RABBITMQ_NODENAME="+name,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(dist),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_CONFIG_FILE="+conf,
		"RABBITMQ_CONF_ENV_FILE="+envFile,
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "pid"),
		"ERL_EPMD_ADDRESS=127.0.0.1",
	)
	n.start(t, server)
	t.Cleanup(func() {
		n.Stop(t)
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		} else {
			t.Logf("rpctest: private node files kept in %s", dir)
		}
	})
	return n
}

func (n *Node) start(t testing.TB, server string) {
	t.Helper()
	out, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(server)
	cmd.Dir = n.dir
	cmd.Env = n.env
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group, so that a forced stop reaches beam and its helpers but nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		t.Skipf("rpctest: cannot start a private RabbitMQ node: %v", err)
	}
	n.cmd = cmd
	n.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(n.exited)
	}()
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			log, _ := os.ReadFile(n.logPath)
			t.Skipf("rpctest: private RabbitMQ node exited during start-up:\n%s", tail(log, 2000))
		default:
		}
		if conn, err := amqp.Dial(n.URL()); err == nil {
			_ = conn.Close()
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	n.Stop(t)
	t.Fatalf("rpctest: private RabbitMQ node did not accept connections within 120s (see %s)", n.logPath)
}

// Stop stops the node gracefully (SIGTERM: the start script runs rabbitmqctl stop semantics),
// killing its process group if it does not exit within a minute. Persistent messages in
// durable queues survive for the next Start.
func (n *Node) Stop(t testing.TB) {
	t.Helper()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(60 * time.Second):
		// The start script (our child, leader of its own group) is still alive, so the group id
		// is certainly ours.
		t.Logf("rpctest: private node ignored SIGTERM; killing its process group")
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
	}
	n.cmd = nil
}

// Start starts a stopped node again with the same name, ports and data.
func (n *Node) Start(t testing.TB) {
	t.Helper()
	if n.cmd != nil {
		return
	}
	server := "/usr/lib/rabbitmq/bin/rabbitmq-server"
	if _, err := os.Stat(server); err != nil {
		server, _ = exec.LookPath("rabbitmq-server")
	}
	n.start(t, server)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
