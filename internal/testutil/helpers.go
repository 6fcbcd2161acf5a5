package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Env is the environment variable's value, or def when it is unset or empty.
func Env(name, def string) string { return env(name, def) }

// Eventually calls check every 200 ms until it returns nil, and fails the test with check's last
// error when timeout passes first. check runs on testify's goroutine, so it reports through its
// error and must not call t.Fatal or require.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NoError(c, check()) },
		timeout, 200*time.Millisecond, "%s: not within %s", what, timeout)
}

// FreePort is a loopback TCP port nothing listens on: free for a server the test starts, or closed
// for a test of a refused connection. Another process may take it in between, which loopback tests
// accept.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreePorts is n distinct free loopback ports. Each listener stays open until all are taken, since
// ports taken one after another may come back equal once the first is closed.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// FreeAddr is FreePort as host:port on 127.0.0.1.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}

// RandomHex is n random bytes in hex: a suffix that keeps the names of parallel or repeated tests
// apart.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Token is what `openstack token issue -f json` prints, as far as tests use it.
type Token struct {
	ID        string `json:"id"`
	ProjectID string `json:"project_id"`
	UserID    string `json:"user_id"`
}

// IssueToken asks Keystone for a token of the cloud (a clouds.yaml entry) through the real
// `openstack` CLI; extraEnv is added to OpenStackCLIEnv (OS_CLIENT_CONFIG_FILE for another
// clouds.yaml). The error carries the CLI's stderr.
func IssueToken(cloud string, extraEnv ...string) (Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "openstack", "--os-cloud", cloud, "token", "issue", "-f", "json")
	cmd.Env = append(OpenStackCLIEnv(), extraEnv...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return Token{}, fmt.Errorf("openstack --os-cloud %s token issue: %v: %s", cloud, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return Token{}, err
	}
	var tok Token
	if err := json.Unmarshal(out, &tok); err != nil {
		return Token{}, fmt.Errorf("openstack token issue: %w: %s", err, out)
	}
	return tok, nil
}

// GoBuild builds the package of this module at pkg (relative to RepoRoot, e.g.
// "./cmd/magnum-capi-bridge") into the file out, and fails the test with the compiler's output when
// it does not build.
func GoBuild(t testing.TB, pkg, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}
