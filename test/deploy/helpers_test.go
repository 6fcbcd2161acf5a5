// Package deploy tests what an operator installs: the container image (`make image`), the Helm chart
// (rendered with the Helm SDK, applied with a server-side dry run, and its configuration running a
// bridge as the chart's ServiceAccount), and `--check-config` against the local stack.
//
// Tests that need the local stack (`make up`) are the e2e tier (testutil.E2E): skipped without the
// `e2e` build tag; with it they fail when the stack is not up.
package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/rpc"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

var (
	magnumConf = testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf")
	// bridgeConf is the [bridge] file deploy/local/bridge-up.sh writes for the zed bridge.
	bridgeConf = filepath.Join(testutil.Env("MCB_ETC", "/etc/magnum-capi-bridge"), "bridge.conf")
	kubectlBin = testutil.Env("MCB_KUBECTL", filepath.Join(os.Getenv("HOME"), ".cache/magnum-capi-bridge/bin/kubectl"))
)

// requireStack returns the management cluster's admin kubeconfig; it fails when `make up` has not run.
func requireStack(t *testing.T) string {
	t.Helper()
	admin, _ := testutil.ManagementCluster(t)
	for _, f := range []string{magnumConf, bridgeConf} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the local stack is not up (%v); run `make up`", err)
		}
	}
	return admin
}

var (
	buildOnce sync.Once
	binPath   string
)

// bridgeBinary builds cmd/magnum-capi-bridge once per test binary.
func bridgeBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcb-deploy-test-")
		require.NoError(t, err)
		path := filepath.Join(dir, "magnum-capi-bridge")
		testutil.GoBuild(t, "./cmd/magnum-capi-bridge", path)
		binPath = path
	})
	require.NotEmpty(t, binPath, "the bridge did not build (see the first test that built it)")
	return binPath
}

// runBridge runs the binary and returns its exit code, stdout and stderr.
func runBridge(t *testing.T, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgeBinary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "the bridge did not exit within %s: %s", timeout, errb.String())
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, out.String(), errb.String()
}

func kubectl(t *testing.T, kubeconfig string, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--request-timeout=30s"}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// saKubeconfig is a kubeconfig for a ServiceAccount token, against the admin kubeconfig's server.
func saKubeconfig(t *testing.T, admin, namespace, name string) string {
	t.Helper()
	token, err := kubectl(t, admin, "", "-n", namespace, "create", "token", name, "--duration=1h")
	require.NoError(t, err, token)
	server, err := kubectl(t, admin, "", "config", "view", "--minify", "--flatten", "-o", "jsonpath={.clusters[0].cluster.server}")
	require.NoError(t, err)
	ca, err := kubectl(t, admin, "", "config", "view", "--minify", "--flatten", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	require.NoError(t, err)
	return writeFile(t, "sa.kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: mgmt, cluster: {server: `+server+`, certificate-authority-data: `+ca+`}}]
users: [{name: sa, user: {token: `+strings.TrimSpace(token)+`}}]
contexts: [{name: sa, context: {cluster: mgmt, user: sa}}]
current-context: sa
`)
}

// insertTemplate writes a cluster template of the project into Magnum's database, as magnum-api
// would, and returns its uuid.
func insertTemplate(t *testing.T, st *db.Store, name, projectID, userID string) string {
	t.Helper()
	id := uuid.NewString()
	_, err := st.DB().ExecContext(context.Background(), "INSERT INTO cluster_template (uuid, name, coe, public, server_type, image_id, project_id, user_id, "+
		"flavor_id, master_flavor_id, keypair_id, external_network_id, network_driver) VALUES (?, ?, 'kubernetes', 0, 'vm', ?, ?, ?, 'm1.small', 'm1.medium', 'default', 'public', 'calico')",
		id, name, "ubuntu-2404-kube-v1.36.3", projectID, userID)
	require.NoError(t, err)
	return id
}

// topicClient is an RPC client of magnum.conf's broker on the conductor topic topic.
func topicClient(t *testing.T, f *config.File, topic string) *rpc.Client {
	t.Helper()
	opts, err := rpc.OptionsFromConfig(f)
	require.NoError(t, err)
	opts.Topic = topic
	client, err := rpc.NewClient(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// castCreate casts cluster_create of a one-worker cluster as magnum-api does and returns its uuid.
func castCreate(t *testing.T, ctx context.Context, client *rpc.Client, rctx *rpc.Context, templateID, name string) string {
	t.Helper()
	c := &magnum.Cluster{}
	c.UUID.Set(uuid.NewString())
	c.Name.Set(name)
	c.ProjectID.Set(rctx.ProjectID)
	c.UserID.Set(rctx.UserID)
	c.ClusterTemplateID.Set(templateID)
	c.Keypair.Set("default")
	c.MasterFlavorID.Set("m1.medium")
	c.FlavorID.Set("m1.small")
	c.CreateTimeout.Set(10)
	obj, err := magnum.EncodeAt(c, magnum.MustVersion("1.23"), nil)
	require.NoError(t, err)
	require.NoError(t, client.Cast(ctx, "cluster_create", map[string]any{"cluster": obj, "master_count": 1, "node_count": 1, "create_timeout": 10}, rctx))
	return c.UUID.Or("")
}

// waitRowGone waits until the cluster's row is deleted.
func waitRowGone(t *testing.T, ctx context.Context, st *db.Store, id string, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, "cluster "+id+" deleted", func() error {
		_, err := st.GetCluster(ctx, id)
		if errors.Is(err, magnum.ErrClusterNotFound) {
			return nil
		}
		return fmt.Errorf("row still there (%v)", err)
	})
}

// bridgeProcess is a bridge started by a test, killed with it.
type bridgeProcess struct {
	cmd     *exec.Cmd
	log     string
	exited  chan error
	metrics string
}

// startBridge runs the bridge with the configuration files; it is stopped (SIGINT, then killed)
// when the test ends, and its log printed if the test failed.
func startBridge(t *testing.T, name string, files ...string) *bridgeProcess {
	t.Helper()
	argv := configArgs(files)
	p := &bridgeProcess{log: filepath.Join(t.TempDir(), name+".log"), exited: make(chan error, 1)}
	logFile, err := os.Create(p.log)
	require.NoError(t, err)
	p.cmd = exec.Command(bridgeBinary(t), argv...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// Killed with the test: an orphaned bridge on a shared database would go on driving clusters.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, p.cmd.Start())
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.stop()
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("%s's log:\n%s", name, b)
		}
	})
	return p
}

// stop interrupts the bridge and waits for it (30 s, then kills it).
func (p *bridgeProcess) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.exited:
		p.exited <- err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
	}
}

// readyz is the bridge's readiness: its status code and body.
func (p *bridgeProcess) readyz() (int, string) {
	resp, err := http.Get("http://" + p.metrics + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// configArgs are the --config-file flags of files, in order.
func configArgs(files []string) []string {
	var out []string
	for _, f := range files {
		out = append(out, "--config-file", f)
	}
	return out
}
