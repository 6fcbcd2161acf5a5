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
// `rendering apply --concurrency 1` rolls them one cluster at a time; `coe cluster upgrade` rolls
// every machine; delete leaves nothing.
//
// It replaces the stack's bridge (restored at the end), so it is opt-in: `make upgrade-test`
// (MCB_UPGRADE=1); make test runs it last, alone.
func TestBridgeUpgradeFromThePreviousRelease(t *testing.T) {
	requireStack(t)
	if os.Getenv("MCB_UPGRADE") != "1" {
		t.Skip("the upgrade test replaces the stack's bridge with the previous release and back: `make upgrade-test` (MCB_UPGRADE=1); make test runs it last")
	}
	root := repoRoot(t)
	prev := strings.TrimSpace(commandOutput(t, root, "deploy/local/previous-release.sh"))
	variant := filepath.Join(t.TempDir(), "magnum-capi-bridge-variant")
	commandOutput(t, root, "go", "build", "-tags", "renderingvariant", "-ldflags", "-X main.version=head-renderingvariant",
		"-o", variant, "./cmd/magnum-capi-bridge")
	t.Logf("previous release: %s", strings.TrimSpace(commandOutput(t, root, prev, "--version")))

	bridgeUp := func(bin, extra string) {
		t.Helper()
		start := time.Now()
		cmd := exec.Command(filepath.Join(root, "deploy/local/bridge-up.sh"), "zed")
		cmd.Env = append(os.Environ(), "BRIDGE_REPLICAS=1", "BRIDGE_BINS="+bin, "BRIDGE_EXTRA_CONFIG="+extra)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "bridge-up.sh with %s: %s", bin, out)
		timed(t, "bridge switched to "+filepath.Base(bin), start)
	}
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(root, "deploy/local/bridge-up.sh"), "zed")
		cmd.Env = append(os.Environ(), "BRIDGE_REPLICAS=1", "BRIDGE_BINS=", "BRIDGE_EXTRA_CONFIG=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("restoring this tree's bridge: %v: %s", err, out)
		}
	})
	// The previous release reads the default flavor under its former name.
	bridgeUp(prev, "infrastructure = inmemory")

	oldTmpl := "upg-old-" + testutil.RandomHex(3)
	mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "create", oldTmpl, "--coe", "kubernetes",
		"--image", "ubuntu-2404-kube-v1.35.4", "--external-network", "public", "--flavor", "m1.small",
		"--master-flavor", "m1.medium", "--keypair", "default")
	t.Cleanup(func() { _, _ = openstack(t, cloudDemo, "coe", "cluster", "template", "delete", oldTmpl) })
	newTmpl := createTemplate(t, cloudDemo) // v1.36.3
	osTmpl := createTemplate(t, cloudDemo, "--labels", "capi_infrastructure=openstack")

	start := time.Now()
	a := createCluster(t, cloudDemo, oldTmpl, "upg-a-"+testutil.RandomHex(3), "--node-count", "1")
	b := createCluster(t, cloudDemo, osTmpl, "upg-b-"+testutil.RandomHex(3), "--node-count", "1", "--timeout", "15")
	waitStatus(t, cloudDemo, a, 6*time.Minute, "CREATE_COMPLETE")
	mustOpenstack(t, cloudDemo, "coe", "nodegroup", "create", a, "extra", "--node-count", "1")
	waitNodeGroup(t, a, "extra", "CREATE_COMPLETE")
	waitStatus(t, cloudDemo, b, 12*time.Minute, "CREATE_COMPLETE")
	timed(t, "upgrade: the previous release built both clusters", start)
	ca, cb := waitStatus(t, cloudDemo, a, time.Minute, "UPDATE_COMPLETE"), waitStatus(t, cloudDemo, b, time.Minute, "CREATE_COMPLETE")

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
	plan := renderingPlan(t, variant)
	for _, id := range []string{a, b} {
		p := planOf(t, plan, id)
		require.True(t, p.Moves(), "this bridge renders %s differently: %+v", id, p)
		require.Empty(t, p.RenderedBy, "the previous release records no version")
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		kept("after the takeover")
		for id, want := range map[string]string{a: ca.Status, b: cb.Status} {
			c, err := showCluster(t, cloudDemo, id)
			require.NoError(t, err)
			require.Equal(t, want, c.Status, "cluster %s", id)
		}
		time.Sleep(30 * time.Second)
	}
	require.Len(t, workloadNodes(t, a), 3, "coe cluster config still works for the in-memory cluster")
	require.Len(t, workloadNodes(t, b), 2, "and for the OpenStack one")

	// Day-2 operations under the new bridge: none replaces an original machine.
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "cluster", "resize", a, "2")
	waitStatus(t, cloudDemo, a, 6*time.Minute, "UPDATE_COMPLETE")
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
	mustOpenstack(t, cloudDemo, "coe", "cluster", "resize", a, "1", "--nodes-to-remove", added.Name)
	waitStatus(t, cloudDemo, a, 6*time.Minute, "UPDATE_COMPLETE")
	timed(t, "upgrade: resize 2 → 1 --nodes-to-remove", start)
	kept("resize 2 → 1 with nodes_to_remove")
	for _, m := range clusterMachines(t, a) {
		require.NotEqual(t, added.UID, m.UID, "the named machine went")
	}
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "nodegroup", "create", a, "later", "--node-count", "1")
	waitNodeGroup(t, a, "later", "CREATE_COMPLETE")
	mustOpenstack(t, cloudDemo, "coe", "nodegroup", "delete", a, "later")
	waitNodeGroupGone(t, a, "later")
	timed(t, "upgrade: node group create + delete", start)
	kept("a node group created and deleted")
	rotateCredentials(t, a, ca)
	waitStatus(t, cloudDemo, a, 3*time.Minute, "UPDATE_COMPLETE")
	kept("credential rotation")
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "cluster", "resize", b, "2")
	waitStatus(t, cloudDemo, b, 10*time.Minute, "UPDATE_COMPLETE")
	timed(t, "upgrade: OpenStack resize 1 → 2", start)
	kept("the OpenStack cluster's resize 1 → 2")

	// The operator's move: the plan names exactly the machines that roll; apply rolls them one
	// cluster at a time.
	plan = renderingPlan(t, variant)
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
	out := commandOutput(t, root, variant, "--config-file", "/etc/magnum/magnum.conf", "--config-file", "/etc/magnum-capi-bridge/bridge.conf",
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
		require.False(t, planOf(t, renderingPlan(t, variant), id).Moves(), "%s moved", id)
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

	// An upgrade rolls every machine, the control plane first.
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "cluster", "upgrade", a, newTmpl)
	c := waitStatus(t, cloudDemo, a, 10*time.Minute, "UPDATE_COMPLETE")
	timed(t, "upgrade: coe cluster upgrade v1.35.4 → v1.36.3", start)
	require.Equal(t, "v1.36.3", c.COEVersion)
	for _, m := range clusterMachines(t, a) {
		_, orig := originals[string(m.UID)]
		require.False(t, orig, "the upgrade replaced %s", m.Name)
		require.Equal(t, "v1.36.3", m.Spec.Version)
	}

	for _, id := range []string{a, b} {
		mustOpenstack(t, cloudDemo, "coe", "cluster", "delete", id)
	}
	for _, id := range []string{a, b} {
		waitGone(t, cloudDemo, id, 8*time.Minute)
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

func renderingPlan(t *testing.T, bin string) []conductor.RenderingPlan {
	t.Helper()
	out := commandOutput(t, repoRoot(t), bin, "--config-file", "/etc/magnum/magnum.conf", "--config-file", "/etc/magnum-capi-bridge/bridge.conf",
		"rendering", "plan", "--json")
	var plan []conductor.RenderingPlan
	require.NoError(t, json.Unmarshal([]byte(out), &plan), out)
	return plan
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

func waitNodeGroupGone(t *testing.T, cluster, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := showNodeGroup(t, cluster, name); err != nil && strings.Contains(err.Error(), "could not be found") {
			return
		}
		time.Sleep(5 * time.Second)
	}
	t.Fatalf("node group %s of %s still exists after 5m", name, cluster)
}
