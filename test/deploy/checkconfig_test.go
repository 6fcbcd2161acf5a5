package deploy

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// secretsOf are the passwords in the local stack's magnum.conf: none may appear in any message.
func secretsOf(t *testing.T) []string {
	t.Helper()
	f, err := config.Load(magnumConf)
	require.NoError(t, err)
	var out []string
	for _, raw := range []string{f.String("DEFAULT", "transport_url", ""), f.String("database", "connection", "")} {
		u, err := url.Parse(strings.Replace(raw, "mysql+pymysql", "mysql", 1))
		require.NoError(t, err)
		if p, ok := u.User.Password(); ok && p != "" {
			// The local RabbitMQ's guest:guest: its password is also its (loggable) user name.
			out = append(out, u.User.Username()+":"+p)
			if p != u.User.Username() {
				out = append(out, p)
			}
		}
	}
	if p := f.String("keystone_authtoken", "password", ""); p != "" {
		out = append(out, p)
	}
	require.NotEmpty(t, out)
	return out
}

func requireNoSecret(t *testing.T, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		require.NotContains(t, text, s, "a secret reached a message")
	}
}

var hostPort = regexp.MustCompile(`@([^/@:]+):(\d+)`)

// On the local stack, --check-config passes with the zed bridge's configuration and says what it checked.
func TestCheckConfigPassesOnTheLocalStack(t *testing.T) {
	requireStack(t)
	code, out, errOut := runBridge(t, 90*time.Second, "--check-config", "--config-file", magnumConf, "--config-file", bridgeConf)
	require.Equal(t, 0, code, errOut)
	for _, dep := range []string{"RabbitMQ", "database", "management cluster", "Cluster API", "admission policies", "Keystone"} {
		require.Regexp(t, `(?m)^ok +`+regexp.QuoteMeta(dep)+` `, out)
	}
	require.Contains(t, out, "system:serviceaccount:magnum-capi-bridge:magnum-capi-bridge")
	require.Contains(t, out, `service user "`)
	require.Contains(t, out, "configuration and dependencies OK")
	requireNoSecret(t, out+errOut, secretsOf(t)...)
}

// Each broken dependency fails --check-config with a non-zero exit that names it, and no secret.
func TestCheckConfigNamesTheBrokenDependency(t *testing.T) {
	admin := requireStack(t)
	secrets := secretsOf(t)
	f, err := config.Load(magnumConf)
	require.NoError(t, err)

	check := func(t *testing.T, override string, want ...string) string {
		t.Helper()
		start := time.Now()
		code, out, errOut := runBridge(t, 90*time.Second, "--check-config", "--config-file", magnumConf,
			"--config-file", bridgeConf, "--config-file", writeFile(t, "override.conf", override))
		t.Logf("exit %d after %s: %s", code, time.Since(start).Round(time.Millisecond), strings.TrimSpace(errOut))
		require.Equal(t, 1, code, out+errOut)
		for _, w := range want {
			require.Contains(t, errOut, w)
		}
		requireNoSecret(t, out+errOut, secrets...)
		return errOut
	}

	t.Run("RabbitMQ on a closed port", func(t *testing.T) {
		port := strconv.Itoa(testutil.FreePort(t))
		transport := hostPort.ReplaceAllString(f.String("DEFAULT", "transport_url", ""), "@127.0.0.1:"+port)
		check(t, "[DEFAULT]\ntransport_url = "+transport+"\n", "magnum-capi-bridge: RabbitMQ: ", "127.0.0.1:"+port, "connection refused")
	})
	t.Run("wrong database password", func(t *testing.T) {
		conn := f.String("database", "connection", "")
		u, err := url.Parse(strings.Replace(conn, "mysql+pymysql", "mysql", 1))
		require.NoError(t, err)
		wrong := "wrong-" + testutil.RandomHex(3)
		secrets = append(secrets, wrong)
		name := u.User.Username()
		bad := regexp.MustCompile(`//[^@]*@`).ReplaceAllString(conn, "//"+name+":"+wrong+"@")
		check(t, "[database]\nconnection = "+bad+"\n", "magnum-capi-bridge: database: ", "as \""+name+"\"", "Access denied")
	})
	t.Run("admission policies not in force for the identity", func(t *testing.T) {
		// A ServiceAccount the policies do not name, allowed to read them: to it, they are missing. It
		// may list namespaces, as the bridge's role: the management cluster is named alike (its
		// kube-system namespace), so it is the stack's bridge deployment to the database owner check.
		ns := "mcb-checkcfg-" + testutil.RandomHex(3)
		objs := `apiVersion: v1
kind: Namespace
metadata: {name: ` + ns + `}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: bridge, namespace: ` + ns + `}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ` + ns + `}
rules:
  - apiGroups: [admissionregistration.k8s.io]
    resources: [validatingadmissionpolicies, validatingadmissionpolicybindings]
    verbs: [get]
  - apiGroups: [""]
    resources: [namespaces]
    verbs: [list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ` + ns + `}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ` + ns + `}
subjects: [{kind: ServiceAccount, name: bridge, namespace: ` + ns + `}]
`
		out, err := kubectl(t, admin, objs, "apply", "-f", "-")
		require.NoError(t, err, out)
		t.Cleanup(func() { _, _ = kubectl(t, admin, objs, "delete", "--wait=false", "--ignore-not-found", "-f", "-") })
		kc := saKubeconfig(t, admin, ns, "bridge")
		user := "system:serviceaccount:" + ns + ":bridge"
		errOut := check(t, "[bridge]\nkubeconfig = "+kc+"\n", "magnum-capi-bridge: admission policies: ",
			"ValidatingAdmissionPolicy magnum-capi-bridge-project-namespaces-only does not apply to "+user)

		// The bridge itself refuses to start, before it consumes anything.
		code, _, runErr := runBridge(t, 90*time.Second, "--config-file", magnumConf, "--config-file", bridgeConf,
			"--config-file", writeFile(t, "override.conf", "[bridge]\nkubeconfig = "+kc+"\n"))
		require.Equal(t, 1, code, runErr)
		require.Contains(t, runErr, "admission policies: ValidatingAdmissionPolicy magnum-capi-bridge-project-namespaces-only does not apply")
		require.Contains(t, runErr, "require_admission_policies = false")
		require.NotContains(t, runErr, "serving")
		requireNoSecret(t, errOut+runErr, secrets...)

		// require_admission_policies = false: the check reports them as not required and passes.
		code, stdout, stderr := runBridge(t, 90*time.Second, "--check-config", "--config-file", magnumConf, "--config-file", bridgeConf,
			"--config-file", writeFile(t, "override.conf", "[bridge]\nkubeconfig = "+kc+"\nrequire_admission_policies = false\n"))
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "not required ([bridge] require_admission_policies = false)")
	})
}
