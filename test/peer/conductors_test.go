package peer

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/app"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc/rpctest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// proxyKubeconfig is a kubeconfig for a counting proxy; with a client certificate when the
// client insists on one (the peer's driver asserts it has one).
func (e *benchEnv) proxyKubeconfig(tb testing.TB, path, server string, clientCert bool) {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: mgmt
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: bench
  context: {cluster: mgmt, user: bench}
current-context: bench
users:
- name: bench
  user: {}
`, server, b64(e.ca.certPEM))
	if clientCert {
		cfg = strings.Replace(cfg, "  user: {}\n", fmt.Sprintf("  user:\n    client-certificate-data: %s\n    client-key-data: %s\n",
			b64(e.ca.clientCertPEM), b64(e.ca.clientKeyPEM)), 1)
	}
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
}

func sideBroker(b *testing.B) (*rpctest.Broker, string) {
	br := rpctest.NewVhost(b)
	return br, fmt.Sprintf("rabbit://%s:%s@%s:%d/%s", br.User, br.Password, br.Host, br.Port, br.Vhost)
}

// startBridge runs the bridge binary as the newest stack's bridge is configured (magnum.conf of the
// chroot, then its own file), but with its own vhost, database, namespace prefix and the OpenStack
// flavor on the simulator, so both conductors build the same kind of cluster.
func (e *benchEnv) startBridge(b *testing.B) *side {
	ctx := context.Background()
	prefix := "mcbpb" + rpctest.RandomSuffix()[:5] + "-"
	dbURL, db, tmpl := newSideDB(b, "")
	_, transport := sideBroker(b)
	upstream, err := clientcmd.BuildConfigFromFlags("", filepath.Join(mgmtState, "bridge.kubeconfig"))
	if err != nil {
		b.Fatalf("the bridge's kubeconfig (make up): %v", err)
	}
	proxy := startCountingProxy(b, e.ca, upstream)
	kubeconfig := filepath.Join(e.dir, "bridge.kubeconfig")
	e.proxyKubeconfig(b, kubeconfig, proxy.URL, false)
	metrics := testutil.FreeAddr(b)
	conf := filepath.Join(e.dir, "bridge.conf")
	writeConf(b, conf, fmt.Sprintf(`[DEFAULT]
transport_url = %s
host = mcb-bench-bridge

[database]
connection = %s

[bridge]
kubeconfig = %s
namespace_prefix = %s
default_infrastructure = openstack
allowed_infrastructures = openstack
cloud_region_name = RegionOne
default_kubernetes_version = v1.36.3
cluster_credentials = true
magnum_release = 23
metrics_bind = %s
log_format = json
leader_election = false
`, transport, dbURL, kubeconfig, prefix, metrics))
	magnumConf := filepath.Join(chroot, "etc/magnum/magnum.conf")
	opts, err := app.LoadOptions(magnumConf, conf)
	if err != nil {
		b.Fatal(err)
	}
	rc, err := rpc.NewClient(opts.RPC)
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(e.root, "bin", "magnum-capi-bridge")
	testutil.GoBuild(b, "./cmd/magnum-capi-bridge", bin)
	cmd := exec.Command(bin, "--config-file", magnumConf, "--config-file", conf)
	logPath := filepath.Join(e.dir, "bridge.log")
	startProcess(b, cmd, logPath)
	waitHTTP(b, "http://"+metrics+"/readyz", 2*time.Minute, logPath)
	fmt.Printf("# bridge up (pid %d, prefix %s, log %s)\n", cmd.Process.Pid, prefix, logPath)
	return &side{name: "bridge", rpc: rc, db: db, template: tmpl, proxy: proxy,
		pids: func() []int { return []int{cmd.Process.Pid} },
		stop: func() {
			stopGroup(cmd, 30*time.Second)
			_ = rc.Close()
			e.cleanupNamespaces(ctx, prefix)
			keepLog(logPath, "bridge")
		}}
}

// startPeer runs the real magnum-conductor 23.0.0 of the chroot with magnum-capi-helm
// (deploy/local/peer-up.sh installed it, helm and the chart), the way a real deployment runs it:
// magnum.conf of the chroot, then a file of its own; a clean environment (requests would
// prefer REQUESTS_CA_BUNDLE over the kubeconfig's CA).
func (e *benchEnv) startPeer(b *testing.B) *side {
	ctx := context.Background()
	if _, err := os.Stat(filepath.Join(chroot, peerChartInRoot)); err != nil {
		b.Fatalf("the peer's chart is missing (deploy/local/peer-up.sh): %v", err)
	}
	prefix := "mcbpp" + rpctest.RandomSuffix()[:5]
	dbURL, db, tmpl := newSideDB(b, "k8s_capi_helm_v1")
	_, transport := sideBroker(b)
	upstream := rest.CopyConfig(e.admin)
	proxy := startCountingProxy(b, e.ca, upstream)
	etcDir := filepath.Join(chroot, "etc/magnum")
	kubeconfig := "/etc/magnum/mcb-bench-peer.kubeconfig"
	e.proxyKubeconfig(b, filepath.Join(chroot, kubeconfig), proxy.URL, true)
	logInRoot := "/var/log/magnum/mcb-bench-peer.log"
	_ = os.Remove(filepath.Join(chroot, logInRoot))
	conf := "/etc/magnum/mcb-bench-peer.conf"
	writeConf(b, filepath.Join(chroot, conf), fmt.Sprintf(`[DEFAULT]
transport_url = %s
host = mcb-bench-peer
debug = False
log_file = %s

[database]
connection = %s

[drivers]
default_driver = k8s_capi_helm_v1

[capi_helm]
kubeconfig_file = %s
helm_chart_repo =
helm_chart_name = %s
default_helm_chart_version = 0.27.0
namespace_prefix = %s
`, transport, logInRoot, dbURL, kubeconfig, peerChartInRoot, prefix))
	b.Cleanup(func() {
		_ = os.Remove(filepath.Join(chroot, conf))
		_ = os.Remove(filepath.Join(chroot, kubeconfig))
	})
	opts, err := app.LoadOptions(filepath.Join(etcDir, "magnum.conf"), filepath.Join(chroot, conf))
	if err != nil {
		b.Fatal(err)
	}
	rc, err := rpc.NewClient(opts.RPC)
	if err != nil {
		b.Fatal(err)
	}
	home := "/var/lib/magnum-peer/home"
	_ = os.MkdirAll(filepath.Join(chroot, home), 0o700)
	// The driver lives outside the chroot's site-packages (deploy/local/peer-up.sh): only the peer sees it.
	cmd := exec.Command("chroot", chroot, "/usr/bin/env", "-i", "HOME="+home, "LANG=C.UTF-8",
		"PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONPATH="+peerDriverPath, peerConductorBin, "--config-file", "/etc/magnum/magnum.conf", "--config-file", conf)
	logPath := filepath.Join(e.dir, "peer.out")
	startProcess(b, cmd, logPath)
	// Ready when its RPC server consumes: magnum_service row of its host, written at start.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n int
		_ = db.QueryRow("SELECT COUNT(*) FROM magnum_service WHERE host = 'mcb-bench-peer'").Scan(&n)
		if n > 0 {
			break
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			b.Fatalf("the peer conductor did not register within 2 min; its log:\n%s", tail(filepath.Join(chroot, logInRoot), 30)+tail(logPath, 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // its workers fork after the service row
	fmt.Printf("# peer up (pid %d, prefix %s, log %s)\n", cmd.Process.Pid, prefix, filepath.Join(chroot, logInRoot))
	return &side{name: "peer", rpc: rc, db: db, template: tmpl, proxy: proxy,
		pids: func() []int { return []int{cmd.Process.Pid} },
		stop: func() {
			// oslo.service's graceful stop waits up to 60 s; the reference killed it too.
			stopGroup(cmd, 5*time.Second)
			_ = rc.Close()
			e.cleanupNamespaces(ctx, prefix)
			keepLog(filepath.Join(chroot, logInRoot), "peer")
		}}
}

func writeConf(tb testing.TB, path, content string) {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
}

func waitHTTP(tb testing.TB, url string, timeout time.Duration, logPath string) {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	tb.Fatalf("%s not ready within %s; log:\n%s", url, timeout, tail(logPath, 30))
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error() + "\n"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// keepLog copies a side's log to MCB_PEER_LOG_DIR when set.
func keepLog(path, name string) {
	dir := os.Getenv("MCB_PEER_LOG_DIR")
	if dir == "" {
		return
	}
	if data, err := os.ReadFile(path); err == nil {
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, name+".log"), data, 0o600)
	}
}

// printTable prints figure | bridge | peer | ratio, and each side's requests by kind.
func printTable(cfg benchConfig, r map[string]*sideResult) {
	br, pe := r["bridge"], r["peer"]
	fmt.Printf("\n# command: make bench-peer PEER_CLUSTERS=%d PEER_IDLE=%s (MCB_PEER=1 go test -tags integration,e2e -run '^$' -bench '^BenchmarkPeer$' -benchtime 1x ./test/peer)\n", cfg.clusters, cfg.idle)
	fmt.Printf("# peer: magnum-conductor 23.0.0 + magnum-capi-helm (chroot), helm, the stand-in openstack-cluster chart; both on CAPI + CAPO + the OpenStack simulator\n")
	fmt.Println("| figure | bridge | peer | peer/bridge | goal |")
	fmt.Println("|---|---|---|---|---|")
	type fig struct {
		name string
		of   func(*sideResult) (float64, bool)
		unit string
		goal string
	}
	pct := func(get func(*sideResult) []time.Duration, p float64) func(*sideResult) (float64, bool) {
		return func(s *sideResult) (float64, bool) {
			d := get(s)
			return testutil.Millis(testutil.Percentile(d, p)), len(d) > 0
		}
	}
	val := func(get func(*sideResult) float64) func(*sideResult) (float64, bool) {
		return func(s *sideResult) (float64, bool) { return get(s), true }
	}
	figs := []fig{
		{"cast → CAPI Cluster p50", pct(func(s *sideResult) []time.Duration { return s.castToCluster }, 0.5), "ms", ""},
		{"cast → CAPI Cluster p99", pct(func(s *sideResult) []time.Duration { return s.castToCluster }, 0.99), "ms", "p99 ≤ 100 ms"},
		{"cast → cluster row p99", pct(func(s *sideResult) []time.Duration { return s.castToRow }, 0.99), "ms", "p99 ≤ 50 ms"},
		{"CAPI Cluster gone → row gone p50", pct(func(s *sideResult) []time.Duration { return s.deleteLag }, 0.5), "ms", ""},
		{"CAPI Cluster gone → row gone p99", pct(func(s *sideResult) []time.Duration { return s.deleteLag }, 0.99), "ms", ""},
		{"apiserver requests per create", val(func(s *sideResult) float64 { return s.requestsPerCreate }), "", ""},
		{"apiserver requests/min, idle, 0 clusters", val(func(s *sideResult) float64 { return s.idleBefore }), "", ""},
		{fmt.Sprintf("apiserver requests/min, idle, %d clusters in progress", cfg.clusters), val(func(s *sideResult) float64 { return s.idleAfter }), "", ""},
		{"requests/min per idle cluster", val(func(s *sideResult) float64 { return (s.idleAfter - s.idleBefore) / float64(cfg.clusters) }), "", "0"},
		{"RSS idle", val(func(s *sideResult) float64 { return s.rssIdle }), "MiB", "≤ 64 MiB"},
		{fmt.Sprintf("RSS with %d clusters", cfg.clusters), val(func(s *sideResult) float64 { return s.rssAfter }), "MiB", ""},
		{"RSS after the deletes", val(func(s *sideResult) float64 { return s.rssEnd }), "MiB", ""},
	}
	cell := func(s *sideResult, f fig) (string, float64, bool) {
		if s == nil {
			return "–", 0, false
		}
		v, ok := f.of(s)
		if !ok {
			return "–", 0, false
		}
		return strings.TrimSpace(fmt.Sprintf("%.1f %s", v, f.unit)), v, true
	}
	for _, f := range figs {
		bs, bv, bok := cell(br, f)
		ps, pv, pok := cell(pe, f)
		ratio := "–"
		if bok && pok && bv > 0 {
			ratio = fmt.Sprintf("%.2f×", pv/bv)
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", f.name, bs, ps, ratio, f.goal)
		testutil.AppendBenchTable(fmt.Sprintf("bench-peer (%d creates): %s", cfg.clusters, f.name), bs, ps, f.goal)
	}
	for _, name := range []string{"bridge", "peer"} {
		s := r[name]
		if s == nil {
			continue
		}
		fmt.Printf("# %s requests during the creates: %s\n", name, kinds(s.createRequests))
		fmt.Printf("# %s requests in the idle window with clusters: %s\n", name, kinds(s.idleRequests))
		if len(s.failed) > 0 {
			fmt.Printf("# %s: %d failures (above)\n", name, len(s.failed))
		}
	}
}

func kinds(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
