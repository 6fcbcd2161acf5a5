package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/conductor"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestBridgeUpgradeFromThePreviousRelease: the previous release (deploy/local/previous-release.sh)
// runs as the stack's bridge and builds two clusters, one on in-memory machines (with an extra node
// group) and one on CAPO against the OpenStack simulator; then this tree's bridge, built to render
// every template differently (-tags renderingvariant), takes over. No Machine is replaced — UIDs
// before = after, over 3 minutes and after each of: resize 1→2, resize 2→1 with nodes_to_remove, a
// node group created and deleted, a credential rotation — statuses stay, `coe cluster config` works.
// The operator's `rendering plan` lists both clusters and exactly the machines that will roll;
// `rendering apply --concurrency 1` rolls them one cluster at a time; then, with the stack's own
// bridge back, `coe cluster upgrade` rolls every machine and delete leaves nothing.
//
// It runs on the Magnum 23 instance (MCB_UPGRADE_INSTANCE=zed for the other), holding its bridge
// alone (newestBridge) and replacing it (restored at the end): opt-in, MCB_UPGRADE=1, which `make
// upgrade-test` sets and `make test` runs next to the e2e package.
func TestBridgeUpgradeFromThePreviousRelease(t *testing.T) {
	requireStack(t)
	if os.Getenv("MCB_UPGRADE") != "1" {
		t.Skip("the upgrade test replaces a bridge of the stack with the previous release and back: `make upgrade-test` (MCB_UPGRADE=1); make test runs it next to the e2e package")
	}
	in := upgradeInstanceOf(t, testutil.Env("MCB_UPGRADE_INSTANCE", "newest"))
	cloud := in.cloud
	root := repoRoot(t)
	prev := strings.TrimSpace(commandOutput(t, root, "deploy/local/previous-release.sh"))
	variant := filepath.Join(t.TempDir(), "magnum-capi-bridge-variant")
	commandOutput(t, root, "go", "build", "-tags", "renderingvariant", "-ldflags", "-X main.version=head-renderingvariant",
		"-o", variant, "./cmd/magnum-capi-bridge")
	prevVersion := strings.TrimSpace(commandOutput(t, root, prev, "--version")) // magnum-capi-bridge VERSION (commit C)
	t.Logf("previous release: %s", prevVersion)
	// What the previous release records on the clusters it renders: its version from v0.1.0 on,
	// nothing before.
	renderedBy := ""
	if f := strings.Fields(prevVersion); len(f) > 1 && strings.HasPrefix(f[1], "v") {
		renderedBy = f[1]
	}

	// This tree's bridge offers both flavors on either instance here; the previous release has one
	// flavor per bridge and ignores the option.
	bridgeUp := func(bin, extra string) {
		t.Helper()
		start := time.Now()
		cmd := exec.Command(filepath.Join(root, "deploy/local/bridge-up.sh"), in.name)
		cmd.Env = append(os.Environ(), "BRIDGE_REPLICAS=1", "BRIDGE_BINS="+bin, "BRIDGE_EXTRA_CONFIG="+extra,
			"BRIDGE_ALLOWED_INFRASTRUCTURES=inmemory,openstack")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "bridge-up.sh with %s: %s", bin, out)
		timed(t, "bridge switched to "+filepath.Base(bin), start)
	}
	// The bridge is the test's alone until the operator's move has ended: other releases run it, and
	// this tree's offers the OpenStack flavor there, which the instance's other tests expect refused.
	release := func() {}
	if in.name == "newest" {
		// Registered before the restore below: cleanups run last first, so it is released after.
		release = newestBridge.hold(t, true)
		t.Cleanup(release)
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		cmd := exec.Command(filepath.Join(root, "deploy/local/bridge-up.sh"), in.name)
		cmd.Env = append(os.Environ(), "BRIDGE_REPLICAS=1", "BRIDGE_BINS=", "BRIDGE_EXTRA_CONFIG=", "BRIDGE_ALLOWED_INFRASTRUCTURES=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("restoring this tree's bridge: %v: %s", err, out)
		}
	}
	t.Cleanup(restore)
	oldTmpl := "upg-old-" + testutil.RandomHex(3)
	mustOpenstack(t, cloud, "coe", "cluster", "template", "create", oldTmpl, "--coe", "kubernetes",
		"--image", "ubuntu-2404-kube-v1.35.4", "--external-network", "public", "--flavor", "m1.small",
		"--master-flavor", "m1.medium", "--keypair", "default")
	t.Cleanup(func() { _, _ = openstack(t, cloud, "coe", "cluster", "template", "delete", oldTmpl) })
	newTmpl := createTemplate(t, cloud) // v1.36.3
	// The label tells this tree's bridge the flavor; the previous release has one flavor per bridge
	// (its `infrastructure` option) and only lists the label as one it does not implement.
	osTmpl := createTemplate(t, cloud, "--labels", "capi_infrastructure=openstack")

	// The previous release builds each cluster on its flavor: an OpenStack bridge first, then an
	// in-memory one (the option's former name; the release knows no other).
	start := time.Now()
	bridgeUp(prev, "infrastructure = openstack")
	b := createCluster(t, cloud, osTmpl, "upg-b-"+testutil.RandomHex(3), "--node-count", "1", "--timeout", "15")
	cb := waitStatus(t, cloud, b, 12*time.Minute, "CREATE_COMPLETE")
	timed(t, "upgrade: the previous release built the OpenStack cluster", start)
	start = time.Now()
	bridgeUp(prev, "infrastructure = inmemory")
	a := createCluster(t, cloud, oldTmpl, "upg-a-"+testutil.RandomHex(3), "--node-count", "1")
	waitStatus(t, cloud, a, 6*time.Minute, "CREATE_COMPLETE")
	mustOpenstack(t, cloud, "coe", "nodegroup", "create", a, "extra", "--node-count", "1")
	waitNodeGroupIn(t, cloud, a, "extra", "CREATE_COMPLETE")
	ca := waitStatus(t, cloud, a, time.Minute, "UPDATE_COMPLETE")
	timed(t, "upgrade: the previous release built the in-memory cluster and its node group", start)

	originals := map[string]string{} // UID → Machine name, both clusters
	for _, id := range []string{a, b} {
		for _, m := range clusterMachines(t, id) {
			originals[string(m.UID)] = m.Name
		}
	}
	require.Len(t, originals, 5, "a: control plane, worker, extra; b: control plane, worker")
	t.Logf("UPGRADE machines before the takeover: %d (%s)", len(originals), strings.Join(mapValues(originals), " "))
	kept := func(what string) {
		t.Helper()
		now := map[string]bool{}
		for _, id := range []string{a, b} {
			for _, m := range clusterMachines(t, id) {
				now[string(m.UID)] = true
			}
		}
		for uid, name := range originals {
			require.True(t, now[uid], "%s: Machine %s (%s) was replaced", what, name, uid)
		}
		t.Logf("UPGRADE %s: all %d original machines kept (%d now)", what, len(originals), len(now))
	}

	// The takeover, by a bridge that renders both templates differently.
	bridgeUp(variant, "")
	plan := in.renderingPlan(t, variant)
	for _, id := range []string{a, b} {
		p := planOf(t, plan, id)
		require.True(t, p.Moves(), "this bridge renders %s differently: %+v", id, p)
		require.Equal(t, renderedBy, p.RenderedBy, "the previous release's version, as it records it")
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		kept("after the takeover")
		for id, want := range map[string]string{a: ca.Status, b: cb.Status} {
			c, err := showCluster(t, cloud, id)
			require.NoError(t, err)
			require.Equal(t, want, c.Status, "cluster %s", id)
		}
		time.Sleep(30 * time.Second)
	}
	require.Len(t, workloadNodesIn(t, cloud, a), 3, "coe cluster config still works for the in-memory cluster")
	require.Len(t, workloadNodesIn(t, cloud, b), 2, "and for the OpenStack one")

	// Day-2 operations under the new bridge: none replaces an original machine. The OpenStack
	// cluster's resize runs meanwhile.
	startB := time.Now()
	mustOpenstack(t, cloud, "coe", "cluster", "resize", b, "2")
	start = time.Now()
	mustOpenstack(t, cloud, "coe", "cluster", "resize", a, "2")
	waitStatus(t, cloud, a, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "upgrade: resize 1 → 2", start)
	kept("resize 1 → 2")
	var added clusterv1.Machine
	for _, m := range clusterMachines(t, a) {
		if _, orig := originals[string(m.UID)]; !orig {
			added = m
		}
	}
	require.NotEmpty(t, added.Name, "the resize added a machine")
	start = time.Now()
	mustOpenstack(t, cloud, "coe", "cluster", "resize", a, "1", "--nodes-to-remove", added.Name)
	waitStatus(t, cloud, a, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "upgrade: resize 2 → 1 --nodes-to-remove", start)
	kept("resize 2 → 1 with nodes_to_remove")
	for _, m := range clusterMachines(t, a) {
		require.NotEqual(t, added.UID, m.UID, "the named machine went")
	}
	start = time.Now()
	mustOpenstack(t, cloud, "coe", "nodegroup", "create", a, "later", "--node-count", "1")
	waitNodeGroupIn(t, cloud, a, "later", "CREATE_COMPLETE")
	mustOpenstack(t, cloud, "coe", "nodegroup", "delete", a, "later")
	waitNodeGroupGone(t, cloud, a, "later")
	timed(t, "upgrade: node group create + delete", start)
	kept("a node group created and deleted")
	in.rotateCredentials(t, a, ca)
	waitStatus(t, cloud, a, 3*time.Minute, "UPDATE_COMPLETE")
	kept("credential rotation")
	waitStatus(t, cloud, b, 10*time.Minute, "UPDATE_COMPLETE")
	timed(t, "upgrade: OpenStack resize 1 → 2 (next to the in-memory cluster's operations)", startB)
	kept("the OpenStack cluster's resize 1 → 2")

	// The operator's move: the plan names exactly the machines that roll; apply rolls them one
	// cluster at a time.
	plan = in.renderingPlan(t, variant)
	rolls := map[string]bool{}
	for _, id := range []string{a, b} {
		p := planOf(t, plan, id)
		require.True(t, p.Moves(), "day-2 operations kept the old rendering of %s", id)
		require.False(t, p.ControlPlane, "the variant changes the workers' bootstrap only: %+v", p)
		for _, m := range p.Machines {
			rolls[m] = true
		}
	}
	var workersBefore []string
	for _, id := range []string{a, b} {
		for _, m := range clusterMachines(t, id) {
			_, cp := m.Labels[clusterv1.MachineControlPlaneLabel]
			require.Equal(t, !cp, rolls[m.Name], "the plan lists exactly the workers: %s", m.Name)
			if !cp {
				workersBefore = append(workersBefore, string(m.UID))
			}
		}
	}
	start = time.Now()
	out := commandOutput(t, root, variant, "--config-file", in.magnumConf, "--config-file", in.bridgeConf,
		"rendering", "apply", "--concurrency", "1", "--cluster", a, "--cluster", b)
	timed(t, "upgrade: rendering apply --concurrency 1 (2 clusters)", start)
	t.Logf("UPGRADE rendering apply:\n%s", out)
	firstDone, secondStarted := -1, -1
	for i, line := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(line, "UPDATE_COMPLETE after") && firstDone < 0:
			firstDone = i
		case strings.Contains(line, ": UPDATE_IN_PROGRESS,") && firstDone >= 0 && secondStarted < 0:
			secondStarted = i
		}
	}
	require.True(t, firstDone >= 0 && secondStarted > firstDone, "one cluster at a time:\n%s", out)
	for _, id := range []string{a, b} {
		require.False(t, planOf(t, in.renderingPlan(t, variant), id).Moves(), "%s moved", id)
	}
	now := map[string]bool{}
	for _, id := range []string{a, b} {
		for _, m := range clusterMachines(t, id) {
			now[string(m.UID)] = true
		}
	}
	for uid, name := range originals {
		require.Equal(t, !rolls[name], now[uid], "Machine %s: replaced exactly when the plan said so", name)
	}
	for _, uid := range workersBefore {
		require.False(t, now[uid], "every worker rolled")
	}

	// An upgrade rolls every machine whatever the rendering, and a delete is the same in either: from
	// here on the stack's own bridge, shared with the instance's other tests (it offers the in-memory
	// flavor only there, and still deletes the OpenStack cluster).
	restore()
	release()
	if in.name == "newest" {
		shareNewestBridge(t)
	}
	start = time.Now()
	mustOpenstack(t, cloud, "coe", "cluster", "upgrade", a, newTmpl)
	c := waitStatus(t, cloud, a, 10*time.Minute, "UPDATE_COMPLETE")
	timed(t, "upgrade: coe cluster upgrade v1.35.4 → v1.36.3", start)
	require.Equal(t, "v1.36.3", c.COEVersion)
	for _, m := range clusterMachines(t, a) {
		_, orig := originals[string(m.UID)]
		require.False(t, orig, "the upgrade replaced %s", m.Name)
		require.Equal(t, "v1.36.3", m.Spec.Version)
	}

	for _, id := range []string{a, b} {
		mustOpenstack(t, cloud, "coe", "cluster", "delete", id)
	}
	for _, id := range []string{a, b} {
		waitGone(t, cloud, id, 8*time.Minute)
		require.Empty(t, strings.TrimSpace(capiObjects(t, id)), "nothing of %s is left", id)
		require.Empty(t, clusterMachines(t, id))
	}
}

func commandOutput(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %s: %s%s", name, strings.Join(args, " "), out, stderr.String())
	return string(out)
}

// An upgradeInstance is the half of the stack the upgrade test replaces the bridge of.
type upgradeInstance struct {
	name, cloud, magnumConf, bridgeConf string
}

func upgradeInstanceOf(t *testing.T, name string) upgradeInstance {
	etc := testutil.Env("MCB_ETC_DIR", "/etc/magnum-capi-bridge")
	switch name {
	case "zed":
		return upgradeInstance{name: name, cloud: cloudDemo, magnumConf: "/etc/magnum/magnum.conf", bridgeConf: filepath.Join(etc, "bridge.conf")}
	case "newest":
		requireNewest(t)
		return upgradeInstance{name: name, cloud: cloudNewestUpgrade, magnumConf: filepath.Join(newestRoot, "etc/magnum/magnum.conf"),
			bridgeConf: filepath.Join(etc, "bridge-newest.conf")}
	}
	t.Fatalf("MCB_UPGRADE_INSTANCE: zed or newest, not %q", name)
	return upgradeInstance{}
}

// renderingPlan is the operator's `rendering plan --json` of the instance's bridge, run with bin.
func (in upgradeInstance) renderingPlan(t *testing.T, bin string) []conductor.RenderingPlan {
	t.Helper()
	out := commandOutput(t, repoRoot(t), bin, "--config-file", in.magnumConf, "--config-file", in.bridgeConf,
		"rendering", "plan", "--json")
	var plan []conductor.RenderingPlan
	require.NoError(t, json.Unmarshal([]byte(out), &plan), out)
	return plan
}

// rotateCredentials rotates the cluster's credential as its client can: magnumclient 5's `coe
// credential rotate` on Magnum 23, the RPC call on 15 (whose API has no such request).
func (in upgradeInstance) rotateCredentials(t *testing.T, id string, c *clusterShow) {
	t.Helper()
	if in.name == "zed" {
		rotateCredentials(t, id, c)
		return
	}
	require.Contains(t, mustOpenstack(t, in.cloud, "coe", "credential", "rotate", id), "accepted")
}

func planOf(t *testing.T, plan []conductor.RenderingPlan, id string) conductor.RenderingPlan {
	t.Helper()
	for _, p := range plan {
		if p.UUID == id {
			require.Empty(t, p.Error, "plan of %s", id)
			return p
		}
	}
	t.Fatalf("the plan has no cluster %s", id)
	return conductor.RenderingPlan{}
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

func waitNodeGroupGone(t *testing.T, cloud, cluster, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := showNodeGroupIn(t, cloud, cluster, name); err != nil && strings.Contains(err.Error(), "could not be found") {
			return
		}
		time.Sleep(5 * time.Second)
	}
	t.Fatalf("node group %s of %s still exists after 5m", name, cluster)
}
