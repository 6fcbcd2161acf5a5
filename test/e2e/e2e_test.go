// Package e2e drives the whole local stack (`make up`) the way a tenant does: the real `openstack`
// CLI against the real magnum-api, which casts to the bridge over RabbitMQ; the bridge builds the
// cluster with Cluster API in the management cluster and reports back into Magnum's database.
//
// They are the e2e tier (testutil.E2E): built without the `e2e` tag they are skipped, saying so;
// with it they FAIL when the stack is not up (a silently skipped end-to-end suite looks like a
// passing one).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

const (
	cloudDemo  = "devstack"
	cloudAlt   = "devstack-alt"
	cloudAdmin = "devstack-admin"
	image      = "ubuntu-2404-kube-v1.36.3"
	// cloudNewest and cloudNewestAdmin are demo and admin in front of magnum-api 23.0.0 (region
	// RegionTwo, deploy/local/openstack/newest-up.sh), driven by the forky chroot's CLI (cliFor).
	cloudNewest      = "devstack-newest"
	cloudNewestAdmin = "devstack-newest-admin"
	// cloudNewestUpgrade is upgrade_demo, the upgrade test's tenant, in front of magnum-api 23.
	cloudNewestUpgrade = "devstack-newest-upgrade"
)

var (
	mgmtKubeconfig = testutil.Env("MCB_KUBECONFIG", "/var/lib/magnum-capi-bridge/mgmt/admin.kubeconfig")
	kubectlBin     = testutil.Env("MCB_KUBECTL", filepath.Join(os.Getenv("HOME"), ".cache/magnum-capi-bridge/bin/kubectl"))
	newestRoot     = testutil.Env("MCB_NEWEST_ROOT", "/srv/magnum-forky")
)

func requireStackB(b *testing.B) {
	b.Helper()
	testutil.Require(b, testutil.E2E)
	if _, err := os.Stat(mgmtKubeconfig); err != nil {
		b.Fatalf("the local stack is not up: %v; run `make up`", err)
	}
}

func requireStack(t *testing.T) {
	t.Helper()
	testutil.Require(t, testutil.E2E)
	if _, err := os.Stat(mgmtKubeconfig); err != nil {
		t.Fatalf("the local stack is not up (no management cluster kubeconfig: %v); run `make up`", err)
	}
	if err := stackAnswers(); err != nil {
		t.Fatalf("the local stack is not up: %v; run `make up`", err)
	}
}

// stackAnswers is whether the CLI lists clusters through magnum-api 15, asked once per process: the
// tests check it before t.Parallel, one after the other.
var stackAnswers = sync.OnceValue(func() error {
	_, err := runCLI(cloudDemo, "coe", "cluster", "list")
	return err
})

// openstack runs the real CLI; with -f json output the result is decoded by the caller.
func openstack(t *testing.T, cloud string, args ...string) (string, error) {
	t.Helper()
	return runCLI(cloud, args...)
}

// A cli is the `openstack` command a tenant runs against one cloud of clouds.yaml: the host's
// (magnumclient 4, for magnum-api 15) or, when root is set, the one inside that chroot. magnum-api
// 23's microversion 1.14 (node labels and taints) and its credential API need magnumclient 5, which
// only the forky chroot of newest-up.sh has. Every helper that takes a cloud runs it through cliFor.
type cli struct{ cloud, root string }

func cliFor(cloud string) cli {
	if cloud == cloudNewest || cloud == cloudNewestAdmin || cloud == cloudNewestUpgrade {
		return cli{cloud: cloud, root: newestRoot}
	}
	return cli{cloud: cloud}
}

func (c cli) command(ctx context.Context, args ...string) *exec.Cmd {
	argv := append([]string{"openstack", "--os-cloud", c.cloud}, args...)
	if c.root != "" {
		argv = append([]string{"chroot", c.root}, argv...)
	}
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// tempDir is a fresh directory the CLI can write into (e.g. `coe cluster config --dir`): its path
// on the host, and the path to hand to the CLI.
func (c cli) tempDir(t *testing.T) (host, forCLI string) {
	t.Helper()
	if c.root == "" {
		dir := t.TempDir()
		return dir, dir
	}
	host, err := os.MkdirTemp(filepath.Join(c.root, "tmp"), "e2e-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(host) })
	return host, strings.TrimPrefix(host, c.root)
}

func runCLI(cloud string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := cliFor(cloud).command(ctx, args...)
	cmd.Env = testutil.OpenStackCLIEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	countCLI(args, time.Since(start))
	if err != nil {
		return out.String(), fmt.Errorf("openstack %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func mustOpenstack(t *testing.T, cloud string, args ...string) string {
	t.Helper()
	out, err := openstack(t, cloud, args...)
	require.NoError(t, err)
	return out
}

// tokenOf is a token of the cloud's user, issued by the cloud's CLI (the chroot's for the newest
// magnum-api).
func tokenOf(tb testing.TB, cloud string) testutil.Token {
	tb.Helper()
	out, err := runCLI(cloud, "token", "issue", "-f", "json")
	require.NoError(tb, err)
	var tok testutil.Token
	require.NoError(tb, json.Unmarshal([]byte(out), &tok))
	require.NotEmpty(tb, tok.ID)
	require.NotEmpty(tb, tok.ProjectID)
	return tok
}

func kubectl(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--request-timeout=20s"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

type clusterShow struct {
	UUID         string `json:"uuid"`
	Name         string `json:"name"`
	Status       string `json:"status"`
	StatusReason string `json:"status_reason"`
	HealthStatus string `json:"health_status"`
	APIAddress   string `json:"api_address"`
	COEVersion   string `json:"coe_version"`
	StackID      string `json:"stack_id"`
	// ClusterID replaces stack_id from microversion 1.13 on (magnum-api 23); same column, the CAPI name.
	ClusterID          string         `json:"cluster_id"`
	MasterAddresses    []string       `json:"master_addresses"`
	NodeAddresses      []string       `json:"node_addresses"`
	NodeCount          int            `json:"node_count"`
	MasterCount        int            `json:"master_count"`
	ProjectID          string         `json:"project_id"`
	Faults             any            `json:"faults"` // "" unless the cluster failed, then a map
	HealthStatusReason map[string]any `json:"health_status_reason"`
}

// showCluster is the cluster as magnum-api shows it to the cloud's user (REST, poll_test.go).
func showCluster(t *testing.T, cloud, id string) (*clusterShow, error) {
	t.Helper()
	var c clusterShow
	if err := magnumShow(cloud, "/clusters/"+id, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// cliShowCluster is `openstack coe cluster show`: for the checks of what the CLI itself shows.
func cliShowCluster(t *testing.T, cloud, id string) (*clusterShow, error) {
	out, err := openstack(t, cloud, "coe", "cluster", "show", id, "-f", "json")
	if err != nil {
		return nil, err
	}
	var c clusterShow
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		return nil, fmt.Errorf("decode cluster show: %v: %s", err, out)
	}
	return &c, nil
}

// waitStatus polls the API (as a tenant would) until the cluster reaches one of want.
func waitStatus(t *testing.T, cloud, id string, timeout time.Duration, want ...string) *clusterShow {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *clusterShow
	for time.Now().Before(deadline) {
		awaitPolled(cloud, "/clusters/"+id, deadline, 3*time.Second, want...)
		c, err := showCluster(t, cloud, id)
		require.NoError(t, err)
		last = c
		for _, w := range want {
			if c.Status == w {
				return c
			}
		}
		if strings.HasSuffix(c.Status, "_FAILED") {
			t.Fatalf("cluster %s: %s: %s (faults %v)", id, c.Status, c.StatusReason, c.Faults)
		}
		time.Sleep(3 * time.Second)
	}
	t.Fatalf("cluster %s did not reach %v within %s; last: %+v", id, want, timeout, last)
	return nil
}

// waitNodeCount waits for the cluster to be UPDATE_COMPLETE with node_count workers. A resize is a
// cast: right after the CLI returns, the row may still show the last operation's UPDATE_COMPLETE.
func waitNodeCount(t *testing.T, cloud, id string, timeout time.Duration, workers int) *clusterShow {
	t.Helper()
	deadline := time.Now().Add(timeout)
	c := waitStatus(t, cloud, id, timeout, "UPDATE_COMPLETE")
	for c.NodeCount != workers && time.Now().Before(deadline) {
		time.Sleep(3 * time.Second)
		c = waitStatus(t, cloud, id, time.Until(deadline), "UPDATE_COMPLETE")
	}
	require.Equal(t, workers, c.NodeCount, "cluster %s: node_count once UPDATE_COMPLETE", id)
	return c
}

func waitGone(t *testing.T, cloud, id string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		awaitPolled(cloud, "/clusters/"+id, deadline, 3*time.Second, "GONE")
		_, err := showCluster(t, cloud, id)
		if err != nil && strings.Contains(err.Error(), "could not be found") {
			return
		}
		time.Sleep(3 * time.Second)
	}
	t.Fatalf("cluster %s still exists after %s", id, timeout)
}

// createTemplate creates a template of the default image; extra are more `template create` options.
func createTemplate(t *testing.T, cloud string, extra ...string) string {
	t.Helper()
	return createTemplateWithImage(t, cloud, image, extra...)
}

func createTemplateWithImage(t *testing.T, cloud, image string, extra ...string) string {
	t.Helper()
	name := "e2e-" + testutil.RandomHex(3)
	mustOpenstack(t, cloud, append([]string{"coe", "cluster", "template", "create", name, "--coe", "kubernetes", "--image", image,
		"--external-network", "public", "--flavor", "m1.small", "--master-flavor", "m1.medium", "--keypair", "default"}, extra...)...)
	t.Cleanup(func() {
		// A template still in use cannot be deleted; clusters are deleted by their tests first.
		_, _ = openstack(t, cloud, "coe", "cluster", "template", "delete", name)
	})
	return name
}

func createCluster(t *testing.T, cloud, template, name string, extra ...string) string {
	t.Helper()
	out := mustOpenstack(t, cloud, append([]string{"coe", "cluster", "create", name, "--cluster-template", template,
		"--master-count", "1", "--node-count", "2"}, extra...)...)
	// "Request to create cluster <uuid> accepted"
	fields := strings.Fields(out)
	for _, f := range fields {
		if len(f) == 36 && strings.Count(f, "-") == 4 {
			// Whatever happens to the test, the cluster does not outlive it (registered before the
			// template's cleanup, so it runs first).
			t.Cleanup(func() {
				if _, err := showCluster(t, cloud, f); err == nil {
					_, _ = openstack(t, cloud, "coe", "cluster", "delete", f)
					waitGone(t, cloud, f, 4*time.Minute)
				}
			})
			return f
		}
	}
	t.Fatalf("no cluster uuid in %q", out)
	return ""
}

// capiObjects lists what the management cluster still holds of a Magnum cluster.
func capiObjects(t *testing.T, uuid string) string {
	t.Helper()
	out, err := kubectl(t, mgmtKubeconfig, "get", "clusters.cluster.x-k8s.io,secrets", "-A", "-l",
		"magnum.openstack.org/cluster-uuid="+uuid, "-o", "name")
	require.NoError(t, err, out)
	return strings.TrimSpace(out)
}

// magnumStore opens the Magnum database of the instance whose magnum.conf is conf, closed when the
// test ends.
func magnumStore(tb testing.TB, conf *config.File) *db.Store {
	tb.Helper()
	store, err := db.Open(context.Background(), conf.String("database", "connection", ""))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = store.Close() })
	return store
}
