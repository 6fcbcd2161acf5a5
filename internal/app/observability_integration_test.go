package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/app"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc/rpctest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestObservability runs the whole bridge (app.Run) against real parts: a private RabbitMQ node
// (so that it can be stopped), a private MariaDB database with Magnum's schema, and the local
// management cluster (CAPD in-memory machines). magnum-api is replaced by the RPC client speaking
// exactly as it does. It checks what an operator sees: the RPC and status-lag histograms move after
// a create, Magnum's notifications reach a real oslo.messaging listener, /readyz turns not-ready
// within 10 s of RabbitMQ stopping and ready again after, and the magnum_service heartbeat stops
// meanwhile (so magnum-api shows the conductor down).
func TestObservability(t *testing.T) {
	kubeconfig, kcfg := testutil.ManagementCluster(t)
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("/usr/bin/python3 is not installed: no oslo.messaging listener")
	}
	if err := exec.Command("/usr/bin/python3", "-c", "import oslo_messaging").Run(); err != nil {
		t.Skip("python3-oslo.messaging is not installed (deploy/local installs it with magnum-api)")
	}
	node := rpctest.StartNode(t)
	dbURL := dbtest.NewMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	suffix := strings.ReplaceAll(uuid.NewString(), "-", "")[:6]
	prefix := "mcbo" + suffix + "-"
	project, user := strings.ReplaceAll(uuid.NewString(), "-", ""), strings.ReplaceAll(uuid.NewString(), "-", "")
	host := "mcbtest-observe-" + suffix
	metricsAddr := testutil.FreeAddr(t)
	transport := fmt.Sprintf("rabbit://guest:guest@127.0.0.1:%d/", node.Port)

	// The Lease in a namespace of the test's own (the bridge's usual one exists only after make up).
	leaseNamespace := "mcbtest-lease-" + suffix
	kcs, err := kubernetes.NewForConfig(kcfg)
	require.NoError(t, err)
	_, err = kcs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: leaseNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kcs.CoreV1().Namespaces().Delete(context.Background(), leaseNamespace, metav1.DeleteOptions{})
	})

	dir := t.TempDir()
	conf := filepath.Join(dir, "magnum.conf")
	require.NoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`[DEFAULT]
transport_url = %s
host = %s
service_down_time = 6

[database]
connection = %s

[oslo_messaging_rabbit]
rabbit_interval_max = 2

[oslo_messaging_notifications]
driver = messagingv2

[certificates]
cert_manager_type = x509keypair

[bridge]
kubeconfig = %s
namespace_prefix = %s
default_infrastructure = inmemory
cluster_credentials = false
# The test runs as the management cluster's admin, whom the admission policies do not name.
require_admission_policies = false
metrics_bind = %s
log_format = json
log_level = debug
leader_election_namespace = %s
`, transport, host, dbURL, kubeconfig, prefix, metricsAddr, leaseNamespace)), 0o600))
	opts, err := app.LoadOptions(conf)
	require.NoError(t, err)

	// The listener first, so that it sees the start of the create.
	listener := startListener(t, transport)

	logs := &lockedBuffer{}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stderr := os.Stderr
	r, w, err := os.Pipe()
	require.NoError(t, err)
	os.Stderr = w // app.Run logs to stderr: capture it to check the log lines
	go func() { _, _ = io.Copy(io.MultiWriter(logs, stderr), r) }()
	go func() { done <- app.Run(runCtx, opts, "test") }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Error("the bridge did not stop within 60 s")
		}
		os.Stderr = stderr
		_ = w.Close()
	})
	base := "http://" + metricsAddr
	testutil.Eventually(t, 90*time.Second, "/readyz ready", func() error { return ready(base, true) })
	code, body := get(t, base+"/healthz")
	assert.Equal(t, 200, code, body)

	st, err := db.Open(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() }) // after the cleanups below, which use it
	template := uuid.NewString()
	_, err = st.DB().ExecContext(ctx, "INSERT INTO cluster_template (uuid, name, coe, public, server_type, image_id, project_id, user_id, "+
		"flavor_id, master_flavor_id, keypair_id, external_network_id, network_driver) VALUES (?, ?, 'kubernetes', 0, 'vm', ?, ?, ?, 'm1.small', 'm1.medium', 'default', 'public', 'calico')",
		template, "k8s-"+suffix, "ubuntu-2404-kube-v1.36.3", project, user)
	require.NoError(t, err)

	before := scrape(t, base)
	client, err := rpc.NewClient(opts.RPC)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	t.Cleanup(func() {
		// The project namespace the bridge made (namespaces are never deleted by the bridge).
		cs, err := kubernetes.NewForConfig(kcfg)
		if err == nil {
			err = cs.CoreV1().Namespaces().Delete(context.Background(), prefix+project, metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("cleanup: delete namespace %s: %v", prefix+project, err)
		}
	})
	rctx := &rpc.Context{User: user, UserID: user, ProjectID: project, Project: project, Roles: []string{"member"},
		RequestID: "req-" + uuid.NewString(), UserName: "demo", ProjectName: "demo", AuthToken: "gAAAA-test-token-not-a-secret"}
	id := uuid.NewString()
	c := &magnum.Cluster{}
	c.UUID.Set(id)
	c.Name.Set("observe-" + suffix)
	c.ProjectID.Set(project)
	c.UserID.Set(user)
	c.ClusterTemplateID.Set(template)
	c.Keypair.Set("default")
	c.Labels.Set(magnum.DictFromMap(map[string]string{}))
	c.MasterFlavorID.Set("m1.medium")
	c.FlavorID.Set("m1.small")
	c.CreateTimeout.Set(10)
	c.FloatingIPEnabled.Set(true)
	c.MasterLBEnabled.Set(false)
	obj, err := magnum.EncodeAt(c, magnum.MustVersion("1.23"), nil)
	require.NoError(t, err)
	require.NoError(t, client.Cast(ctx, "cluster_create", map[string]any{"cluster": obj, "master_count": 1, "node_count": 1, "create_timeout": 10}, rctx))
	t.Cleanup(func() {
		// Leave nothing behind: the bridge deletes the CAPI objects and the rows.
		cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer ccancel()
		if err := client.Cast(cctx, "cluster_delete", map[string]any{"uuid": id}, rctx); err != nil {
			t.Logf("cleanup: cluster_delete: %v", err)
			return
		}
		testutil.Eventually(t, 3*time.Minute, "cluster deleted", func() error {
			if _, err := st.GetCluster(cctx, id); err == nil {
				return fmt.Errorf("cluster row still there")
			}
			return nil
		})
	})

	start := time.Now()
	testutil.Eventually(t, 5*time.Minute, "CREATE_COMPLETE", func() error {
		row, err := st.GetCluster(ctx, id)
		if err != nil {
			return err
		}
		if s := string(row.Status); s != "CREATE_COMPLETE" {
			return fmt.Errorf("status %q (%s)", s, ptrStr(row.StatusReason))
		}
		return nil
	})
	t.Logf("cluster %s CREATE_COMPLETE after %s", id, time.Since(start).Round(time.Second))

	// The histograms moved.
	testutil.Eventually(t, 10*time.Second, "status lag observed", func() error {
		after := scrape(t, base)
		for _, m := range []struct {
			name   string
			labels map[string]string
		}{
			{"magnum_capi_bridge_rpc_handler_duration_seconds", map[string]string{"method": "cluster_create", "outcome": "ok"}},
			{"magnum_capi_bridge_rpc_messages_total", map[string]string{"method": "cluster_create", "outcome": "ok"}},
			{"magnum_capi_bridge_status_lag_seconds", map[string]string{"status": "CREATE_COMPLETE"}},
			{"magnum_capi_bridge_operation_duration_seconds", map[string]string{"kind": "create", "status": "CREATE_COMPLETE"}},
		} {
			if b, a := count(before, m.name, m.labels), count(after, m.name, m.labels); a < b+1 {
				return fmt.Errorf("%s%v: count %v before, %v after the create", m.name, m.labels, b, a)
			}
		}
		if v := value(after, "magnum_capi_bridge_leader", nil); v != 1 {
			return fmt.Errorf("magnum_capi_bridge_leader = %v, want 1 (the only replica leads)", v)
		}
		if v := count(after, "magnum_capi_bridge_watch_events_total", map[string]string{"kind": "Cluster", "event": "update"}); v < 1 {
			return fmt.Errorf("no Cluster update events counted")
		}
		lagSum := sum(after, "magnum_capi_bridge_status_lag_seconds", map[string]string{"status": "CREATE_COMPLETE"})
		t.Logf("status lag of CREATE_COMPLETE: %.3f s; rpc cluster_create handler: %.3f s",
			lagSum, sum(after, "magnum_capi_bridge_rpc_handler_duration_seconds", map[string]string{"method": "cluster_create", "outcome": "ok"}))
		return nil
	})

	// Magnum's notifications, as the Python conductor sends them.
	pending := listener.wait(t, 30*time.Second, "magnum.cluster.create", "pending")
	success := listener.wait(t, 30*time.Second, "magnum.cluster.create", "success")
	assert.Equal(t, "INFO", pending.Priority)
	assert.Equal(t, "container-infra."+host, pending.PublisherID)
	for _, n := range []notification{pending, success} {
		p := n.Payload
		assert.Equal(t, "http://schemas.dmtf.org/cloud/audit/1.0/event", p["typeURI"])
		assert.Equal(t, "activity", p["eventType"])
		assert.Equal(t, "create", p["action"])
		target := p["target"].(map[string]any)
		assert.Equal(t, id, target["id"])
		assert.Equal(t, "service/magnum/cluster", target["typeURI"])
		content := target["attachments"].([]any)[0].(map[string]any)["content"].(map[string]any)
		for _, k := range []string{"status", "status_reason", "project_id", "created_at", "updated_at", "cluster_template_id", "keypair",
			"docker_volume_size:", "labels", "master_flavor_id", "flavor_id", "stack_id", "health_status", "create_timeout", "api_address",
			"discovery_url", "node_addresses", "master_addresses", "node_count", "master_count"} {
			assert.Contains(t, content, k, "cluster_data of %s", p["outcome"])
		}
		assert.Equal(t, project, content["project_id"])
		assert.Equal(t, "service/magnum/cluster", p["observer"].(map[string]any)["typeURI"])
	}
	assert.Equal(t, user, pending.Payload["initiator"].(map[string]any)["user_id"])
	assert.Equal(t, project, pending.Payload["initiator"].(map[string]any)["project_id"])
	assert.Equal(t, "CREATE_COMPLETE", success.Payload["target"].(map[string]any)["attachments"].([]any)[0].(map[string]any)["content"].(map[string]any)["status"])
	assert.Nil(t, pending.Context["auth_token"], "the token never goes on the notification bus")
	assert.Equal(t, rctx.RequestID, pending.Context["request_id"])
	listener.close()

	// Every log line of the create carries the cluster, the method and the request id.
	var opLines int
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.HasPrefix(line, "{") || !strings.Contains(line, rctx.RequestID) {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		assert.Equal(t, id, rec["cluster"], line)
		assert.Equal(t, "cluster_create", rec["method"], line)
		assert.Equal(t, rctx.RequestID, rec["request_id"], line)
		opLines++
	}
	assert.NotZero(t, opLines, "no JSON log line carried the request id")
	assert.NotContains(t, logs.String(), "gAAAA-test-token", "the token never reaches the log")

	// RabbitMQ stops: not ready within 10 s; the heartbeat stops, so magnum-api shows it down.
	stopped := time.Now()
	node.Stop(t)
	testutil.Eventually(t, 10*time.Second, "/readyz not ready", func() error { return ready(base, false) })
	t.Logf("/readyz not ready %.1f s after RabbitMQ stopped", time.Since(stopped).Seconds())
	errs := scrape(t, base)
	assert.GreaterOrEqual(t, count(errs, "magnum_capi_bridge_dependency_errors_total", map[string]string{"dependency": "rabbitmq"}), 1.0)
	assert.Equal(t, 0.0, value(errs, "magnum_capi_bridge_rpc_consuming", nil))
	svc, err := st.GetService(ctx, host, "magnum-conductor")
	require.NoError(t, err)
	require.NotNil(t, svc)
	lastSeen := *svc.LastSeenUp
	// magnum-api's rule (servicegroup): up while last_seen_up is within service_down_time (6 s here).
	testutil.Eventually(t, 20*time.Second, "magnum_service down by magnum-api's rule", func() error {
		svc, err := st.GetService(ctx, host, "magnum-conductor")
		if err != nil {
			return err
		}
		if !svc.LastSeenUp.Equal(lastSeen) {
			lastSeen = *svc.LastSeenUp
			return fmt.Errorf("heartbeat still written at %s", lastSeen)
		}
		if age := time.Since(lastSeen); age <= 6*time.Second {
			return fmt.Errorf("last heartbeat %.1f s ago: still up", age.Seconds())
		}
		return nil
	})
	assertServiceDown(t, lastSeen)

	restarted := time.Now()
	node.Start(t)
	testutil.Eventually(t, 60*time.Second, "/readyz ready again", func() error { return ready(base, true) })
	t.Logf("/readyz ready %.1f s after RabbitMQ started again", time.Since(restarted).Seconds())
	testutil.Eventually(t, 10*time.Second, "heartbeat resumed", func() error {
		svc, err := st.GetService(ctx, host, "magnum-conductor")
		if err != nil {
			return err
		}
		if !svc.LastSeenUp.After(lastSeen) {
			return fmt.Errorf("no heartbeat since %s", lastSeen)
		}
		return nil
	})
}

// assertServiceDown asks Magnum's own code (magnum.api.servicegroup, with service_down_time 6)
// whether the conductor is up, for a heartbeat as old as ours and, as a control, for a fresh one.
func assertServiceDown(t *testing.T, lastSeen time.Time) {
	t.Helper()
	script := `
import datetime, sys
from oslo_utils import timeutils
from magnum.api import servicegroup
import magnum.conf
from magnum.objects import magnum_service
magnum.conf.CONF([], project="magnum")
magnum.conf.CONF.set_override("service_down_time", 6)
for age in sys.argv[1:]:
    last = timeutils.utcnow(True) - datetime.timedelta(seconds=float(age))
    s = magnum_service.MagnumService(last_seen_up=last, forced_down=False, updated_at=last, created_at=last)
    print("up" if servicegroup.ServiceGroup().service_is_up(s) else "down")
`
	age := time.Since(lastSeen).Seconds()
	out, err := exec.Command("/usr/bin/python3", "-c", script, fmt.Sprintf("%.3f", age), "0").CombinedOutput()
	if err != nil {
		t.Logf("magnum's servicegroup not usable here (%v): checked with its rule in Go only\n%s", err, out)
		return
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.GreaterOrEqual(t, len(lines), 2, "%s", out)
	verdicts := lines[len(lines)-2:]
	assert.Equal(t, []string{"down", "up"}, verdicts, "magnum-api's verdict for a heartbeat %.1f s old, and for a fresh one", age)
}

type notification struct {
	Priority    string         `json:"priority"`
	PublisherID string         `json:"publisher_id"`
	EventType   string         `json:"event_type"`
	Payload     map[string]any `json:"payload"`
	Context     map[string]any `json:"context"`
}

type listenerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	got   []notification
	once  sync.Once
}

func startListener(t *testing.T, transport string) *listenerProc {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", filepath.Join("..", "rpc", "testdata", "notification_listener.py"), transport, "magnum", "notifications")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	l := &listenerProc{cmd: cmd, stdin: stdin}
	t.Cleanup(l.close)
	readyCh := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "READY" {
				close(readyCh)
				continue
			}
			var n notification
			if json.Unmarshal([]byte(line), &n) == nil {
				l.mu.Lock()
				l.got = append(l.got, n)
				l.mu.Unlock()
			}
		}
	}()
	select {
	case <-readyCh:
	case <-time.After(60 * time.Second):
		t.Fatal("the oslo.messaging notification listener did not start within 60 s")
	}
	return l
}

func (l *listenerProc) wait(t *testing.T, timeout time.Duration, eventType, outcome string) notification {
	t.Helper()
	var found notification
	testutil.Eventually(t, timeout, eventType+" "+outcome, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, n := range l.got {
			if n.EventType == eventType && n.Payload["outcome"] == outcome {
				found = n
				return nil
			}
		}
		return fmt.Errorf("received %d notifications, none %s/%s", len(l.got), eventType, outcome)
	})
	return found
}

func (l *listenerProc) close() {
	l.once.Do(func() {
		_ = l.stdin.Close()
		done := make(chan struct{})
		go func() { _ = l.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = l.cmd.Process.Kill()
			<-done
		}
	})
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func ready(base string, want bool) error {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if (resp.StatusCode == 200) != want {
		return fmt.Errorf("/readyz %d:\n%s", resp.StatusCode, b)
	}
	return nil
}

func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families
}

// series returns the metrics of family name whose labels include want.
func series(families map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	f := families[name]
	if f == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range f.GetMetric() {
		ok := true
		for k, v := range want {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// count is a histogram's sample count or a counter's value, summed over the matching series.
func count(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var n float64
	for _, m := range series(families, name, want) {
		switch {
		case m.GetHistogram() != nil:
			n += float64(m.GetHistogram().GetSampleCount())
		case m.GetCounter() != nil:
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

func sum(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var n float64
	for _, m := range series(families, name, want) {
		if h := m.GetHistogram(); h != nil {
			n += h.GetSampleSum()
		}
	}
	return n
}

func value(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var n float64
	for _, m := range series(families, name, want) {
		if g := m.GetGauge(); g != nil {
			n += g.GetValue()
		}
	}
	return n
}

func ptrStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
