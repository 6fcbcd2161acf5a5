package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestChurnWithReplicas: three replicas of the bridge on the local stack;
// MCB_CHURN_CLUSTERS clusters (20) created and MCB_CHURN_DELETES of them (10) deleted concurrently
// through the real CLI, while the leader and then one other replica are SIGKILLed at random points
// (seeded: MCB_CHURN_SEED) and started again. Every cluster must end in its final state, with one CA
// (Magnum's ca_cert_ref equal to CAPI's -ca Secret, `coe cluster config` + kubectl working), no CAPI
// object without a Magnum row and no row without its objects, no credential, Secret, key pair or
// operation claim left of a deleted cluster. It logs the leader takeover time, how long the killed
// follower's operation claims took to move, and the status lag p50/p99 during the churn, and ends
// with one CHURN line.
//
// It takes over the stack's bridges (BRIDGE_REPLICAS=3 of this repository's bin/, restored to one
// at the end), so it is opt-in: `make churn` (MCB_CHURN=1), under the stack lock. With
// MCB_CHURN_PREVIOUS=1 the first replica runs the previous release (deploy/local/previous-release.sh):
// a rolling upgrade caught half-way, releases N and N+1 sharing claims, leases and status writes.
// MCB_CHURN_INSTANCE=newest runs it on the Magnum 23 instance (holding its bridge alone), as `make
// test` does next to the e2e package.
func TestChurnWithReplicas(t *testing.T) {
	requireStack(t)
	if os.Getenv("MCB_CHURN") != "1" {
		t.Skip("the churn test restarts the stack's bridges as three replicas and runs ~15 min: `make churn` (MCB_CHURN=1); " +
			"too long for `make test`'s budget, and the claims it exercises are unit-tested in internal/conductor and internal/app")
	}
	total, _ := strconv.Atoi(testutil.Env("MCB_CHURN_CLUSTERS", "20"))
	deletes, _ := strconv.Atoi(testutil.Env("MCB_CHURN_DELETES", "10"))
	seed, _ := strconv.ParseInt(testutil.Env("MCB_CHURN_SEED", "1"), 10, 64)
	require.True(t, total > 0 && deletes >= 0 && deletes <= total)
	rng := rand.New(rand.NewSource(seed))
	ctx := context.Background()

	in := churnInstanceOf(t, testutil.Env("MCB_CHURN_INSTANCE", "zed"))
	cloud := in.cloud
	conf, err := config.Load(in.magnumConf)
	require.NoError(t, err)
	store := magnumStore(t, conf)
	_, cfg := testutil.ManagementCluster(t)
	scheme, err := capi.NewScheme()
	require.NoError(t, err)
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	e := &faultEnv{t: t, store: store, kube: kube}

	// Three replicas of this repository's bridge; one again at the end, whatever happens.
	replicas := in.replicas
	var bins, extra string
	if os.Getenv("MCB_CHURN_PREVIOUS") == "1" {
		prev := strings.TrimSpace(commandOutput(t, repoRoot(t), "deploy/local/previous-release.sh"))
		bins = prev + " " + filepath.Join(repoRoot(t), "bin/magnum-capi-bridge")
		extra = "infrastructure = inmemory" // the previous release's name of default_infrastructure
		t.Logf("churn: replica 1 runs the previous release, %s", strings.TrimSpace(commandOutput(t, repoRoot(t), prev, "--version")))
	}
	bridgeUp := func(n int) error {
		cmd := exec.Command(filepath.Join(repoRoot(t), "deploy/local/bridge-up.sh"), in.name)
		cmd.Env = append(os.Environ(), fmt.Sprintf("BRIDGE_REPLICAS=%d", n), "BRIDGE_BINS="+bins, "BRIDGE_EXTRA_CONFIG="+extra)
		if n == 1 {
			cmd.Env = append(cmd.Env, "BRIDGE_BINS=", "BRIDGE_EXTRA_CONFIG=") // the stack's own bridge again
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("BRIDGE_REPLICAS=%d bridge-up.sh: %v: %s", n, err, out)
		}
		return nil
	}
	if in.name == "newest" {
		// Registered before the restore below: cleanups run last first, so it is released after.
		t.Cleanup(newestBridge.hold(t, true))
	}
	t.Cleanup(func() {
		if err := bridgeUp(1); err != nil {
			t.Errorf("restoring one bridge: %v", err)
		}
	})
	require.NoError(t, bridgeUp(3))
	for i, r := range replicas {
		if i == 0 && bins != "" {
			continue // the first release before v0.1.0 has no health endpoint; bridge-up.sh saw it serving
		}
		require.Eventually(t, func() bool { return r.ready() }, 60*time.Second, time.Second, "%s not ready", r.name)
	}
	leaseNS, leaseName := "magnum-capi-bridge", "magnum-capi-bridge-"+strings.TrimSuffix(in.namespacePrefix, "-")
	holder := func() (string, time.Time) {
		l, err := cs.CoordinationV1().Leases(leaseNS).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return "", time.Time{}
		}
		renewed := time.Time{}
		if l.Spec.RenewTime != nil {
			renewed = l.Spec.RenewTime.Time
		}
		return *l.Spec.HolderIdentity, renewed
	}
	require.Eventually(t, func() bool { id, _ := holder(); return replicaOf(id, replicas) >= 0 }, 60*time.Second, time.Second,
		"no replica of this stack holds %s/%s", leaseNS, leaseName)

	// Status lag: every replica's histogram, scraped through the churn (a killed replica's counts
	// start again from zero in its next life; what it counted after its last scrape is lost).
	lag := newLagCollector(replicas)
	scrapeCtx, stopScraping := context.WithCancel(ctx)
	scraped := make(chan struct{})
	go func() { defer close(scraped); lag.run(scrapeCtx, 3*time.Second) }()

	tmpl := createTemplate(t, cloud)
	start := time.Now()
	var (
		mu      sync.Mutex
		ids     = make([]string, total)
		deleted = map[string]bool{}
		errs    []string
		wg      sync.WaitGroup
		cliSem  = make(chan struct{}, 6) // CLI processes at a time on a 2-core host
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	cliRun := func(args ...string) (string, error) {
		cliSem <- struct{}{}
		defer func() { <-cliSem }()
		// No retries: a create that failed on the client side may still have been accepted, and a
		// second one would be a cluster the test does not know of. Creates and deletes are casts:
		// magnum-api answers them whichever replicas are alive.
		return runCLI(cloud, args...)
	}
	deleteDelays := make([]time.Duration, deletes)
	for i := range deleteDelays {
		deleteDelays[i] = time.Duration(rng.Intn(30000)) * time.Millisecond
	}
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("churn-%d-%s", i, testutil.RandomHex(3))
			out, err := cliRun("coe", "cluster", "create", name, "--cluster-template", tmpl, "--master-count", "1", "--node-count", "1")
			if err != nil {
				fail("create %s: %v", name, err)
				return
			}
			id := uuidIn(out)
			if id == "" {
				fail("create %s: no uuid in %q", name, out)
				return
			}
			mu.Lock()
			ids[i] = id
			mu.Unlock()
			if i >= deletes {
				return
			}
			time.Sleep(deleteDelays[i])
			if _, err := cliRun("coe", "cluster", "delete", id); err != nil {
				fail("delete %s: %v", id, err)
				return
			}
			mu.Lock()
			deleted[id] = true
			mu.Unlock()
		}()
	}
	t.Cleanup(func() { deleteChurnClusters(t, cloud, ids) })

	// The faults, meanwhile: the leader, then another replica, each SIGKILLed and started again.
	var takeover, claimsMoved time.Duration
	var claimsOfVictim int
	var (
		restarts   sync.Mutex
		restarting sync.WaitGroup
	)
	killAndRestart := func(r churnReplica) {
		killPIDFile(t, r.name)
		restarting.Add(1)
		go func() {
			defer restarting.Done()
			time.Sleep(3 * time.Second)
			restarts.Lock()
			defer restarts.Unlock()
			if err := bridgeUp(3); err != nil {
				t.Errorf("restarting %s: %v", r.name, err)
			}
		}()
	}
	time.Sleep(time.Duration(5000+rng.Intn(20000)) * time.Millisecond)
	oldLeader, _ := holder()
	li := replicaOf(oldLeader, replicas)
	require.GreaterOrEqual(t, li, 0, "leader %q", oldLeader)
	killed := time.Now()
	t.Logf("churn +%s: SIGKILL the leader %s (%s)", killed.Sub(start).Round(time.Second), replicas[li].name, oldLeader)
	killAndRestart(replicas[li])
	for {
		id, renewed := holder()
		if id != "" && id != oldLeader && renewed.After(killed) {
			takeover = time.Since(killed)
			t.Logf("churn: %s leads %.1f s after the kill (%s)", replicas[max(replicaOf(id, replicas), 0)].name, takeover.Seconds(), id)
			break
		}
		require.Less(t, time.Since(killed), 2*time.Minute, "no new leader 2 min after the leader was killed")
		time.Sleep(200 * time.Millisecond)
	}
	restarting.Wait() // the killed leader is back: the next victim is chosen among three live replicas
	time.Sleep(time.Duration(5000+rng.Intn(20000)) * time.Millisecond)
	leaderNow, _ := holder()
	var others []int
	for i := range replicas {
		if i != replicaOf(leaderNow, replicas) {
			others = append(others, i)
		}
	}
	victim := replicas[others[rng.Intn(len(others))]]
	victimID := identityOf(t, victim)
	held := claimsHeldBy(t, cs, victimID)
	claimsOfVictim = len(held)
	killed = time.Now()
	t.Logf("churn +%s: SIGKILL the follower %s (%s) holding %d operation claims", killed.Sub(start).Round(time.Second), victim.name, victimID, len(held))
	killAndRestart(victim)
	// Its operations move: each claim is taken by another replica or released (swept) once the
	// leader resumes them (expiry 20 s + at most 30 s).
	for len(held) > 0 {
		for name := range held {
			l, err := cs.CoordinationV1().Leases(leaseNS).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && (l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, victimID))) {
				delete(held, name)
			}
		}
		require.Less(t, time.Since(killed), 3*time.Minute, "claims of the killed follower still held: %v", held)
		time.Sleep(500 * time.Millisecond)
	}
	claimsMoved = time.Since(killed)
	t.Logf("churn: the killed follower's %d claims moved within %.1f s", claimsOfVictim, claimsMoved.Seconds())

	wg.Wait()
	restarting.Wait()
	require.Empty(t, errs, "requests the CLI could not make")
	mu.Lock()
	require.Len(t, deleted, deletes)
	mu.Unlock()

	// Every cluster ends in its final state.
	outcome := make([]string, total)
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := "CREATE_COMPLETE"
			if deleted[id] {
				want = "GONE"
			}
			st, reason := e.await(id, want, 15*time.Minute)
			if st != want {
				outcome[i] = fmt.Sprintf("%s: %s, want %s (%s)", id, st, want, reason)
			}
		}()
	}
	wg.Wait()
	converged := time.Since(start)
	stopScraping()
	<-scraped
	for _, o := range outcome {
		if o != "" {
			t.Error(o)
		}
	}
	require.False(t, t.Failed(), "clusters that did not reach their final state")
	t.Logf("churn: all %d clusters final %s after the first request", total, converged.Round(time.Second))

	// Consistency of each cluster.
	// Keystone's catalog is in RegionOne: the demo user's application credentials are listed there,
	// whichever Magnum the clusters went through.
	creds := demoCredentialNames(t, cloudDemo)
	for _, id := range ids {
		if deleted[id] {
			// A replica of the previous release (without operation claims before v0.1.0) may
			// apply a create after this release's replica finished its delete; that replica
			// deletes such a Cluster again within afterDeleteCheck (conductor), and Cluster API
			// then removes it: what is left is looked at for up to 90 s.
			msg, left := e.gone(id), capiObjects(t, id)
			for deadline := time.Now().Add(90 * time.Second); (msg != "" || left != "") && time.Now().Before(deadline); {
				time.Sleep(3 * time.Second)
				msg, left = e.gone(id), capiObjects(t, id)
			}
			if msg != "" {
				t.Errorf("deleted %s: %s", id, msg)
			}
			if left != "" {
				t.Errorf("deleted %s: objects left: %s", id, left)
			}
			for _, c := range creds {
				if strings.HasPrefix(c, "magnum-"+id+"-") {
					t.Errorf("deleted %s: application credential %s left", id, c)
				}
			}
			continue
		}
		if msg := e.consistent(id); msg != "" {
			t.Errorf("%s: %s", id, msg)
		}
		var mine []string
		for _, c := range creds {
			if strings.HasPrefix(c, "magnum-"+id+"-") {
				mine = append(mine, c)
			}
		}
		require.ElementsMatch(t, []string{"magnum-" + id + "-capo", "magnum-" + id + "-workload"}, mine, "credentials of %s", id)
	}
	// `coe cluster config` + kubectl for each surviving cluster.
	for _, id := range ids {
		if deleted[id] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			host, dir := cliFor(cloud).tempDir(t)
			if _, err := cliRun("coe", "cluster", "config", id, "--dir", dir, "--force"); err != nil {
				fail("cluster config %s: %v", id, err)
				return
			}
			out, err := kubectl(t, filepath.Join(host, "config"), "get", "nodes", "-o", "name")
			if err != nil || len(strings.Fields(out)) != 2 {
				fail("kubectl get nodes of %s: %v: %s", id, err, out)
			}
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
	// No CAPI Cluster of this bridge's namespaces without its Magnum row.
	var all clusterv1.ClusterList
	require.NoError(t, kube.List(ctx, &all, client.HasLabels{templates.LabelClusterUUID}))
	for _, c := range all.Items {
		if !strings.HasPrefix(c.Namespace, in.namespacePrefix) || in.name == "zed" && strings.HasPrefix(c.Namespace, "magnum23-") {
			continue
		}
		if _, err := store.GetCluster(ctx, c.Labels[templates.LabelClusterUUID]); err != nil {
			t.Errorf("CAPI Cluster %s/%s has no Magnum row: %v", c.Namespace, c.Name, err)
		}
	}
	// No operation claim outlives its operation (dead replicas' claims are swept within ~50 s).
	require.Eventually(t, func() bool {
		list, err := cs.CoordinationV1().Leases(leaseNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operation-claim"})
		if err != nil {
			return false
		}
		for _, l := range list.Items {
			for _, id := range ids {
				if strings.HasSuffix(l.Name, id) {
					return false
				}
			}
		}
		return true
	}, 90*time.Second, 2*time.Second, "operation claims left after the operations ended")

	p50, p99, n := lag.quantiles(0.5, 0.99)
	t.Logf("CHURN seed=%d replicas=3 clusters=%d deleted=%d: all final and consistent in %s; leader takeover %.1f s (SIGKILL → new Lease holder); "+
		"killed follower's %d operation claims moved in %.1f s; status lag p50 %.1f s p99 %.1f s (%d status writes)",
		seed, total, deletes, converged.Round(time.Second), takeover.Seconds(), claimsOfVictim, claimsMoved.Seconds(), p50, p99, n)
}

// A churnInstance is the half of the stack whose bridges the churn test runs as three replicas.
type churnInstance struct {
	name, cloud, magnumConf, namespacePrefix string
	replicas                                 []churnReplica
}

func churnInstanceOf(t *testing.T, name string) churnInstance {
	switch name {
	case "zed":
		return churnInstance{name: name, cloud: cloudDemo, magnumConf: testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf"),
			namespacePrefix: "magnum-", replicas: []churnReplica{{"bridge", 9590}, {"bridge-2", 9592}, {"bridge-3", 9594}}}
	case "newest":
		requireNewest(t)
		return churnInstance{name: name, cloud: cloudNewest, magnumConf: filepath.Join(newestRoot, "etc/magnum/magnum.conf"),
			namespacePrefix: "magnum23-", replicas: []churnReplica{{"bridge-newest", 9591}, {"bridge-newest-2", 9593}, {"bridge-newest-3", 9595}}}
	}
	t.Fatalf("MCB_CHURN_INSTANCE: zed or newest, not %q", name)
	return churnInstance{}
}

type churnReplica struct {
	name string
	port int
}

func (r churnReplica) ready() bool {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", r.port))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// replicaOf finds the replica whose PID the Lease identity (<host>_<pid>_<random>) names.
func replicaOf(identity string, replicas []churnReplica) int {
	parts := strings.Split(identity, "_")
	if len(parts) < 3 {
		return -1
	}
	pid := parts[len(parts)-2]
	for i, r := range replicas {
		raw, err := os.ReadFile(filepath.Join(testutil.Env("MCB_RUN_DIR", "/var/lib/magnum-capi-bridge/run"), r.name+".pid"))
		if err == nil && strings.TrimSpace(string(raw)) == pid {
			return i
		}
	}
	return -1
}

// identityOf is the prefix of a replica's Lease identity (<host>_<pid>_<random>; host is
// <hostname>-<name> on the local stack): enough to recognise its claims.
func identityOf(t *testing.T, r churnReplica) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testutil.Env("MCB_RUN_DIR", "/var/lib/magnum-capi-bridge/run"), r.name+".pid"))
	require.NoError(t, err)
	host, err := os.Hostname()
	require.NoError(t, err)
	return host + "-" + r.name + "_" + strings.TrimSpace(string(raw)) + "_"
}

// claimsHeldBy lists the operation claims (Lease names) held by an identity (or identity prefix).
func claimsHeldBy(t *testing.T, cs kubernetes.Interface, identity string) map[string]bool {
	t.Helper()
	list, err := cs.CoordinationV1().Leases("magnum-capi-bridge").List(context.Background(),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operation-claim"})
	require.NoError(t, err)
	held := map[string]bool{}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil && strings.HasPrefix(*l.Spec.HolderIdentity, identity) {
			held[l.Name] = true
		}
	}
	return held
}

func uuidIn(out string) string {
	for _, f := range strings.Fields(out) {
		if len(f) == 36 && strings.Count(f, "-") == 4 {
			return f
		}
	}
	return ""
}

// demoCredentialNames lists all application credentials of the cloud's user (demo).
func demoCredentialNames(t *testing.T, cloud string) []string {
	t.Helper()
	var creds []struct {
		Name string `json:"Name"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustOpenstack(t, cloud, "application", "credential", "list", "-f", "json")), &creds))
	var out []string
	for _, c := range creds {
		out = append(out, c.Name)
	}
	return out
}

// deleteChurnClusters deletes what is left of the test's clusters, all at once.
func deleteChurnClusters(t *testing.T, cloud string, ids []string) {
	var wg sync.WaitGroup
	for _, id := range ids {
		if id == "" {
			continue
		}
		if _, err := showCluster(t, cloud, id); err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = runCLI(cloud, "coe", "cluster", "delete", id)
			deadline := time.Now().Add(6 * time.Minute)
			for time.Now().Before(deadline) {
				if _, err := showCluster(t, cloud, id); err != nil && strings.Contains(err.Error(), "could not be found") {
					return
				}
				time.Sleep(3 * time.Second)
			}
			t.Errorf("cluster %s still exists 6 min after its delete", id)
		}()
	}
	wg.Wait()
}

// lagCollector accumulates magnum_capi_bridge_status_lag_seconds over the replicas' lives: the
// increase of every bucket since the first scrape, a restarted process counting from zero.
type lagCollector struct {
	replicas []churnReplica
	mu       sync.Mutex
	base     map[int]map[float64]float64 // first scrape of each replica (counts before the churn)
	last     map[int]map[float64]float64 // last scrape of the current life
	done     map[float64]float64         // increases of ended lives
}

func newLagCollector(replicas []churnReplica) *lagCollector {
	return &lagCollector{replicas: replicas, base: map[int]map[float64]float64{}, last: map[int]map[float64]float64{}, done: map[float64]float64{}}
}

func (l *lagCollector) run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		for i, r := range l.replicas {
			if b, ok := scrapeLag(r.port); ok {
				l.observe(i, b)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (l *lagCollector) observe(i int, b map[float64]float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.base[i]; !ok {
		l.base[i], l.last[i] = b, b
		return
	}
	if b[math.Inf(1)] < l.last[i][math.Inf(1)] { // a new life: bank the old one
		for le, v := range l.last[i] {
			l.done[le] += v - l.base[i][le]
		}
		l.base[i] = map[float64]float64{}
	}
	l.last[i] = b
}

// quantiles estimates quantiles from the cumulative buckets (linear within a bucket, as
// histogram_quantile does); n is the number of observations.
func (l *lagCollector) quantiles(qs ...float64) (float64, float64, int) {
	l.mu.Lock()
	total := map[float64]float64{}
	for le, v := range l.done {
		total[le] += v
	}
	for i, b := range l.last {
		for le, v := range b {
			total[le] += v - l.base[i][le]
		}
	}
	l.mu.Unlock()
	les := make([]float64, 0, len(total))
	for le := range total {
		les = append(les, le)
	}
	sort.Float64s(les)
	n := total[math.Inf(1)]
	out := make([]float64, len(qs))
	for qi, q := range qs {
		rank := q * n
		prevLE, prevCount := 0.0, 0.0
		for _, le := range les {
			if c := total[le]; c >= rank && n > 0 {
				if math.IsInf(le, 1) {
					out[qi] = prevLE
				} else if c > prevCount {
					out[qi] = prevLE + (le-prevLE)*(rank-prevCount)/(c-prevCount)
				} else {
					out[qi] = le
				}
				break
			} else {
				prevLE, prevCount = le, c
			}
		}
	}
	return out[0], out[1], int(n)
}

// scrapeLag reads a replica's status-lag buckets, summed over the status label.
func scrapeLag(port int) (map[float64]float64, bool) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	buckets := map[float64]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "magnum_capi_bridge_status_lag_seconds_bucket{") {
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.LastIndex(line, " ")
		if i < 0 || j < 0 {
			continue
		}
		leRaw := line[i+4:]
		leRaw = leRaw[:strings.Index(leRaw, `"`)]
		le, err1 := strconv.ParseFloat(leRaw, 64)
		if leRaw == "+Inf" {
			le, err1 = math.Inf(1), nil
		}
		v, err2 := strconv.ParseFloat(line[j+1:], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		buckets[le] += v
	}
	return buckets, resp.StatusCode == http.StatusOK
}
