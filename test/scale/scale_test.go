// Package scale is the bridge's scale harness: the bridge's real binary, real RabbitMQ (its own
// vhost), real MariaDB (its own database with Magnum's schema) and a real kube-apiserver of its
// own, with Cluster API's controllers replaced by a CAPI simulation (capisim_test.go). It runs only
// with MCB_SCALE=1 (`make bench-scale`); see BenchmarkScale.
package scale

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/app"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc/rpctest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// scaleConfig is what MCB_SCALE_* set.
type scaleConfig struct {
	clusters   int           // live clusters at the end (N)
	sequential int           // creates sent one at a time
	gap        time.Duration // between one sequential create's CAPI Cluster and the next cast
	burst      int           // creates sent at once
	idle       time.Duration // window over which idle apiserver requests are counted
	lagSamples int           // condition flips timed with N live clusters
	readyAfter time.Duration // simulated provisioning time
	perProject int           // clusters per Keystone project (namespace)
	rawWorkers int           // parallel clusters in the raw server-side-apply loop
	soak       time.Duration // steady churn at the end (0: none)
	soakEvery  time.Duration // one create and one delete per soakEvery during the soak
	keys       int           // the bridge's [bridge] pregenerated_keys (0: its default)
}

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		tb.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

func envDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		tb.Fatalf("%s=%q: want a duration such as 30s", name, v)
	}
	return d
}

func loadScaleConfig(tb testing.TB) scaleConfig {
	c := scaleConfig{
		clusters:   envInt(tb, "MCB_SCALE_CLUSTERS", 100),
		sequential: envInt(tb, "MCB_SCALE_SEQUENTIAL", 20),
		gap:        envDuration(tb, "MCB_SCALE_GAP", time.Second),
		burst:      envInt(tb, "MCB_SCALE_BURST", 200),
		idle:       envDuration(tb, "MCB_SCALE_IDLE", 60*time.Second),
		lagSamples: envInt(tb, "MCB_SCALE_LAG_SAMPLES", 100),
		readyAfter: envDuration(tb, "MCB_SCALE_READY_AFTER", time.Second),
		perProject: max(1, envInt(tb, "MCB_SCALE_PER_PROJECT", 25)),
		// The bridge's parallelism (the harness leaves [bridge] operation_workers at its default).
		rawWorkers: max(1, envInt(tb, "MCB_SCALE_RAW_WORKERS", app.DefaultOperationWorkers)),
		soak:       envDuration(tb, "MCB_SCALE_SOAK", 0),
		soakEvery:  envDuration(tb, "MCB_SCALE_SOAK_EVERY", 2*time.Second),
		keys:       envInt(tb, "MCB_SCALE_PREGENERATED_KEYS", 0),
	}
	if c.sequential > c.clusters {
		tb.Fatalf("MCB_SCALE_SEQUENTIAL (%d) exceeds MCB_SCALE_CLUSTERS (%d): the created clusters stay live and count towards N",
			c.sequential, c.clusters)
	}
	return c
}

// BenchmarkScale measures the scale figures in one run (-benchtime 1x; b.N > 1 is refused):
//
//	MCB_SCALE=1 go test -tags integration,e2e -run '^$' -bench '^BenchmarkScale$' -benchtime 1x -timeout 3h ./test/scale
//
// Phases: the bridge idle (memory, apiserver requests); MCB_SCALE_SEQUENTIAL creates one at a time,
// MCB_SCALE_GAP (1 s) after the previous one's Cluster appeared (cast → CAPI Cluster, cast → cluster
// row: the latency of a create arriving alone, as a tenant's does; back to back they measure
// throughput, which the burst does); more creates up to MCB_SCALE_CLUSTERS (N) live
// clusters, all CREATE_COMPLETE; memory and idle requests at N; MCB_SCALE_LAG_SAMPLES flips of a
// random cluster's Available condition, timed until Magnum's row shows them; last, with the N
// clusters still live, a burst of MCB_SCALE_BURST more creates against a raw server-side-apply loop
// of the same objects; then, with MCB_SCALE_SOAK, a soak of steady churn (one create and one delete of
// the oldest cluster every MCB_SCALE_SOAK_EVERY) with the bridge's memory sampled throughout.
func BenchmarkScale(b *testing.B) {
	if os.Getenv("MCB_SCALE") != "1" {
		b.Skip("MCB_SCALE=1 runs the scale harness (its own etcd + kube-apiserver, a CAPI simulation, minutes of CPU): `make bench-scale`")
	}
	// The etcd and kube-apiserver binaries `make up` builds, and the machine's MariaDB and RabbitMQ.
	testutil.Require(b, testutil.E2E)
	testutil.Require(b, testutil.Integration)
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x: one run creates MCB_SCALE_CLUSTERS clusters")
	}
	cfg := loadScaleConfig(b)
	h := newHarness(b, cfg)
	h.run(b)
}

type harness struct {
	cfg      scaleConfig
	dir      string
	api      *apiServer
	kube     client.WithWatch
	sim      *capiSimulation
	db       *sql.DB
	rpc      *rpc.Client
	prefix   string
	template string
	bridge   *exec.Cmd
	metrics  string
	obs      *observer

	mu       sync.Mutex
	projects []string
	created  []string // cluster uuids cast so far
	names    map[string]string
	// projectByID is each created cluster's project.
	projectByID map[string]string
	table       [][3]string
}

func newHarness(b *testing.B, cfg scaleConfig) *harness {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	h := &harness{cfg: cfg, dir: b.TempDir(), names: map[string]string{}, projectByID: map[string]string{}}
	h.prefix = "mcbs" + rpctest.RandomSuffix()[:6] + "-"
	start := time.Now()
	bin := filepath.Join(h.dir, "magnum-capi-bridge")
	testutil.GoBuild(b, "./cmd/magnum-capi-bridge", bin)
	h.api = startAPIServer(b, h.dir)
	h.api.installCRDs(b)
	scheme, err := capi.NewScheme()
	if err != nil {
		b.Fatal(err)
	}
	if h.kube, err = client.NewWithWatch(h.api.admin, client.Options{Scheme: scheme}); err != nil {
		b.Fatal(err)
	}
	for _, ns := range []string{"magnum-capi-bridge"} {
		if err := h.kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	h.sim = startCAPISimulation(ctx, b, h.kube, h.prefix, cfg.readyAfter, 8)
	h.obs = startObserver(ctx, b, h.kube)

	dbURL := dbtest.NewMySQL(b)
	st, err := db.Open(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	h.db = st.DB()
	h.template = uuid.NewString()
	if _, err := h.db.ExecContext(ctx, "INSERT INTO cluster_template (uuid, name, coe, public, server_type, image_id, project_id, user_id, "+
		"flavor_id, master_flavor_id, keypair_id, external_network_id, network_driver) VALUES (?, 'k8s-scale', 'kubernetes', 1, 'vm', "+
		"'ubuntu-2404-kube-v1.36.3', 'admin', 'admin', 'm1.small', 'm1.medium', 'default', 'public', 'calico')", h.template); err != nil {
		b.Fatal(err)
	}

	broker := rpctest.NewVhost(b)
	metricsAddr := testutil.FreeAddr(b)
	h.metrics = "http://" + metricsAddr
	conf := filepath.Join(h.dir, "magnum.conf")
	writeFile(b, conf, []byte(fmt.Sprintf(`[DEFAULT]
transport_url = rabbit://%s:%s@%s:%d/%s
host = mcb-scale-%s

[database]
connection = %s

[certificates]
cert_manager_type = x509keypair

[bridge]
kubeconfig = %s
namespace_prefix = %s
default_infrastructure = inmemory
cluster_credentials = false
# The harness's apiserver runs no admission policies; the bridge runs as a system:masters user of it.
require_admission_policies = false
metrics_bind = %s
log_format = json
log_level = %s
%s`, broker.User, broker.Password, broker.Host, broker.Port, broker.Vhost, h.prefix, dbURL, h.api.bridgeKube, h.prefix, metricsAddr,
		cmp.Or(os.Getenv("MCB_SCALE_LOG_LEVEL"), "info"), keysLine(h.cfg.keys))))
	opts, err := app.LoadOptions(conf)
	if err != nil {
		b.Fatal(err)
	}
	if h.rpc, err = rpc.NewClient(opts.RPC); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.rpc.Close() })

	logf, err := os.Create(filepath.Join(h.dir, "bridge.log"))
	if err != nil {
		b.Fatal(err)
	}
	h.bridge = exec.Command(bin, "--config-file", conf)
	h.bridge.Stdout, h.bridge.Stderr = logf, logf
	h.bridge.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := h.bridge.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = h.bridge.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = h.bridge.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = h.bridge.Process.Kill()
			<-done
		}
		logf.Close()
		// MCB_SCALE_BRIDGE_LOG keeps the bridge's log (with MCB_SCALE_LOG_LEVEL=debug: each apply's steps).
		if keep := os.Getenv("MCB_SCALE_BRIDGE_LOG"); keep != "" {
			if data, err := os.ReadFile(filepath.Join(h.dir, "bridge.log")); err == nil {
				_ = os.WriteFile(keep, data, 0o600)
			}
		}
		if b.Failed() {
			b.Logf("bridge log, last lines:\n%s", tailFile(filepath.Join(h.dir, "bridge.log"), 40))
		}
	})
	waitHTTP(b, &http.Client{Timeout: 2 * time.Second}, h.metrics+"/readyz", 2*time.Minute)
	fmt.Printf("# scale harness up in %s (apiserver %s, bridge pid %d, work dir %s)\n", time.Since(start).Round(time.Millisecond), h.api.url, h.bridge.Process.Pid, h.dir)
	return h
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// project returns the project of the i-th cluster: perProject clusters per project.
func (h *harness) project(i int) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.projects) <= i/h.cfg.perProject {
		h.projects = append(h.projects, strings.ReplaceAll(uuid.NewString(), "-", ""))
	}
	return h.projects[i/h.cfg.perProject]
}

// castCreate sends cluster_create as magnum-api 15.0.1 does (Cluster 1.23, one master, one worker).
func (h *harness) castCreate(ctx context.Context, i int) (string, error) {
	return h.castCreateIn(ctx, i, h.project(i))
}

// castCreateIn is castCreate in the given project.
func (h *harness) castCreateIn(ctx context.Context, i int, project string) (string, error) {
	id := uuid.NewString()
	name := fmt.Sprintf("scale-%d", i)
	h.mu.Lock()
	h.created = append(h.created, id)
	h.names[id] = templates.ClusterName(name, id)
	h.projectByID[id] = project
	h.mu.Unlock()
	c := &magnum.Cluster{}
	c.UUID.Set(id)
	c.Name.Set(name)
	c.ProjectID.Set(project)
	c.UserID.Set(project)
	c.ClusterTemplateID.Set(h.template)
	c.Keypair.Set("default")
	c.Labels.Set(magnum.DictFromMap(map[string]string{}))
	c.MasterFlavorID.Set("m1.medium")
	c.FlavorID.Set("m1.small")
	c.CreateTimeout.Set(60)
	c.FloatingIPEnabled.Set(true)
	c.MasterLBEnabled.Set(false)
	obj, err := magnum.EncodeAt(c, magnum.MustVersion("1.23"), nil)
	if err != nil {
		return "", err
	}
	rctx := &rpc.Context{User: project, UserID: project, ProjectID: project, Project: project, Roles: []string{"member"},
		RequestID: "req-" + uuid.NewString(), UserName: "scale", ProjectName: "scale", AuthToken: "gAAAA-scale-token-not-a-secret"}
	return id, h.rpc.Cast(ctx, "cluster_create", map[string]any{"cluster": obj, "master_count": 1, "node_count": 1, "create_timeout": 60}, rctx)
}

// observer records when the harness first saw each CAPI Cluster (by Magnum uuid) and each
// ClusterResourceSet (by namespace/name) through its own watches.
type observer struct {
	mu       sync.Mutex
	clusters map[string]time.Time
	sets     map[string]time.Time
}

func startObserver(ctx context.Context, tb testing.TB, c client.WithWatch) *observer {
	o := &observer{clusters: map[string]time.Time{}, sets: map[string]time.Time{}}
	record := func(list client.ObjectList, key func(any) string, into map[string]time.Time) {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, list)
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for ev := range w.ResultChan() {
				now := time.Now()
				if ev.Type != watch.Added && ev.Type != watch.Modified {
					continue
				}
				if k := key(ev.Object); k != "" {
					o.mu.Lock()
					if _, ok := into[k]; !ok {
						into[k] = now
					}
					o.mu.Unlock()
				}
			}
			w.Stop()
		}
	}
	go record(&clusterv1.ClusterList{}, func(obj any) string {
		if c, ok := obj.(*clusterv1.Cluster); ok {
			return c.Labels[templates.LabelClusterUUID]
		}
		return ""
	}, o.clusters)
	go record(&addonsv1.ClusterResourceSetList{}, func(obj any) string {
		if s, ok := obj.(*addonsv1.ClusterResourceSet); ok {
			return s.Namespace + "/" + s.Name
		}
		return ""
	}, o.sets)
	return o
}

func (o *observer) cluster(id string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.clusters[id]
	return t, ok
}

func (o *observer) set(key string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.sets[key]
	return t, ok
}

// until polls cond every step until it holds or the timeout passes.
func until(tb testing.TB, timeout, step time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(step)
	}
}

func (h *harness) row(figure, value, goal string) {
	h.table = append(h.table, [3]string{figure, value, goal})
	testutil.AppendBenchTable(figure, value, "", goal)
}

// memory is the bridge's resident set (from /proc) and Go heap in use (from its /metrics).
func (h *harness) memory(tb testing.TB) (rssMiB, heapMiB float64) {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.bridge.Process.Pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			rssMiB = kb / 1024
		}
	}
	return rssMiB, h.metricValue(tb, "go_memstats_heap_inuse_bytes") / (1 << 20)
}

// idleRequests counts the bridge's requests at the apiserver over the idle window.
func (h *harness) idleRequests(tb testing.TB) (perMinute float64, by map[string]int) {
	from := time.Now()
	time.Sleep(h.cfg.idle)
	to := time.Now()
	time.Sleep(2 * time.Second) // the audit backend's batch reaches the file
	n, by := h.api.bridgeRequests(tb, from, to)
	return float64(n) / to.Sub(from).Minutes(), by
}

func (h *harness) countStatus(ctx context.Context, tb testing.TB, status string) int {
	var n int
	if err := h.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM cluster WHERE status = ?", status).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

func (h *harness) run(b *testing.B) {
	ctx := context.Background()
	cfg := h.cfg
	b.ResetTimer()

	// 1. Idle, no cluster.
	time.Sleep(5 * time.Second)
	idleRSS, idleHeap := h.memory(b)
	idleRate0, idleBy0 := h.idleRequests(b)
	fmt.Printf("# idle, 0 clusters: %.1f requests/min by the bridge %v\n", idleRate0, idleBy0)

	// 2. Creates one at a time.
	var toCluster, toRow []time.Duration
	for i := range cfg.sequential {
		if i > 0 {
			time.Sleep(cfg.gap)
		}
		start := time.Now()
		id, err := h.castCreate(ctx, i)
		if err != nil {
			b.Fatal(err)
		}
		var rowAt atomic.Int64
		go func() {
			for rowAt.Load() == 0 && time.Since(start) < time.Minute {
				var one int
				if err := h.db.QueryRowContext(ctx, "SELECT 1 FROM cluster WHERE uuid = ?", id).Scan(&one); err == nil {
					rowAt.Store(time.Now().UnixNano())
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		until(b, time.Minute, time.Millisecond, "CAPI Cluster of create "+id, func() bool { _, ok := h.obs.cluster(id); return ok })
		until(b, time.Minute, time.Millisecond, "cluster row of create "+id, func() bool { return rowAt.Load() != 0 })
		seen, _ := h.obs.cluster(id)
		if i == 0 && cfg.sequential > 1 {
			// The harness's apiserver is new: its first server-side apply of each kind (the
			// ClusterClass and its templates, a project's namespace objects) builds the kind's
			// type models, which a management cluster in service did long ago. Shown, not counted.
			h.row("cast → CAPI Cluster, the first create (a new apiserver's first apply of each kind; not in the percentiles)",
				fmt.Sprintf("%.0f ms", testutil.Millis(seen.Sub(start))), "")
			continue
		}
		toCluster = append(toCluster, seen.Sub(start))
		toRow = append(toRow, time.Unix(0, rowAt.Load()).Sub(start))
	}
	if len(toCluster) > 0 {
		h.row(fmt.Sprintf("cast → CAPI Cluster, %d creates one at a time (%s apart), p50 / p99", len(toCluster), cfg.gap),
			fmt.Sprintf("%.0f / %.0f ms", testutil.Millis(testutil.Percentile(toCluster, 0.5)), testutil.Millis(testutil.Percentile(toCluster, 0.99))), "p99 ≤ 100 ms")
		h.row("cast → cluster row in the DB, p50 / p99",
			fmt.Sprintf("%.1f / %.1f ms", testutil.Millis(testutil.Percentile(toRow, 0.5)), testutil.Millis(testutil.Percentile(toRow, 0.99))), "p99 ≤ 50 ms")
		b.ReportMetric(testutil.Millis(testutil.Percentile(toCluster, 0.5)), "cast-to-cluster-p50-ms")
		b.ReportMetric(testutil.Millis(testutil.Percentile(toCluster, 0.99)), "cast-to-cluster-p99-ms")
		b.ReportMetric(testutil.Millis(testutil.Percentile(toRow, 0.99)), "cast-to-row-p99-ms")
	}

	// 3. Up to N live clusters, all CREATE_COMPLETE.
	fill := time.Now()
	h.castMany(ctx, b, cfg.sequential, cfg.clusters)
	until(b, 10*time.Minute+time.Duration(cfg.clusters)*300*time.Millisecond, 500*time.Millisecond, fmt.Sprintf("%d clusters CREATE_COMPLETE", cfg.clusters), func() bool {
		if n := h.countStatus(ctx, b, "CREATE_FAILED"); n > 0 {
			b.Fatalf("%d clusters CREATE_FAILED", n)
		}
		return h.countStatus(ctx, b, "CREATE_COMPLETE") == cfg.clusters
	})
	fmt.Printf("# %d clusters CREATE_COMPLETE %s after the last phase began\n", cfg.clusters, time.Since(fill).Round(time.Second))
	time.Sleep(10 * time.Second)
	rss, heap := h.memory(b)
	rateN, byN := h.idleRequests(b)
	fmt.Printf("# idle, %d clusters: %.1f requests/min by the bridge %v\n", cfg.clusters, rateN, byN)
	perCluster := (rateN - idleRate0) / float64(cfg.clusters)
	if perCluster > -0.0005 && perCluster < 0.0005 {
		perCluster = 0 // not "-0.000": the rates differ by noise in the lease renewals' timing
	}
	h.row("bridge memory idle (0 clusters): RSS / Go heap in use", fmt.Sprintf("%.1f / %.1f MiB", idleRSS, idleHeap), "≤ 64 MiB")
	h.row(fmt.Sprintf("bridge memory at %d clusters: RSS / heap", cfg.clusters), fmt.Sprintf("%.1f / %.1f MiB", rss, heap), "")
	growRSS, growHeap := (rss-idleRSS)*1024/float64(cfg.clusters), (heap-idleHeap)*1024/float64(cfg.clusters)
	h.row("growth per cluster: RSS / heap", fmt.Sprintf("%.1f / %.1f KiB", growRSS, growHeap), "")
	h.row("10 000 clusters, extrapolated RSS", fmt.Sprintf("%.0f MiB", idleRSS+growRSS*10000/1024), "≤ 1 GiB")
	h.row(fmt.Sprintf("apiserver requests by the bridge, idle, per cluster per minute (%.0f/min at 0, %.0f/min at %d)", idleRate0, rateN, cfg.clusters),
		fmt.Sprintf("%.3f", perCluster), "0")
	b.ReportMetric(idleRSS, "idle-rss-MiB")
	b.ReportMetric(idleHeap, "idle-heap-MiB")
	b.ReportMetric(rss, "rss-at-N-MiB")
	b.ReportMetric(heap, "heap-at-N-MiB")
	b.ReportMetric(growRSS, "rss-KiB/cluster")
	b.ReportMetric(growHeap, "heap-KiB/cluster")
	b.ReportMetric(perCluster, "idle-req/cluster/min")

	// 4. Condition change → Magnum row, with N live clusters.
	if cfg.lagSamples > 0 {
		h.statusLag(ctx, b)
	}

	// 5. A burst on top of the N, then the same objects through a raw server-side-apply loop.
	if cfg.burst > 0 {
		h.burst(ctx, b)
	}
	// 6. Steady churn, memory sampled.
	if cfg.soak > 0 {
		h.soak(ctx, b)
	}
	b.ReportMetric(float64(cfg.clusters), "clusters")
	b.StopTimer()

	fmt.Printf("\n## scale harness: N=%d live clusters (%d of them created one at a time), then a burst of %d more; simulated provisioning %s, %d clusters per project\n",
		cfg.clusters, cfg.sequential, cfg.burst, cfg.readyAfter, cfg.perProject)
	fmt.Printf("## command: MCB_SCALE=1 MCB_SCALE_CLUSTERS=%d MCB_SCALE_SEQUENTIAL=%d MCB_SCALE_GAP=%s MCB_SCALE_BURST=%d MCB_SCALE_IDLE=%s MCB_SCALE_LAG_SAMPLES=%d MCB_SCALE_SOAK=%s MCB_SCALE_PREGENERATED_KEYS=%d go test -tags integration,e2e -run '^$' -bench '^BenchmarkScale$' -benchtime 1x ./test/scale\n",
		cfg.clusters, cfg.sequential, cfg.gap, cfg.burst, cfg.idle, cfg.lagSamples, cfg.soak, cfg.keys)
	fmt.Printf("| figure | bridge | goal |\n|---|---|---|\n")
	for _, r := range h.table {
		fmt.Printf("| %s | %s | %s |\n", r[0], r[1], r[2])
	}
	fmt.Println()
}

// castMany casts creates for clusters [from, to) from 4 goroutines, as fast as the broker takes them.
func (h *harness) castMany(ctx context.Context, tb testing.TB, from, to int) []string {
	ids := make([]string, to-from)
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= to {
					return
				}
				id, err := h.castCreate(ctx, i)
				if err != nil {
					tb.Error(err)
					return
				}
				ids[i-from] = id
			}
		}()
	}
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
	return ids
}

// keysLine is the [bridge] pregenerated_keys line when MCB_SCALE_PREGENERATED_KEYS sets it.
func keysLine(keys int) string {
	if keys <= 0 {
		return ""
	}
	return fmt.Sprintf("pregenerated_keys = %d\n", keys)
}

// metricValue is the value of an unlabelled gauge on the bridge's /metrics (0 when absent).
func (h *harness) metricValue(tb testing.TB, name string) float64 {
	tb.Helper()
	resp, err := http.Get(h.metrics + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if f := families[name]; f != nil && len(f.GetMetric()) > 0 {
		return f.GetMetric()[0].GetGauge().GetValue()
	}
	return 0
}

func (h *harness) burst(ctx context.Context, b *testing.B) {
	cfg := h.cfg
	if cfg.keys > 0 {
		// A burst the operator sized the key pool for: it starts once the pool is full again.
		t0 := time.Now()
		until(b, 10*time.Minute, 500*time.Millisecond, fmt.Sprintf("%d pregenerated keys ready", cfg.keys), func() bool {
			return h.metricValue(b, "magnum_capi_bridge_pregenerated_keys_ready") >= float64(cfg.keys)
		})
		fmt.Printf("# burst: waited %s for the key pool to hold %d keys ([bridge] pregenerated_keys)\n", time.Since(t0).Round(time.Second), cfg.keys)
	}
	start := time.Now()
	ids := h.castMany(ctx, b, cfg.clusters, cfg.clusters+cfg.burst)
	castDone := time.Since(start)
	setKey := func(id string) string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return templates.NamespaceFor(h.prefix, h.projectOf(id)) + "/" + addons.ResourceSetName(h.names[id])
	}
	var lastCluster, lastSet time.Time
	until(b, 10*time.Minute+time.Duration(cfg.burst)*time.Second, 5*time.Millisecond, fmt.Sprintf("the burst's %d clusters applied", cfg.burst), func() bool {
		for _, id := range ids {
			c, ok := h.obs.cluster(id)
			if !ok {
				return false
			}
			s, ok := h.obs.set(setKey(id))
			if !ok {
				return false
			}
			lastCluster, lastSet = later(lastCluster, c), later(lastSet, s)
		}
		return true
	})
	bridgeTime := lastSet.Sub(start)
	fmt.Printf("# burst: %d casts sent in %s; last CAPI Cluster after %s, last add-on set (the last object of a create) after %s\n",
		cfg.burst, castDone.Round(time.Millisecond), lastCluster.Sub(start).Round(time.Millisecond), bridgeTime.Round(time.Millisecond))

	time.Sleep(2 * time.Second) // the audit backend's batch reaches the file
	reqs, by := h.api.bridgeRequests(b, start, lastSet.Add(time.Millisecond))
	fmt.Printf("# burst: %d apiserver requests by the bridge (%.1f per create, %.1f/s; its client allows 50/s, bursts of 100): %v\n",
		reqs, float64(reqs)/float64(cfg.burst), float64(reqs)/bridgeTime.Seconds(), by)
	h.row("burst: apiserver requests by the bridge per create", fmt.Sprintf("%.1f (%.0f/s)", float64(reqs)/float64(cfg.burst), float64(reqs)/bridgeTime.Seconds()), "")

	batches := h.collectApplied(ctx, b, ids)
	objects := 0
	for _, batch := range batches {
		objects += len(batch)
	}
	rawTime := h.rawApply(ctx, b, batches)
	bridgeRate, rawRate := float64(cfg.burst)/bridgeTime.Seconds(), float64(cfg.burst)/rawTime.Seconds()
	h.row(fmt.Sprintf("burst of %d creates: bridge, cast → every object applied", cfg.burst),
		fmt.Sprintf("%.1f clusters/s (%s)", bridgeRate, bridgeTime.Round(time.Millisecond)), "")
	h.row(fmt.Sprintf("raw server-side apply of the same %d objects, %d clusters in parallel", objects, cfg.rawWorkers),
		fmt.Sprintf("%.1f clusters/s (%s)", rawRate, rawTime.Round(time.Millisecond)), "")
	h.row("burst: bridge time / raw loop time", fmt.Sprintf("%.2f×", bridgeTime.Seconds()/rawTime.Seconds()), "≤ 1.25×")
	b.ReportMetric(bridgeRate, "burst-clusters/s")
	b.ReportMetric(rawRate, "raw-ssa-clusters/s")
	b.ReportMetric(bridgeTime.Seconds()/rawTime.Seconds(), "burst-vs-raw-x")
}

// soak keeps the number of live clusters steady while churning them: every soakEvery one create and
// one delete of the oldest live cluster, through the RPC path. The bridge's memory is sampled every
// 30 s; at the end every create must be CREATE_COMPLETE and every deleted row gone.
func (h *harness) soak(ctx context.Context, b *testing.B) {
	cfg := h.cfg
	h.mu.Lock()
	live := slices.Clone(h.created)
	next := len(h.created)
	h.mu.Unlock()
	type sample struct {
		at        time.Duration
		rss, heap float64
	}
	start := time.Now()
	rss, heap := h.memory(b)
	samples := []sample{{0, rss, heap}}
	churn, sampling := time.NewTicker(cfg.soakEvery), time.NewTicker(30*time.Second)
	defer churn.Stop()
	defer sampling.Stop()
	var deleted []string
	for time.Since(start) < cfg.soak {
		select {
		case <-churn.C:
			// The new cluster goes into the project of the one deleted: the set of tenants stays.
			old := live[0]
			live = live[1:]
			h.mu.Lock()
			project := h.projectOf(old)
			h.mu.Unlock()
			id, err := h.castCreateIn(ctx, next, project)
			if err != nil {
				b.Fatal(err)
			}
			next++
			live = append(live, id)
			if err := h.castDelete(ctx, old); err != nil {
				b.Fatal(err)
			}
			deleted = append(deleted, old)
		case <-sampling.C:
			rss, heap := h.memory(b)
			samples = append(samples, sample{time.Since(start), rss, heap})
			fmt.Printf("# soak %s: RSS %.1f MiB, heap %.1f MiB, %d created and %d deleted so far\n",
				time.Since(start).Round(time.Second), rss, heap, len(deleted), len(deleted))
		}
	}
	until(b, 10*time.Minute, time.Second, "the soak's creates complete and its deletes gone", func() bool {
		var rows, complete int
		if err := h.db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(status = 'CREATE_COMPLETE'), 0) FROM cluster").Scan(&rows, &complete); err != nil {
			b.Fatal(err)
		}
		return rows == len(live) && complete == len(live)
	})
	time.Sleep(10 * time.Second)
	rss, heap = h.memory(b)
	samples = append(samples, sample{time.Since(start), rss, heap})
	// Least-squares slope of RSS and heap over the soak, per 10 minutes.
	slope := func(y func(sample) float64) float64 {
		var n, sx, sy, sxx, sxy float64
		for _, s := range samples {
			x := s.at.Minutes() / 10
			n, sx, sy, sxx, sxy = n+1, sx+x, sy+y(s), sxx+x*x, sxy+x*y(s)
		}
		if d := n*sxx - sx*sx; d != 0 {
			return (n*sxy - sx*sy) / d
		}
		return 0
	}
	maxRSS := 0.0
	for _, s := range samples {
		maxRSS = max(maxRSS, s.rss)
	}
	h.row(fmt.Sprintf("soak %s at %d live clusters, one create + one delete every %s (%d each): RSS first / max / last",
		cfg.soak, len(live), cfg.soakEvery, len(deleted)),
		fmt.Sprintf("%.1f / %.1f / %.1f MiB", samples[0].rss, maxRSS, rss), "flat")
	h.row("soak: slope of RSS / heap (least squares over the samples)",
		fmt.Sprintf("%+.2f / %+.2f MiB per 10 min", slope(func(s sample) float64 { return s.rss }), slope(func(s sample) float64 { return s.heap })), "≈ 0")
	b.ReportMetric(slope(func(s sample) float64 { return s.heap }), "soak-heap-MiB/10min")
}

// castDelete sends cluster_delete as magnum-api does, in the cluster's project.
func (h *harness) castDelete(ctx context.Context, id string) error {
	h.mu.Lock()
	project := h.projectOf(id)
	h.mu.Unlock()
	rctx := &rpc.Context{User: project, UserID: project, ProjectID: project, Project: project, Roles: []string{"member"},
		RequestID: "req-" + uuid.NewString(), UserName: "scale", ProjectName: "scale", AuthToken: "gAAAA-scale-token-not-a-secret"}
	return h.rpc.Cast(ctx, "cluster_delete", map[string]any{"uuid": id}, rctx)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// projectOf is the project of a created cluster (h.mu held).
func (h *harness) projectOf(id string) string {
	return h.projectByID[id]
}

// collectApplied reads back what the bridge server-side applied for the given clusters, as one
// batch per cluster in the bridge's order: the project namespace and its policy objects, then the
// cluster's own objects (labelled with its uuid) and the shared ClusterClass objects, the Cluster,
// and last the add-on set. Server-set fields (uid, resourceVersion, managedFields, status…) are
// dropped; objects keep what defaulting added.
func (h *harness) collectApplied(ctx context.Context, tb testing.TB, ids []string) [][]*unstructured.Unstructured {
	quiet := rest.CopyConfig(h.api.admin)
	quiet.WarningHandler = rest.NoWarnings{} // listing every kind draws deprecation warnings
	dc, err := discovery.NewDiscoveryClientForConfig(quiet)
	if err != nil {
		tb.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(quiet)
	if err != nil {
		tb.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		tb.Fatal(err)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	shared := map[string][]*unstructured.Unstructured{} // namespace → objects of no single cluster
	own := map[string][]*unstructured.Unstructured{}    // cluster uuid → its objects
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range items.Items {
				o := &items.Items[i]
				if !appliedByBridge(o) {
					continue
				}
				ns := o.GetNamespace()
				if !r.Namespaced {
					ns = o.GetName()
				}
				if !strings.HasPrefix(ns, h.prefix) {
					continue
				}
				clean := cleanForApply(o)
				if id := o.GetLabels()[templates.LabelClusterUUID]; id != "" {
					if want[id] {
						own[id] = append(own[id], clean)
					}
					continue
				}
				shared[ns] = append(shared[ns], clean)
			}
		}
	}
	rank := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "Namespace":
			return 0
		case "RoleBinding", "NetworkPolicy", "ResourceQuota":
			return 1
		case "Cluster":
			return 3
		case "ClusterResourceSet":
			return 4
		}
		return 2
	}
	var batches [][]*unstructured.Unstructured
	h.mu.Lock()
	for _, id := range ids {
		ns := templates.NamespaceFor(h.prefix, h.projectOf(id))
		batch := append(slices.Clone(shared[ns]), own[id]...)
		slices.SortStableFunc(batch, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
		batches = append(batches, batch)
	}
	h.mu.Unlock()
	return batches
}

func appliedByBridge(o *unstructured.Unstructured) bool {
	for _, m := range o.GetManagedFields() {
		if m.Manager == capi.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

func cleanForApply(o *unstructured.Unstructured) *unstructured.Unstructured {
	c := o.DeepCopy()
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "ownerReferences", "selfLink"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	return c
}

// rawApply server-side applies the batches into copies of their namespaces (renamed out of the
// bridge's prefix, so that neither the bridge nor the simulation acts on them), rawWorkers batches at
// a time, each batch in order, with an unthrottled client: the apiserver's own limit.
func (h *harness) rawApply(ctx context.Context, tb testing.TB, batches [][]*unstructured.Unstructured) time.Duration {
	scheme, err := capi.NewScheme()
	if err != nil {
		tb.Fatal(err)
	}
	c, err := client.New(h.api.admin, client.Options{Scheme: scheme})
	if err != nil {
		tb.Fatal(err)
	}
	rename := func(ns string) string { return "raw-" + strings.TrimPrefix(ns, h.prefix) }
	var renamed [][]*unstructured.Unstructured
	for _, batch := range batches {
		var out []*unstructured.Unstructured
		for _, o := range batch {
			o = o.DeepCopy()
			if o.GetKind() == "Namespace" {
				o.SetName(rename(o.GetName()))
			} else {
				o.SetNamespace(rename(o.GetNamespace()))
			}
			out = append(out, o)
		}
		renamed = append(renamed, out)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range h.cfg.rawWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(renamed) {
					return
				}
				for _, o := range renamed[i] {
					o := o.DeepCopy()
					if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("raw-ssa-loop"), client.ForceOwnership); err != nil {
						tb.Errorf("raw apply %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
	return time.Since(start)
}

// statusLag flips the Available condition of random live clusters and times until Magnum's row
// shows the new health (UNHEALTHY, then HEALTHY again), polling the row every millisecond.
func (h *harness) statusLag(ctx context.Context, b *testing.B) {
	h.mu.Lock()
	ids := slices.Clone(h.created)
	h.mu.Unlock()
	var lags []time.Duration
	for i := range h.cfg.lagSamples {
		id := ids[rand.IntN(len(ids))]
		h.mu.Lock()
		ns, name := templates.NamespaceFor(h.prefix, h.projectOf(id)), h.names[id]
		h.mu.Unlock()
		for _, available := range []bool{false, true} {
			want := "HEALTHY"
			if !available {
				want = "UNHEALTHY"
			}
			start := time.Now()
			if err := h.sim.setAvailable(ctx, ns, name, available, fmt.Sprintf("simulated: worker nodes unreachable (%d)", i)); err != nil {
				b.Fatal(err)
			}
			until(b, time.Minute, time.Millisecond, fmt.Sprintf("health %s of %s", want, id), func() bool {
				var got sql.NullString
				_ = h.db.QueryRowContext(ctx, "SELECT health_status FROM cluster WHERE uuid = ?", id).Scan(&got)
				return got.String == want
			})
			lags = append(lags, time.Since(start))
		}
	}
	h.row(fmt.Sprintf("CAPI condition change → Magnum row, %d flips with %d live clusters, p50 / p99", len(lags), h.cfg.clusters),
		fmt.Sprintf("%.1f / %.1f ms", testutil.Millis(testutil.Percentile(lags, 0.5)), testutil.Millis(testutil.Percentile(lags, 0.99))), "p99 ≤ 1 s at 1 000")
	b.ReportMetric(testutil.Millis(testutil.Percentile(lags, 0.5)), "status-lag-p50-ms")
	b.ReportMetric(testutil.Millis(testutil.Percentile(lags, 0.99)), "status-lag-p99-ms")
}
