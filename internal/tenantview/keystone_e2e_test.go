package tenantview

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/kubegroup"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The webhook against the local stack's real Keystone (no apiserver): demo's token from
// `openstack token issue` is mapped to demo's user and project groups; after `openstack token revoke`
// it is refused once the cache entry (1 s here) is gone; an expired token is Keystone's 404 like a
// revoked one. test/e2e does the same through the management cluster's apiserver.
func TestWebhookWithKeystone(t *testing.T) {
	testutil.Require(t, testutil.E2E)
	openstack := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "openstack", append([]string{"--os-cloud", "devstack"}, args...)...)
		cmd.Env = testutil.OpenStackCLIEnv()
		out, err := cmd.Output()
		require.NoError(t, err, "openstack %v (is the local stack up? `make up`)", args)
		return string(out)
	}
	tok, err := testutil.IssueToken("devstack")
	require.NoError(t, err, "is the local stack up? `make up`")
	h := NewWebhook(KeystoneValidator{URL: "http://127.0.0.1:5000/v3"}, Options{CacheTTL: time.Second})

	rec, out := review(t, h, "authentication.k8s.io/v1", tok.ID)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.True(t, out.Status.Authenticated)
	require.Equal(t, "keystone:"+tok.UserID, out.Status.User.Username)
	require.Contains(t, out.Status.User.Groups, kubegroup.Project(tok.ProjectID))
	require.Contains(t, out.Status.User.Groups, kubegroup.ProjectRole(tok.ProjectID, "member"))

	openstack("token", "revoke", tok.ID)
	require.Eventually(t, func() bool {
		_, out := review(t, h, "authentication.k8s.io/v1", tok.ID)
		return !out.Status.Authenticated
	}, 10*time.Second, 200*time.Millisecond, "the revoked token is still authenticated")

	rec, out = review(t, h, "authentication.k8s.io/v1", "gAAAAAB"+strings.Repeat("x", 100))
	require.Equal(t, http.StatusOK, rec.Code)
	require.False(t, out.Status.Authenticated)
}
