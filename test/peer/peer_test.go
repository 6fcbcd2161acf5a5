// Package peer is the side-by-side benchmark: the same create sequence, sent over the real RPC
// path as magnum-api 23.0.0 sends it, through the bridge and through the peer — the real Python
// magnum-conductor 23.0.0 with StackHPC's magnum-capi-helm driver from the forky chroot of the local
// stack — one after the other on the same management cluster (real CAPI and CAPO against the
// OpenStack simulator), in one run. It needs `make up` and runs only with MCB_PEER=1
// (`make bench-peer`, which runs deploy/local/peer-up.sh first); see README.md here.
package peer

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// Paths of the local stack (deploy/local): the management cluster, the forky chroot, Keystone.
const (
	chroot           = "/srv/magnum-forky"
	mgmtState        = "/var/lib/magnum-capi-bridge/mgmt"
	keystoneURL      = "http://127.0.0.1:5000/v3"
	peerConductorBin = "/usr/bin/magnum-conductor"
	peerDriverPath   = "/opt/magnum-peer/usr/lib/python3/dist-packages"
	// The image of the fake's seed with os_distro ubuntu and kube_version v1.36.3 (both drivers read them).
	imageID = "ubuntu-2404-kube-v1.36.3"
)

type benchConfig struct {
	clusters int           // creates, one at a time, per conductor
	idle     time.Duration // window over which idle requests are counted (before and after the creates)
	sides    []string      // "bridge", "peer"
}

func loadConfig(tb testing.TB) benchConfig {
	c := benchConfig{clusters: 5, idle: time.Minute, sides: []string{"bridge", "peer"}}
	if v := os.Getenv("MCB_PEER_CLUSTERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			tb.Fatalf("MCB_PEER_CLUSTERS=%q: want a positive integer", v)
		}
		c.clusters = n
	}
	if v := os.Getenv("MCB_PEER_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 5*time.Second {
			tb.Fatalf("MCB_PEER_IDLE=%q: want a duration of at least 5s", v)
		}
		c.idle = d
	}
	if v := os.Getenv("MCB_PEER_SIDES"); v != "" {
		c.sides = strings.Split(v, ",")
	}
	return c
}

func BenchmarkPeer(b *testing.B) {
	if os.Getenv("MCB_PEER") != "1" {
		b.Skip("MCB_PEER=1 runs the side-by-side benchmark against the local stack (`make bench-peer`, after `make up`)")
	}
	// The local stack, and its MariaDB and RabbitMQ.
	testutil.Require(b, testutil.E2E)
	testutil.Require(b, testutil.Integration)
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x")
	}
	cfg := loadConfig(b)
	env := newBenchEnv(b)
	results := map[string]*sideResult{}
	for _, name := range cfg.sides {
		var s *side
		switch name {
		case "bridge":
			s = env.startBridge(b)
		case "peer":
			s = env.startPeer(b)
		default:
			b.Fatalf("MCB_PEER_SIDES: unknown side %q (bridge, peer)", name)
		}
		results[name] = env.run(b, cfg, s)
		s.stop()
	}
	printTable(cfg, results)
	for name, r := range results {
		if name == "peer" && os.Getenv("MCB_PEER_SMOKE") == "1" && len(r.failed) == r.stuckDeletes && r.stuckDeletes > 0 {
			// The smoke keeps the harness from rotting; a delete the peer does not finish is the
			// peer's behaviour (seen: its KubeadmControlPlane stuck deleting an uninitialized control
			// plane), reported, not a failure of ours.
			fmt.Printf("# peer: %d of its deletes did not finish in 10 min (the peer's; not failing the smoke)\n", len(r.failed))
			continue
		}
		if len(r.failed) > 0 {
			b.Errorf("%s: %d of its creates or deletes failed (above): its figures are incomplete", name, len(r.failed))
		}
	}
}

// benchEnv is what both sides share: the management cluster (watched by the harness as admin),
// the peer tenant's Keystone token and the harness CA for the counting proxies.
type benchEnv struct {
	root   string
	dir    string
	admin  *rest.Config
	kube   client.WithWatch
	token  *keystoneToken
	ca     *testCA
	events *clusterEvents
}

func newBenchEnv(tb testing.TB) *benchEnv {
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	e := &benchEnv{root: testutil.RepoRoot(), dir: tb.TempDir(), ca: newTestCA(tb)}
	var err error
	if e.admin, err = clientcmd.BuildConfigFromFlags("", filepath.Join(mgmtState, "admin.kubeconfig")); err != nil {
		tb.Fatalf("the management cluster's admin kubeconfig (make up): %v", err)
	}
	scheme, err := capi.NewScheme()
	if err != nil {
		tb.Fatal(err)
	}
	if e.kube, err = client.NewWithWatch(e.admin, client.Options{Scheme: scheme}); err != nil {
		tb.Fatal(err)
	}
	e.events = watchClusters(ctx, tb, e.kube)
	if e.token, err = tenantToken(); err != nil {
		tb.Fatalf("a token of %s from Keystone (make up): %v", tenantName, err)
	}
	return e
}

// side is one conductor under test, with what the harness needs to drive and measure it, and
// what another conductor needs to take its place on the same database and vhost.
type side struct {
	name     string
	rpc      *rpc.Client
	db       *sql.DB
	template string // uuid of the cluster template its clusters are made from
	proxy    *countingProxy
	pids     func() []int // the processes whose memory counts
	logPath  string       // the conductor's log
	// dbURL is the database in SQLAlchemy form ([database] connection), as dbtest gives it.
	dbURL string
	// transportURL is the RabbitMQ vhost, rabbit://user:password@host:port/vhost ([DEFAULT] transport_url).
	transportURL string
	// namespacePrefix is the conductor's namespace prefix: the peer's [capi_helm] namespace_prefix
	// (its namespaces are <prefix>-<project>, capiHelmNamespace), the bridge's [bridge] namespace_prefix.
	namespacePrefix string
	// stop ends the conductor and closes rpc; idempotent. The database, the vhost and the namespaces
	// (with the clusters in them) stay until the test's cleanup, for another conductor to take over.
	stop func()
	// kill ends the conductor as a crash would (the bridge's only; nil for the peer).
	kill func()
}

type sideResult struct {
	castToCluster, castToRow, deleteLag []time.Duration
	requestsPerCreate                   float64
	idleBefore, idleAfter               float64 // requests per minute
	rssIdle, rssAfter, rssEnd           float64 // MiB
	createRequests                      map[string]int
	idleRequests                        map[string]int
	failed                              []string
	// stuckDeletes counts deletes whose row was still there 10 min after cluster_delete.
	stuckDeletes int
}

// run is the sequence both sides get: an idle window, N creates one at a time (each waits for its
// CAPI Cluster), an idle window with the N clusters, then N deletes at once.
func (e *benchEnv) run(b testing.TB, cfg benchConfig, s *side) *sideResult {
	ctx := context.Background()
	r := &sideResult{}
	fmt.Printf("# %s: idle window %s\n", s.name, cfg.idle)
	r.rssIdle = rssMiB(s.pids())
	n0, _ := s.proxy.snapshot()
	time.Sleep(cfg.idle)
	n1, _ := s.proxy.snapshot()
	r.idleBefore = float64(n1-n0) / cfg.idle.Minutes()

	_, before := s.proxy.snapshot()
	ids := make([]string, 0, cfg.clusters)
	for i := range cfg.clusters {
		id, cast, err := e.castCreate(ctx, s, fmt.Sprintf("bench-%s-%d", s.name, i))
		if err != nil {
			b.Fatalf("%s: cast cluster_create: %v", s.name, err)
		}
		ids = append(ids, id)
		row := waitRow(ctx, s.db, id, 30*time.Second)
		if row.IsZero() {
			b.Fatalf("%s: no cluster row %s within 30s", s.name, id)
		}
		r.castToRow = append(r.castToRow, row.Sub(cast))
		seen, name, status := e.waitCluster(ctx, s, id, 3*time.Minute)
		if seen.IsZero() {
			r.failed = append(r.failed, fmt.Sprintf("%s: no CAPI Cluster within 3 min (row status %s)", id, status))
			continue
		}
		r.castToCluster = append(r.castToCluster, seen.Sub(cast))
		fmt.Printf("# %s create %d: cast → row %.1f ms, cast → CAPI Cluster %s %.0f ms\n", s.name, i, testutil.Millis(row.Sub(cast)), name, testutil.Millis(seen.Sub(cast)))
	}
	_, after := s.proxy.snapshot()
	r.createRequests = diff(after, before)
	r.requestsPerCreate = float64(sum(r.createRequests)) / float64(cfg.clusters)

	time.Sleep(5 * time.Second) // the last create's follow-up (add-ons, status) settles
	r.rssAfter = rssMiB(s.pids())
	n2, idleFrom := s.proxy.snapshot()
	time.Sleep(cfg.idle)
	n3, idleTo := s.proxy.snapshot()
	r.idleAfter = float64(n3-n2) / cfg.idle.Minutes()
	r.idleRequests = diff(idleTo, idleFrom)

	// Deletes, all at once: the lag is from the CAPI Cluster's disappearance to the row's.
	names := map[string]string{}
	for _, id := range ids {
		names[id] = stackID(ctx, s.db, id)
		if err := s.rpc.Cast(ctx, "cluster_delete", map[string]any{"uuid": id}, e.token.context()); err != nil {
			b.Fatalf("%s: cast cluster_delete: %v", s.name, err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, id := range ids {
		wg.Go(func() {
			gone := waitRowGone(ctx, s.db, id, 10*time.Minute)
			_, deleted := e.events.times(names[id])
			mu.Lock()
			defer mu.Unlock()
			switch {
			case gone.IsZero():
				r.failed = append(r.failed, fmt.Sprintf("%s: row still there 10 min after cluster_delete", id))
				r.stuckDeletes++
			case deleted.IsZero():
				r.failed = append(r.failed, fmt.Sprintf("%s: row gone but the CAPI Cluster %q never seen deleted", id, names[id]))
			default:
				r.deleteLag = append(r.deleteLag, gone.Sub(deleted))
			}
		})
	}
	wg.Wait()
	r.rssEnd = rssMiB(s.pids())
	for _, f := range r.failed {
		fmt.Printf("# %s FAILED %s\n", s.name, f)
	}
	return r
}

func diff(after, before map[string]int) map[string]int {
	d := map[string]int{}
	for k, v := range after {
		if v-before[k] > 0 {
			d[k] = v - before[k]
		}
	}
	return d
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// castCreate sends cluster_create as magnum-api 23.0.0 does (Cluster 1.24, one master, one worker),
// with the peer tenant's real token: both conductors call Keystone, Nova, Glance and Neutron with it.
func (e *benchEnv) castCreate(ctx context.Context, s *side, name string) (string, time.Time, error) {
	id := uuid.NewString()
	c := &magnum.Cluster{}
	c.UUID.Set(id)
	c.Name.Set(name)
	c.ProjectID.Set(e.token.projectID)
	c.UserID.Set(e.token.userID)
	c.ClusterTemplateID.Set(s.template)
	c.Keypair.Set("default")
	c.Labels.Set(magnum.DictFromMap(map[string]string{}))
	c.MasterFlavorID.Set("m1.medium")
	c.FlavorID.Set("m1.medium")
	c.CreateTimeout.Set(60)
	c.FloatingIPEnabled.Set(true)
	c.MasterLBEnabled.Set(false)
	obj, err := magnum.EncodeAt(c, magnum.MustVersion("1.24"), nil)
	if err != nil {
		return "", time.Time{}, err
	}
	t := time.Now()
	return id, t, s.rpc.Cast(ctx, "cluster_create", map[string]any{"cluster": obj, "master_count": 1, "node_count": 1, "create_timeout": 60}, e.token.context())
}

func waitRow(ctx context.Context, db *sql.DB, id string, timeout time.Duration) time.Time {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM cluster WHERE uuid = ?", id).Scan(&n); err == nil && n == 1 {
			return time.Now()
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Time{}
}

func waitRowGone(ctx context.Context, db *sql.DB, id string, timeout time.Duration) time.Time {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM cluster WHERE uuid = ?", id).Scan(&n); err == nil && n == 0 {
			return time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}
}

func stackID(ctx context.Context, db *sql.DB, id string) string {
	var s sql.NullString
	_ = db.QueryRowContext(ctx, "SELECT stack_id FROM cluster WHERE uuid = ?", id).Scan(&s)
	return s.String
}

// waitCluster waits for the row's stack_id (both conductors name the CAPI Cluster by it) and for
// the harness's watch to have seen that Cluster; it returns when the watch saw it.
func (e *benchEnv) waitCluster(ctx context.Context, s *side, id string, timeout time.Duration) (time.Time, string, string) {
	deadline := time.Now().Add(timeout)
	var name, status string
	for time.Now().Before(deadline) {
		var sid, st sql.NullString
		_ = s.db.QueryRowContext(ctx, "SELECT stack_id, status FROM cluster WHERE uuid = ?", id).Scan(&sid, &st)
		name, status = sid.String, st.String
		if name != "" {
			if added, _ := e.events.times(name); !added.IsZero() {
				return added, name, status
			}
		}
		if strings.HasSuffix(status, "_FAILED") {
			return time.Time{}, name, status
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, name, status
}

// clusterEvents records when the harness's watch first saw each CAPI Cluster (by name) and when it
// saw it deleted.
type clusterEvents struct {
	mu             sync.Mutex
	added, deleted map[string]time.Time
}

func watchClusters(ctx context.Context, tb testing.TB, c client.WithWatch) *clusterEvents {
	ev := &clusterEvents{added: map[string]time.Time{}, deleted: map[string]time.Time{}}
	go func() {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, &clusterv1.ClusterList{})
			if err != nil {
				time.Sleep(time.Second)
				continue
			}
			for e := range w.ResultChan() {
				now := time.Now()
				cl, ok := e.Object.(*clusterv1.Cluster)
				if !ok {
					continue
				}
				ev.mu.Lock()
				switch e.Type {
				case watch.Added, watch.Modified:
					if _, seen := ev.added[cl.Name]; !seen {
						ev.added[cl.Name] = now
					}
				case watch.Deleted:
					ev.deleted[cl.Name] = now
				}
				ev.mu.Unlock()
			}
			w.Stop()
		}
	}()
	return ev
}

func (ev *clusterEvents) times(name string) (added, deleted time.Time) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.added[name], ev.deleted[name]
}

// rssMiB sums the resident sets of the processes and their descendants (the peer is a master and
// its ServiceWrapper workers; helm children come and go and are counted while they run).
func rssMiB(pids []int) float64 {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", en.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so split after the last ')'.
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			children[ppid] = append(children[ppid], pid)
		}
	}
	var kb float64
	seen := map[int]bool{}
	var walk func(int)
	walk = func(pid int) {
		if seen[pid] {
			return
		}
		seen[pid] = true
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err == nil {
			for _, l := range strings.Split(string(data), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
					v, _ := strconv.ParseFloat(f[1], 64)
					kb += v
				}
			}
		}
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, p := range pids {
		walk(p)
	}
	return kb / 1024
}

// The side by side runs as a tenant of its own: its clusters, namespaces and application credentials
// never show to the end-to-end tests, which run beside it and list and count demo's.
const tenantName = "peer_demo"

var tenantPassword = func() string {
	if p := os.Getenv("PEER_DEMO_PASSWORD"); p != "" {
		return p
	}
	return "secretpeer_demo"
}()

// keystoneToken is a project-scoped token of the tenant, and the context magnum-api would send with it.
type keystoneToken struct {
	id, userID, projectID string
	roles                 []string
	info                  json.RawMessage
}

func tenantToken() (*keystoneToken, error) {
	body, err := json.Marshal(map[string]any{"auth": map[string]any{
		"identity": map[string]any{"methods": []string{"password"}, "password": map[string]any{
			"user": map[string]any{"name": tenantName, "domain": map[string]string{"id": "default"}, "password": tenantPassword}}},
		"scope": map[string]any{"project": map[string]any{"name": tenantName, "domain": map[string]string{"id": "default"}}},
	}})
	if err != nil {
		return nil, err
	}
	resp, err := http.Post(keystoneURL+"/auth/tokens", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("keystone: %s", resp.Status)
	}
	var doc map[string]map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, err
	}
	t := &keystoneToken{id: resp.Header.Get("X-Subject-Token")}
	var user, project struct{ ID string }
	var roles []struct{ Name string }
	_ = json.Unmarshal(doc["token"]["user"], &user)
	_ = json.Unmarshal(doc["token"]["project"], &project)
	_ = json.Unmarshal(doc["token"]["roles"], &roles)
	t.userID, t.projectID = user.ID, project.ID
	for _, r := range roles {
		t.roles = append(t.roles, r.Name)
	}
	// magnum-api sends the token body with the token itself inside it.
	doc["token"]["auth_token"], _ = json.Marshal(t.id)
	if t.info, err = json.Marshal(doc); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *keystoneToken) context() *rpc.Context {
	return &rpc.Context{User: t.userID, UserID: t.userID, UserName: tenantName, Project: t.projectID, ProjectID: t.projectID,
		ProjectName: tenantName, UserDomain: "default", UserDomainID: "default", UserDomainName: "Default", Roles: t.roles,
		IsAdminProject: true, RequestID: "req-" + uuid.NewString(), AuthURL: keystoneURL, AuthToken: t.id, AuthTokenInfo: t.info,
		UserIdentity: t.userID + " " + t.projectID + " - default -"}
}

// newSideDB makes a database with Magnum 23's schema and a template for the side's conductor; it
// returns the database's SQLAlchemy URL, a connection and the template's uuid.
func newSideDB(tb testing.TB, driver string) (string, *sql.DB, string) {
	url := dbtest.NewMySQL(tb, dbtest.Release23)
	db, err := sql.Open("mysql", dsnOf(url))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	tmpl := uuid.NewString()
	if _, err := db.Exec("INSERT INTO cluster_template (uuid, name, coe, public, server_type, image_id, project_id, user_id, "+
		"flavor_id, master_flavor_id, keypair_id, external_network_id, network_driver, driver, labels, tls_disabled, "+
		"registry_enabled, master_lb_enabled, floating_ip_enabled, hidden) VALUES (?, 'bench-peer', 'kubernetes', 1, 'vm', ?, "+
		"'admin', 'admin', 'm1.medium', 'm1.medium', 'default', 'public', 'calico', ?, '{}', 0, 0, 0, 1, 0)", tmpl, imageID, driver); err != nil {
		tb.Fatal(err)
	}
	return url, db, tmpl
}

// dsnOf turns dbtest's SQLAlchemy URL (mysql+pymysql://user[:pw]@host:port/db?…) into a Go DSN.
func dsnOf(u string) string {
	rest := strings.TrimPrefix(u, "mysql+pymysql://")
	rest, _, _ = strings.Cut(rest, "?")
	cred, hostdb, _ := strings.Cut(rest, "@")
	host, dbname, _ := strings.Cut(hostdb, "/")
	return fmt.Sprintf("%s@tcp(%s)/%s?parseTime=true", cred, host, dbname)
}

// startProcess runs cmd with its output in logPath; it dies with the harness (Pdeathsig).
func startProcess(tb testing.TB, cmd *exec.Cmd, logPath string) {
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = logf.Close() })
}

// stopGroup ends the process group of cmd: TERM, then KILL after grace.
func stopGroup(cmd *exec.Cmd, grace time.Duration) {
	if cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}
