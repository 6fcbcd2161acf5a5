// Package isolation checks tenant isolation in the management cluster of the local stack (`make up`):
// each Keystone project's namespace, its NetworkPolicy and ResourceQuota, the bridge's own RBAC and
// admission policies (deploy/kubernetes), and that nothing in one project's namespace can point at
// another's. Everything runs against the real kube-apiserver, Cluster API webhooks and controllers,
// Keystone and magnum-api. They are the e2e tier (testutil.E2E): skipped without the `e2e` build tag;
// with it they FAIL when the stack is not up.
package isolation

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/app"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The client logs the apiserver's warnings (v1beta1 is deprecated) through controller-runtime's
// logger, which complains with a stack trace when none is set.
func init() { crlog.SetLogger(logr.Discard()) }

var (
	adminKubeconfig = testutil.Env("MCB_KUBECONFIG", "/var/lib/magnum-capi-bridge/mgmt/admin.kubeconfig")
	// The configuration the local bridge runs with (deploy/local/bridge-up.sh).
	bridgeConfigFiles = []string{testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf"),
		testutil.Env("MCB_BRIDGE_CONF", "/etc/magnum-capi-bridge/bridge.conf")}
)

// The bridge's ServiceAccount (deploy/kubernetes/rbac.yaml).
const (
	bridgeNamespace = "magnum-capi-bridge"
	bridgeUser      = "system:serviceaccount:magnum-capi-bridge:magnum-capi-bridge"
	// scratchPrefix names the namespaces tests make themselves: not the bridge's prefix, so the
	// running bridge never re-ensures them with its own quota while a test looks at them.
	scratchPrefix = "mcb-iso-"
)

// fixture is the management cluster as the admin and as the bridge see it, and the bridge's options.
type fixture struct {
	opts   *app.Options
	admin  *capi.Client
	bridge *capi.Client
}

func setup(t *testing.T) *fixture {
	t.Helper()
	testutil.Require(t, testutil.E2E)
	if _, err := os.Stat(adminKubeconfig); err != nil {
		t.Fatalf("the local stack is not up (no management cluster kubeconfig: %v); run `make up`", err)
	}
	opts, err := app.LoadOptions(bridgeConfigFiles...)
	require.NoError(t, err, "the local bridge's configuration")
	require.NotEmpty(t, opts.Bridge.Kubeconfig, "the local bridge runs with a kubeconfig")
	return &fixture{opts: opts, admin: newClient(t, adminKubeconfig), bridge: newClient(t, opts.Bridge.Kubeconfig)}
}

func newClient(t *testing.T, kubeconfig string) *capi.Client {
	t.Helper()
	cfg, err := capi.RESTConfig(kubeconfig)
	require.NoError(t, err)
	scheme, err := capi.NewScheme()
	require.NoError(t, err)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return &capi.Client{Client: c}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// scratchProject makes a project namespace the way the bridge does, as c, and deletes it afterwards
// (as the admin: the bridge may not delete namespaces).
func (f *fixture) scratchProject(t *testing.T, c *capi.Client) (namespace, project string) {
	t.Helper()
	project = testutil.RandomHex(16)
	namespace = templates.NamespaceFor(scratchPrefix, project)
	ctx := ctxFor(t, time.Minute)
	require.NoError(t, c.EnsureProjectNamespace(ctx, namespace, project))
	t.Cleanup(func() {
		_ = f.admin.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	})
	return namespace, project
}

// whoAmI is the username the apiserver authenticates c as.
func whoAmI(t *testing.T, c client.Client) string {
	t.Helper()
	r := &authenticationv1.SelfSubjectReview{}
	require.NoError(t, c.Create(ctxFor(t, 20*time.Second), r))
	return r.Status.UserInfo.Username
}

// can asks the apiserver whether c may do something (SelfSubjectAccessReview: c's own credentials).
func can(t *testing.T, c client.Client, a authorizationv1.ResourceAttributes) bool {
	t.Helper()
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}
	require.NoError(t, c.Create(ctxFor(t, 20*time.Second), r))
	return r.Status.Allowed
}

func describe(a authorizationv1.ResourceAttributes) string {
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	if a.Group != "" {
		res += "." + a.Group
	}
	if a.Name != "" {
		res += " " + a.Name
	}
	where := "cluster-wide"
	if a.Namespace != "" {
		where = "in " + a.Namespace
	}
	return fmt.Sprintf("%s %s %s", a.Verb, res, where)
}

// openstack runs the real CLI as one of clouds.yaml's clouds.
func openstack(t *testing.T, cloud string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "openstack", append([]string{"--os-cloud", cloud}, args...)...)
	cmd.Env = testutil.OpenStackCLIEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("openstack %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func mustOpenstack(t *testing.T, cloud string, args ...string) string {
	t.Helper()
	out, err := openstack(t, cloud, args...)
	require.NoError(t, err)
	return out
}
