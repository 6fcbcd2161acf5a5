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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
