package peer

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
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

func sideBroker(tb testing.TB) (*rpctest.Broker, string) {
	br := rpctest.NewVhost(tb)
	return br, fmt.Sprintf("rabbit://%s:%s@%s:%d/%s", br.User, br.Password, br.Host, br.Port, br.Vhost)
}

// startBridge runs the bridge binary as the newest stack's bridge is configured (magnum.conf of the
// chroot, then its own file), but with its own vhost, database, namespace prefix and the OpenStack
// flavor on the simulator, so both conductors build the same kind of cluster.
func (e *benchEnv) startBridge(tb testing.TB) *side {
	prefix := "mcbpb" + rpctest.RandomSuffix()[:5] + "-"
	dbURL, db, tmpl := newSideDB(tb, "")
	_, transport := sideBroker(tb)
	e.cleanupClustersAtEnd(tb, prefix)
	return e.startBridgeWith(tb, bridgeSetup{dbURL: dbURL, transportURL: transport, db: db, template: tmpl, namespacePrefix: prefix})
}

// bridgeSetup is where a bridge runs: its database and vhost (db and template are the side's view
// of them), its namespace prefix, and magnum-capi-helm's (for the adoption plan; "" for none).
type bridgeSetup struct {
	dbURL, transportURL     string
	db                      *sql.DB
	template                string
	namespacePrefix         string
	capiHelmNamespacePrefix string
}

// startBridgeWith starts a bridge as startBridge does, on the setup's database and vhost.
func (e *benchEnv) startBridgeWith(tb testing.TB, setup bridgeSetup) *side {
	upstream, err := clientcmd.BuildConfigFromFlags("", filepath.Join(mgmtState, "bridge.kubeconfig"))
	if err != nil {
		tb.Fatalf("the bridge's kubeconfig (make up): %v", err)
	}
	proxy := startCountingProxy(tb, e.ca, upstream)
	dir := tb.TempDir()
	kubeconfig := filepath.Join(dir, "bridge.kubeconfig")
	e.proxyKubeconfig(tb, kubeconfig, proxy.URL, false)
	metrics := testutil.FreeAddr(tb)
	conf := filepath.Join(dir, "bridge.conf")
	capiHelm := ""
	if setup.capiHelmNamespacePrefix != "" {
		capiHelm = "\n[capi_helm]\nnamespace_prefix = " + setup.capiHelmNamespacePrefix + "\n"
	}
	writeConf(tb, conf, fmt.Sprintf(`[DEFAULT]
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
%s`, setup.transportURL, setup.dbURL, kubeconfig, setup.namespacePrefix, metrics, capiHelm))
	magnumConf := filepath.Join(chroot, "etc/magnum/magnum.conf")
	opts, err := app.LoadOptions(magnumConf, conf)
	if err != nil {
		tb.Fatal(err)
	}
	rc, err := rpc.NewClient(opts.RPC)
	if err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(e.root, "bin", "magnum-capi-bridge")
	testutil.GoBuild(tb, "./cmd/magnum-capi-bridge", bin)
	cmd := exec.Command(bin, "--config-file", magnumConf, "--config-file", conf)
	logPath := filepath.Join(dir, "bridge.log")
	startProcess(tb, cmd, logPath)
	waitHTTP(tb, "http://"+metrics+"/readyz", 2*time.Minute, logPath)
	fmt.Printf("# bridge up (pid %d, prefix %s, log %s)\n", cmd.Process.Pid, setup.namespacePrefix, logPath)
	s := &side{name: "bridge", rpc: rc, db: setup.db, template: setup.template, proxy: proxy, dbURL: setup.dbURL,
		transportURL: setup.transportURL, namespacePrefix: setup.namespacePrefix, logPath: logPath,
		pids: func() []int { return []int{cmd.Process.Pid} },
		stop: sync.OnceFunc(func() {
			stopGroup(cmd, 30*time.Second)
			_ = rc.Close()
			keepLog(logPath, "bridge")
		})}
	// kill is a crash: no graceful stop, unacknowledged messages go back to the queue.
	s.kill = sync.OnceFunc(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = rc.Close()
		keepLog(logPath, "bridge-killed")
	})
	tb.Cleanup(s.stop)
	return s
}

// startPeer runs the real magnum-conductor 23.0.0 of the chroot with magnum-capi-helm
// (deploy/local/peer-up.sh installed it and helm), the way a real deployment runs it: magnum.conf
// of the chroot, then a file of its own; a clean environment (requests would prefer
// REQUESTS_CA_BUNDLE over the kubeconfig's CA). Its chart is test/peer/standin-chart of this
// checkout, packaged for the run.
func (e *benchEnv) startPeer(tb testing.TB) *side {
	if _, err := os.Stat(filepath.Join(chroot, peerDriverPath)); err != nil {
		tb.Fatalf("the peer's driver is missing (deploy/local/peer-up.sh): %v", err)
	}
	// Its namespaces are <prefix>-<project>: the prefix takes no dash of its own.
	prefix := "mcbpp" + rpctest.RandomSuffix()[:5]
	dbURL, db, tmpl := newSideDB(tb, "k8s_capi_helm_v1")
	_, transport := sideBroker(tb)
	e.cleanupClustersAtEnd(tb, prefix+"-")
	chart := packageStandinChart(tb, e.root)
	upstream := rest.CopyConfig(e.admin)
	proxy := startCountingProxy(tb, e.ca, upstream)
	etcDir := filepath.Join(chroot, "etc/magnum")
	// Files of its own in the chroot: another test's peer may run at the same time.
	kubeconfig := "/etc/magnum/mcb-peer-" + prefix + ".kubeconfig"
	e.proxyKubeconfig(tb, filepath.Join(chroot, kubeconfig), proxy.URL, true)
	logInRoot := "/var/log/magnum/mcb-peer-" + prefix + ".log"
	conf := "/etc/magnum/mcb-peer-" + prefix + ".conf"
	writeConf(tb, filepath.Join(chroot, conf), fmt.Sprintf(`[DEFAULT]
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
`, transport, logInRoot, dbURL, kubeconfig, chart, prefix))
	tb.Cleanup(func() {
		_ = os.Remove(filepath.Join(chroot, conf))
		_ = os.Remove(filepath.Join(chroot, kubeconfig))
		if !tb.Failed() {
			_ = os.Remove(filepath.Join(chroot, logInRoot))
		}
	})
	opts, err := app.LoadOptions(filepath.Join(etcDir, "magnum.conf"), filepath.Join(chroot, conf))
	if err != nil {
		tb.Fatal(err)
	}
	rc, err := rpc.NewClient(opts.RPC)
	if err != nil {
		tb.Fatal(err)
	}
	home := "/var/lib/magnum-peer/home"
	_ = os.MkdirAll(filepath.Join(chroot, home), 0o700)
	// The driver lives outside the chroot's site-packages (deploy/local/peer-up.sh): only the peer sees it.
	cmd := exec.Command("chroot", chroot, "/usr/bin/env", "-i", "HOME="+home, "LANG=C.UTF-8",
		"PATH=/usr/local/bin:/usr/bin:/bin", "PYTHONPATH="+peerDriverPath, peerConductorBin, "--config-file", "/etc/magnum/magnum.conf", "--config-file", conf)
	logPath := filepath.Join(e.dir, "peer-"+prefix+".out")
	startProcess(tb, cmd, logPath)
	s := &side{name: "peer", rpc: rc, db: db, template: tmpl, proxy: proxy, dbURL: dbURL, transportURL: transport,
		namespacePrefix: prefix, logPath: filepath.Join(chroot, logInRoot), pids: func() []int { return []int{cmd.Process.Pid} },
		stop: sync.OnceFunc(func() {
			// oslo.service's graceful stop waits up to 60 s; the reference killed it too.
			stopGroup(cmd, 5*time.Second)
			_ = rc.Close()
			keepLog(filepath.Join(chroot, logInRoot), "peer")
		})}
	tb.Cleanup(s.stop)
	// Ready when its RPC server consumes: magnum_service row of its host, written at start.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n int
		_ = db.QueryRow("SELECT COUNT(*) FROM magnum_service WHERE host = 'mcb-bench-peer'").Scan(&n)
		if n > 0 {
			break
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			tb.Fatalf("the peer conductor did not register within 2 min; its log:\n%s", tail(filepath.Join(chroot, logInRoot), 30)+tail(logPath, 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // its workers fork after the service row
	fmt.Printf("# peer up (pid %d, prefix %s, log %s)\n", cmd.Process.Pid, prefix, filepath.Join(chroot, logInRoot))
	return s
}

// capiHelmNamespace is where magnum-capi-helm puts a project's clusters: the namespace prefix, a
// dash, the project id without anything but [a-z0-9].
func capiHelmNamespace(prefix, projectID string) string {
	return prefix + "-" + regexp.MustCompile("[^a-z0-9]").ReplaceAllString(strings.ToLower(projectID), "")
}

// packageStandinChart packages standin-chart with the chroot's helm into a directory of the run
// inside the chroot, and returns the package's path as the peer sees it.
func packageStandinChart(tb testing.TB, root string) string {
	helm := filepath.Join(chroot, "usr/local/bin/helm")
	if _, err := os.Stat(helm); err != nil {
		tb.Fatalf("no helm in the chroot (deploy/local/peer-up.sh): %v", err)
	}
	inRoot := "/var/lib/magnum-peer/run-" + rpctest.RandomSuffix()
	dir := filepath.Join(chroot, inRoot)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	home := tb.TempDir()
	cmd := exec.Command(helm, "package", filepath.Join(root, "test/peer/standin-chart"), "-d", dir)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("helm package standin-chart: %v: %s", err, out)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "openstack-cluster-*.tgz"))
	if len(matches) != 1 {
		tb.Fatalf("helm package standin-chart: want one package in %s, found %v", dir, matches)
	}
	return filepath.Join(inRoot, filepath.Base(matches[0]))
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
