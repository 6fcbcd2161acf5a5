package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The fault matrix (issue "never stuck"): every operation × every fault a real cloud has, injected
// for real — kube-apiserver killed and started again 40 s later, MariaDB restarted, RabbitMQ
// restarted, Keystone stopped for 30 s, the bridges SIGKILLed at a random point (a fixed seed) and
// started again. Each operation must end in its *_COMPLETE state (every fault here is shorter than
// the operations' deadlines), with the CAPI objects and Magnum's rows consistent: one CAPI Cluster,
// the CA Magnum stores equal to the one CAPI's -ca Secret holds, node counts equal on both sides,
// nothing left of a deleted cluster.
//
// It restarts services every other test uses, so `make test` runs it alone, after all other
// packages (MCB_FAULTS=1); `make soak` runs it with several seeds and prints the table.

// A faultInjector breaks something: before runs before the round's operations are requested (nil:
// nothing), inject after they were accepted, and returns once the fault is over.
type faultInjector struct {
	name   string
	before func(t *testing.T)
	inject func(t *testing.T, rng *rand.Rand)
}

func runScript(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(t), args[0]), args[1:]...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
}

func killPIDFile(t *testing.T, name string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testutil.Env("MCB_RUN_DIR", "/var/lib/magnum-capi-bridge/run"), name+".pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond)
	}
}

func shell(t *testing.T, script string) {
	t.Helper()
	out, err := exec.Command("bash", "-c", script).CombinedOutput()
	require.NoError(t, err, "%s: %s", script, out)
}

var apiserverKilled time.Time

var faultInjectors = []faultInjector{
	// The issue's first scenario: the apiserver is already gone when the requests arrive, and back
	// 40 s later.
	{"apiserver killed 40 s", func(t *testing.T) { killPIDFile(t, "kube-apiserver"); apiserverKilled = time.Now() },
		func(t *testing.T, _ *rand.Rand) {
			time.Sleep(time.Until(apiserverKilled.Add(40 * time.Second)))
			runScript(t, "deploy/local/mgmt-up.sh")
		}},
	{"MariaDB restarted", nil, func(t *testing.T, _ *rand.Rand) {
		shell(t, "mysqladmin --protocol=socket shutdown && while mysqladmin --protocol=socket ping >/dev/null 2>&1; do sleep 0.2; done")
		runScript(t, "deploy/local/services.sh")
	}},
	{"RabbitMQ restarted", nil, func(t *testing.T, _ *rand.Rand) {
		shell(t, "rabbitmqctl -q stop_app && rabbitmqctl -q start_app && rabbitmqctl -q await_startup --timeout 120")
	}},
	{"Keystone stopped 30 s", nil, func(t *testing.T, _ *rand.Rand) {
		runScript(t, "deploy/local/openstack/keystone.sh", "stop")
		time.Sleep(30 * time.Second)
		runScript(t, "deploy/local/openstack/keystone.sh", "start")
	}},
	{"bridges SIGKILLed", nil, func(t *testing.T, rng *rand.Rand) {
		time.Sleep(time.Duration(rng.Intn(4000)) * time.Millisecond)
		killPIDFile(t, "bridge")
		killPIDFile(t, "bridge-newest")
		runScript(t, "deploy/local/bridge-up.sh", "zed")
		runScript(t, "deploy/local/bridge-up.sh", "newest")
	}},
}

// faultEnv is what the matrix reads to check consistency: Magnum's database and the management cluster.
type faultEnv struct {
	t     *testing.T
	store *db.Store
	kube  client.Client
	rpc   *rpc.Client
	// busyCluster has a write retrying while the apiserver is down: its CA calls must not wait.
	busyCluster string
	// full: every operation runs in every round (else each in one round: matrixPlan).
	full bool
}

// timeCACall is `get_ca_certificate` for a cluster as magnum-api sends it (the first half of
// `coe cluster config`), timed.
func (e *faultEnv) timeCACall(id string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	row, err := e.store.GetCluster(ctx, id)
	if err != nil {
		return 0, err
	}
	obj, err := magnum.Encode(row.View(), nil)
	if err != nil {
		return 0, err
	}
	rctx := &rpc.Context{ProjectID: *row.ProjectID, Project: *row.ProjectID, UserID: *row.UserID, User: *row.UserID}
	start := time.Now()
	_, err = e.rpc.Call(ctx, "get_ca_certificate", map[string]any{"cluster": obj, "ca_cert_type": "kubernetes"}, rctx, 20*time.Second)
	return time.Since(start), err
}

func (e *faultEnv) status(id string) (string, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := e.store.GetCluster(ctx, id)
	if err != nil {
		if strings.Contains(err.Error(), "could not be found") {
			return "GONE", ""
		}
		return "UNKNOWN", err.Error() // the database is restarting
	}
	reason := ""
	if c.StatusReason != nil {
		reason = *c.StatusReason
	}
	return string(c.Status), reason
}

// await polls Magnum's row until the operation ended (want, or any *_FAILED).
func (e *faultEnv) await(id, want string, timeout time.Duration) (string, string) {
	deadline := time.Now().Add(timeout)
	var st, reason string
	for time.Now().Before(deadline) {
		st, reason = e.status(id)
		if st == want || strings.HasSuffix(st, "_FAILED") {
			return st, reason
		}
		time.Sleep(2 * time.Second)
	}
	return "STUCK in " + st, reason
}

// consistent checks the invariants of a live cluster; it returns what is wrong ("" when nothing).
func (e *faultEnv) consistent(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	row, err := e.store.GetCluster(ctx, id)
	if err != nil {
		return "row: " + err.Error()
	}
	var clusters clusterv1.ClusterList
	if err := e.kube.List(ctx, &clusters, client.MatchingLabels{templates.LabelClusterUUID: id}); err != nil {
		return "list clusters: " + err.Error()
	}
	if len(clusters.Items) != 1 {
		return fmt.Sprintf("%d CAPI Clusters", len(clusters.Items))
	}
	c := clusters.Items[0]
	if row.CACertRef == nil {
		return "no ca_cert_ref"
	}
	kp, err := e.store.GetX509KeyPair(ctx, *row.CACertRef)
	if err != nil {
		return "ca key pair: " + err.Error()
	}
	var secret corev1.Secret
	if err := e.kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-ca"}, &secret); err != nil {
		return "ca secret: " + err.Error()
	}
	if kp.Certificate == nil || strings.TrimSpace(string(secret.Data["tls.crt"])) != strings.TrimSpace(*kp.Certificate) {
		return "the CA in Magnum differs from CAPI's -ca Secret"
	}
	groups, err := e.store.ListNodeGroups(ctx, id)
	if err != nil {
		return "node groups: " + err.Error()
	}
	var mds clusterv1.MachineDeploymentList
	if err := e.kube.List(ctx, &mds, client.InNamespace(c.Namespace), client.MatchingLabels{clusterv1.ClusterNameLabel: c.Name}); err != nil {
		return "list machine deployments: " + err.Error()
	}
	for _, g := range groups {
		want := int32(0)
		if g.NodeCount != nil {
			want = int32(*g.NodeCount)
		}
		if g.Role != nil && *g.Role == "master" {
			if r := c.Spec.Topology.ControlPlane.Replicas; r == nil || *r != want {
				return fmt.Sprintf("control plane: Magnum %d, CAPI %v", want, r)
			}
			continue
		}
		found := false
		for _, md := range mds.Items {
			if md.Labels[templates.LabelNodeGroupUUID] == g.UUID {
				found = true
				if md.Spec.Replicas == nil || *md.Spec.Replicas != want {
					return fmt.Sprintf("node group %s: Magnum %d, CAPI %v", g.Name, want, md.Spec.Replicas)
				}
			}
		}
		if !found {
			return "node group " + g.Name + " has no MachineDeployment"
		}
	}
	return ""
}

// gone checks nothing is left of a deleted cluster: row, CAPI objects, key pairs.
func (e *faultEnv) gone(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if st, _ := e.status(id); st != "GONE" {
		return "row still " + st
	}
	var clusters clusterv1.ClusterList
	if err := e.kube.List(ctx, &clusters, client.MatchingLabels{templates.LabelClusterUUID: id}); err != nil || len(clusters.Items) > 0 {
		return fmt.Sprintf("CAPI Clusters left: %d (%v)", len(clusters.Items), err)
	}
	refs := certs.ClusterRefs(id)
	for _, ref := range []string{refs.CACertRef, refs.EtcdCACertRef, refs.FrontProxyCACertRef, refs.MagnumCertRef} {
		if _, err := e.store.GetX509KeyPair(ctx, ref); err == nil {
			return "key pair " + ref + " left"
		}
	}
	return ""
}

type matrixCell struct {
	op, fault, outcome, detail string
	took                       time.Duration
}

// matrixOp is one operation of the matrix. prepare runs before the first round (clusters for the
// rounds the operation takes part in), issue starts the operation's k-th round (counted among the
// rounds it takes part in) and returns what to wait for.
type matrixOp struct {
	name    string
	prepare func(t *testing.T, e *faultEnv, rounds int)
	issue   func(t *testing.T, e *faultEnv, k int) (id, want string, check func() string)
}

// pinnedToApiserverRound is the operation that must run in the apiserver's round: its update retries
// while the apiserver is down, and the round checks that the cluster's CA is served meanwhile.
const pinnedToApiserverRound = "update node_count"

// matrixPlan says which operations run in each round (one round per fault). The full matrix runs
// every operation in every round. A rotating plan runs each operation in exactly one round and every
// round at least one operation, dealt by the seed (`make test` seeds it with the commit), so that every
// fault and every operation is exercised in each run and successive commits cover different cells.
func matrixPlan(ops []string, faults []string, seed int64, full bool) [][]int {
	plan := make([][]int, len(faults))
	if full {
		for r := range plan {
			for i := range ops {
				plan[r] = append(plan[r], i)
			}
		}
		return plan
	}
	if len(faults) == 0 {
		return plan
	}
	rng := rand.New(rand.NewSource(seed))
	var free []int
	for i, op := range ops {
		pinned := false
		if op == pinnedToApiserverRound {
			for r, f := range faults {
				if strings.HasPrefix(f, "apiserver") {
					plan[r] = append(plan[r], i)
					pinned = true
					break
				}
			}
		}
		if !pinned {
			free = append(free, i)
		}
	}
	rng.Shuffle(len(free), func(a, b int) { free[a], free[b] = free[b], free[a] })
	// Fill the rounds that have no operation yet first, then deal the rest round-robin from a seeded offset.
	offset := rng.Intn(len(faults))
	for r := range len(faults) {
		round := (offset + r) % len(faults)
		if len(plan[round]) == 0 && len(free) > 0 {
			plan[round], free = append(plan[round], free[0]), free[1:]
		}
	}
	for j, i := range free {
		round := (offset + j) % len(faults)
		plan[round] = append(plan[round], i)
	}
	for r := range plan {
		sort.Ints(plan[r])
	}
	return plan
}

// workerAddresses are the default worker group's node addresses as Magnum stores them.
func (e *faultEnv) workerAddresses(id string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	groups, err := e.store.ListNodeGroups(ctx, id)
	require.NoError(e.t, err)
	for _, g := range groups {
		if g.Name == "default-worker" {
			out := append([]string(nil), g.NodeAddresses...)
			sort.Strings(out)
			return out
		}
	}
	return nil
}

// deleteMatrixClusters deletes every cluster the matrix made, all at once (each one's own cleanup
// would delete them one after the other, minutes each).
func deleteMatrixClusters(t *testing.T) {
	var wg sync.WaitGroup
	for _, cloud := range []string{cloudDemo, cloudNewest} {
		out, err := openstack(t, cloud, "coe", "cluster", "list", "-f", "value", "-c", "uuid", "-c", "name")
		if err != nil {
			t.Logf("list clusters of %s: %v", cloud, err)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 || !strings.HasPrefix(f[1], "fm-") {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = openstack(t, cloud, "coe", "cluster", "delete", f[0])
				waitGone(t, cloud, f[0], 6*time.Minute)
			}()
		}
	}
	wg.Wait()
}

// createComplete creates n one-worker clusters at once and waits until each is CREATE_COMPLETE.
func createComplete(t *testing.T, template, prefix string, n int) []string {
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range ids {
		ids[i] = createCluster(t, cloudDemo, template, prefix+testutil.RandomHex(3), "--node-count", "1")
		wg.Add(1)
		go func() { defer wg.Done(); waitStatus(t, cloudDemo, ids[i], 10*time.Minute, "CREATE_COMPLETE") }()
	}
	wg.Wait()
	return ids
}

func matrixOps(t *testing.T) []matrixOp {
	var (
		tmpl, oldTmpl       string
		updateID, resizeID  string
		ngCreateID, ngDelID string
		cpID                string
		// In the full matrix a cluster created in round r is upgraded in round r+1 and deleted in round
		// r+2: only the first rounds' upgrade and delete need clusters made beforehand (the preparation is the
		// matrix's longest part, and every live cluster costs the 2-core machine's controllers).
		created, upgradeIDs, deleteIDs []string
		mu                             sync.Mutex
	)
	createWait := func(cloud, id string) { waitStatus(t, cloud, id, 10*time.Minute, "CREATE_COMPLETE") }
	// target is the cluster the k-th round of an operation works on: prepared for the first rounds, else
	// the one round k-age created (the full matrix only, where every operation runs in every round).
	target := func(prepared []string, k, age int) string {
		mu.Lock()
		defer mu.Unlock()
		if k < len(prepared) {
			return prepared[k]
		}
		return created[k-age]
	}
	return []matrixOp{
		{"create", func(t *testing.T, e *faultEnv, rounds int) {
			tmpl = createTemplate(t, cloudDemo)
			oldTmpl = createTemplate(t, cloudDemo, "--image", "ubuntu-2404-kube-v1.35.4")
		}, func(t *testing.T, e *faultEnv, k int) (string, string, func() string) {
			// The old release, so that the next round can upgrade it.
			id := createCluster(t, cloudDemo, oldTmpl, fmt.Sprintf("fm-create-%d-%s", k, testutil.RandomHex(3)), "--node-count", "1")
			mu.Lock()
			created = append(created, id)
			mu.Unlock()
			return id, "CREATE_COMPLETE", func() string { return e.consistent(id) }
		}},
		{"update node_count", func(t *testing.T, e *faultEnv, rounds int) {
			updateID = createCluster(t, cloudDemo, tmpl, "fm-update-"+testutil.RandomHex(3), "--node-count", "1")
			createWait(cloudDemo, updateID)
			e.busyCluster = updateID
		}, func(t *testing.T, e *faultEnv, k int) (string, string, func() string) {
			mustOpenstack(t, cloudDemo, "coe", "cluster", "update", updateID, "replace", fmt.Sprintf("node_count=%d", 2-k%2))
			return updateID, "UPDATE_COMPLETE", func() string { return e.consistent(updateID) }
		}},
		{"resize --nodes-to-remove", func(t *testing.T, e *faultEnv, rounds int) {
			resizeID = createCluster(t, cloudDemo, tmpl, "fm-resize-"+testutil.RandomHex(3), "--node-count", strconv.Itoa(rounds+1))
			createWait(cloudDemo, resizeID)
		}, func(t *testing.T, e *faultEnv, k int) (string, string, func() string) {
			// The node names Magnum shows (in-memory nodes have no IPs): no workload API needed, which
			// may be unreachable in this round.
			nodes := e.workerAddresses(resizeID)
			require.NotEmpty(t, nodes)
			victim := nodes[0]
			mustOpenstack(t, cloudDemo, "coe", "cluster", "resize", resizeID, strconv.Itoa(len(nodes)-1), "--nodes-to-remove", victim)
			return resizeID, "UPDATE_COMPLETE", func() string {
				if msg := e.consistent(resizeID); msg != "" {
					return msg
				}
				for _, n := range e.workerAddresses(resizeID) {
					if n == victim {
						return "the named node " + victim + " is still there"
					}
				}
				return ""
			}
		}},
		{"control-plane resize (Magnum 23)", func(t *testing.T, e *faultEnv, rounds int) {
			// Built by this tree's bridge: not while the upgrade test runs another release there.
			defer newestBridge.hold(t, false)()
			newest := createTemplate(t, cloudNewest)
			cpID = createCluster(t, cloudNewest, newest, "fm-cp-"+testutil.RandomHex(3), "--node-count", "1")
			createWait(cloudNewest, cpID)
		}, func(t *testing.T, e *faultEnv, k int) (string, string, func() string) {
			count := "3"
			if k%2 == 1 {
				count = "1"
			}
			mustOpenstack(t, cloudNewest, "coe", "cluster", "resize", cpID, count, "--nodegroup", "default-master")
			return cpID, "UPDATE_COMPLETE@" + cloudNewest, func() string {
				c, err := showCluster(t, cloudNewest, cpID)
				if err != nil {
					return err.Error()
				}
				if strconv.Itoa(c.MasterCount) != count {
					return fmt.Sprintf("master_count %d, want %s", c.MasterCount, count)
				}
				return ""
			}
		}},
		{"node group create", func(t *testing.T, e *faultEnv, rounds int) {
			ngCreateID = createCluster(t, cloudDemo, tmpl, "fm-ngc-"+testutil.RandomHex(3), "--node-count", "1")
			createWait(cloudDemo, ngCreateID)
		}, func(t *testing.T, e *faultEnv, k int) (string, string, func() string) {
			name := fmt.Sprintf("ng-%d", k)
			mustOpenstack(t, cloudDemo, "coe", "nodegroup", "create", ngCreateID, name, "--node-count", "1")
			return ngCreateID, "UPDATE_COMPLETE", func() string {
				if ng, err := showNodeGroup(t, ngCreateID, name); err != nil || ng.Status != "CREATE_COMPLETE" {
					return fmt.Sprintf("node group %s: %+v %v", name, ng, err)
				}
				return e.consistent(ngCreateID)
			}
		}},
		{"node group delete", func(t *testing.T, e *faultEnv, rounds int) {
			ngDelID = createCluster(t, cloudDemo, tmpl, "fm-ngd-"+testutil.RandomHex(3), "--node-count", "1")
			createWait(cloudDemo, ngDelID)
			for r := range rounds { // all at once: a node group may be added while another is being added
				mustOpenstack(t, cloudDemo, "coe", "nodegroup", "create", ngDelID, fmt.Sprintf("old-%d", r), "--node-count", "1")
			}
			for r := range rounds {
				waitNodeGroup(t, ngDelID, fmt.Sprintf("old-%d", r), "CREATE_COMPLETE")
			}
			waitStatus(t, cloudDemo, ngDelID, 10*time.Minute, "UPDATE_COMPLETE")
		}, func(t *testing.T, e *faultEnv, k int) (string, string, func() string) {
			name := fmt.Sprintf("old-%d", k)
			mustOpenstack(t, cloudDemo, "coe", "nodegroup", "delete", ngDelID, name)
			return ngDelID, "UPDATE_COMPLETE", func() string {
				if _, err := showNodeGroup(t, ngDelID, name); err == nil {
					return "node group " + name + " still exists"
				}
				return e.consistent(ngDelID)
			}
		}},
		{"upgrade", func(t *testing.T, e *faultEnv, rounds int) {
			upgradeIDs = createComplete(t, oldTmpl, "fm-upg-", chainedOrAll(e, rounds, 1))
		}, func(t *testing.T, e *faultEnv, k int) (string, string, func() string) {
			id := target(upgradeIDs, k, 1)
			mustOpenstack(t, cloudDemo, "coe", "cluster", "upgrade", id, tmpl)
			return id, "UPDATE_COMPLETE", func() string {
				c, err := showCluster(t, cloudDemo, id)
				if err != nil || c.COEVersion != "v1.36.3" {
					return fmt.Sprintf("coe_version %v %v", c, err)
				}
				return e.consistent(id)
			}
		}},
		{"delete", func(t *testing.T, e *faultEnv, rounds int) {
			deleteIDs = createComplete(t, tmpl, "fm-del-", chainedOrAll(e, rounds, 2))
		}, func(t *testing.T, e *faultEnv, k int) (string, string, func() string) {
			id := target(deleteIDs, k, 2)
			mustOpenstack(t, cloudDemo, "coe", "cluster", "delete", id)
			return id, "GONE", func() string { return e.gone(id) }
		}},
	}
}

func TestFaultMatrix(t *testing.T) {
	requireStack(t)
	if os.Getenv("MCB_FAULTS") != "1" {
		t.Skip("the fault matrix restarts services every other test uses (MariaDB, RabbitMQ, Keystone, the apiserver): " +
			"`make test` runs it alone after all other packages with MCB_FAULTS=1, `make soak` with many seeds")
	}
	seed, _ := strconv.ParseInt(testutil.Env("MCB_FAULT_SEED", "1"), 10, 64)
	rng := rand.New(rand.NewSource(seed))
	conf, rpcClient := magnumRPC(t)
	store := magnumStore(t, conf)
	_, cfg := testutil.ManagementCluster(t)
	scheme, err := capi.NewScheme()
	require.NoError(t, err)
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	e := &faultEnv{t: t, store: store, kube: kube, rpc: rpcClient}

	injectors := faultInjectors
	if only := os.Getenv("MCB_FAULTS_ONLY"); only != "" {
		injectors = nil
		for _, f := range faultInjectors {
			if strings.Contains(f.name, only) {
				injectors = append(injectors, f)
			}
		}
	}
	ops := matrixOps(t)
	full := testutil.Env("MCB_FAULT_MATRIX", "full") == "full"
	e.full = full
	var opNames, faultNames []string
	for _, op := range ops {
		opNames = append(opNames, op.name)
	}
	for _, f := range injectors {
		faultNames = append(faultNames, f.name)
	}
	plan := matrixPlan(opNames, faultNames, seed, full)
	roundsOf := make([]int, len(ops))
	for _, round := range plan {
		for _, i := range round {
			roundsOf[i]++
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	ops[0].prepare(t, e, roundsOf[0]) // the templates every other operation uses
	for i, op := range ops[1:] {
		if roundsOf[i+1] == 0 {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); op.prepare(t, e, roundsOf[i+1]) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow() // a cluster the matrix needs could not be made
	}
	timed(t, "fault matrix: clusters prepared", start)
	// MCB_FAULTS_START_AFTER names a file: `make test` starts the matrix while the last end-to-end
	// tests run, so that this preparation (creates only, no fault) overlaps them; the first fault
	// waits until the file exists (the end-to-end package has ended).
	if gate := os.Getenv("MCB_FAULTS_START_AFTER"); gate != "" {
		waited := time.Now()
		for {
			if _, err := os.Stat(gate); err == nil {
				break
			}
			require.Less(t, time.Since(waited), time.Hour, "%s never appeared", gate)
			time.Sleep(2 * time.Second)
		}
		timed(t, "fault matrix: waited for the end-to-end tests to end", waited)
	}

	var cells []matrixCell
	ranSoFar := make([]int, len(ops))
	for r, f := range injectors {
		type issued struct {
			op, id, want string
			check        func() string
			at           time.Time
		}
		var (
			mu   sync.Mutex
			runs []issued
		)
		if f.before != nil {
			f.before(t)
		}
		for _, i := range plan[r] {
			op, k := ops[i], ranSoFar[i]
			ranSoFar[i]++
			wg.Add(1)
			go func() {
				defer wg.Done()
				at := time.Now()
				id, want, check := op.issue(t, e, k)
				mu.Lock()
				runs = append(runs, issued{op.name, id, want, check, at})
				mu.Unlock()
			}()
		}
		wg.Wait()
		t.Logf("round %d: %d operations accepted; injecting %q", r, len(runs), f.name)
		var caCall time.Duration
		var caErr error
		probe := make(chan struct{})
		go func() {
			defer close(probe)
			if !strings.HasPrefix(f.name, "apiserver") {
				return
			}
			// While the apiserver is down the update of busyCluster retries; its CA is still served.
			time.Sleep(5 * time.Second)
			caCall, caErr = e.timeCACall(e.busyCluster)
		}()
		f.inject(t, rng)
		<-probe
		if strings.HasPrefix(f.name, "apiserver") {
			require.NoError(t, caErr)
			t.Logf("get_ca_certificate of a cluster whose update retries (apiserver down): %s", caCall.Round(time.Millisecond))
			require.Less(t, caCall, 2*time.Second, "coe cluster config waited behind the cluster's write")
		}
		for _, run := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cell := matrixCell{op: run.op, fault: f.name}
				if cloud, ok := strings.CutPrefix(run.want, "UPDATE_COMPLETE@"); ok {
					c := waitStatus(t, cloud, run.id, 12*time.Minute, "UPDATE_COMPLETE")
					cell.outcome = c.Status
				} else {
					cell.outcome, cell.detail = e.await(run.id, run.want, 12*time.Minute)
				}
				cell.took = time.Since(run.at)
				if cell.outcome == run.want || strings.HasPrefix(run.want, "UPDATE_COMPLETE@") {
					if msg := run.check(); msg != "" {
						cell.outcome, cell.detail = "INCONSISTENT", msg
					}
				}
				mu.Lock()
				cells = append(cells, cell)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}

	deleteMatrixClusters(t)

	sort.Slice(cells, func(i, j int) bool {
		if cells[i].op != cells[j].op {
			return cells[i].op < cells[j].op
		}
		return cells[i].fault < cells[j].fault
	})
	kind := "full"
	if !full {
		kind = fmt.Sprintf("rotating: %d of %d cells; `make test-faults FAULT_SEED=%d` runs them all", len(cells), len(ops)*len(injectors), seed)
	}
	t.Logf("FAULT MATRIX (seed %d, %s, %s):", seed, kind, time.Since(start).Round(time.Second))
	t.Logf("| %-34s | %-22s | %-16s | %6s |", "operation", "fault", "outcome", "time")
	failed := 0
	for _, c := range cells {
		t.Logf("| %-34s | %-22s | %-16s | %5.0fs | %s", c.op, c.fault, c.outcome, c.took.Seconds(), c.detail)
		if c.outcome != "CREATE_COMPLETE" && c.outcome != "UPDATE_COMPLETE" && c.outcome != "GONE" {
			failed++
		}
	}
	require.Zero(t, failed, "operations that did not end complete and consistent")
}

// chainedOrAll is how many clusters an operation that consumes one per round prepares: in the full
// matrix the first `age` rounds' (later rounds take the clusters earlier rounds created), else one for
// each of its rounds.
func chainedOrAll(e *faultEnv, rounds, age int) int {
	if e.full {
		return min(rounds, age)
	}
	return rounds
}
