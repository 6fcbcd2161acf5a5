package main

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

func runBridge(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeConf(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "magnum.conf")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

func TestHelpAndVersion(t *testing.T) {
	code, _, errOut := runBridge("--help")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: magnum-capi-bridge")
	require.Contains(t, errOut, "-config-file")
	code, out, _ := runBridge("--version")
	require.Equal(t, 0, code)
	require.Regexp(t, `^magnum-capi-bridge dev \(commit (\w{12}|unknown)\)\n$`, out)
	code, _, _ = runBridge("--no-such-flag")
	require.Equal(t, 2, code)
}

const validRest = `
[DEFAULT]
transport_url = rabbit://guest:guest@127.0.0.1:5672/
[certificates]
cert_manager_type = x509keypair
[bridge]
default_infrastructure = inmemory
`

// serviceUser is Magnum's service user as magnum.conf configures it for keystonemiddleware.
const serviceUser = `
[keystone_authtoken]
auth_url = http://127.0.0.1:5000/v3
username = magnum
password = secret
project_name = service
`

// Bad configuration is refused at start-up with the key's name and a non-zero exit code.
func TestBadConfigurationNamesTheKey(t *testing.T) {
	cases := map[string]struct{ conf, want string }{
		"missing file":                     {"", "no such file"},
		"no database":                      {validRest, "[database] connection: is required"},
		"malformed database":               {"[database]\nconnection = sqlite:///x.db\n" + validRest, "sqlite"},
		"bad flavor":                       {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + strings.Replace(validRest, "inmemory", "docker", 1), "[bridge] default_infrastructure"},
		"bad cert manager":                 {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + strings.Replace(validRest, "x509keypair", "local", 1), "[certificates] cert_manager_type"},
		"barbican without service user":    {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + strings.Replace(validRest, "x509keypair", "barbican", 1), "[keystone_auth] auth_url"},
		"barbican endpoint type":           {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + strings.Replace(validRest, "x509keypair", "barbican", 1) + serviceUser + "[barbican_client]\nendpoint_type = nearest\n", "[barbican_client] endpoint_type"},
		"bad rabbit option":                {"[database]\nconnection = mysql://u@127.0.0.1/m\n[oslo_messaging_rabbit]\nrabbit_qos_prefetch_count = lots\n" + validRest, "rabbit_qos_prefetch_count"},
		"bad kubernetes":                   {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + validRest + "default_kubernetes_version = latest\n", "[bridge] default_kubernetes_version"},
		"bad namespace_quota":              {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + validRest + "namespace_quota = secrets=lots\n", "[bridge] namespace_quota: \"secrets=lots\""},
		"credentials without service user": {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + validRest + "cluster_credentials = true\n", "[keystone_auth] auth_url"},
		"admin credential role":            {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + validRest + "cluster_credentials = true\ncluster_credential_roles = member,admin\n" + serviceUser, "[bridge] cluster_credential_roles"},
		"openstack without credentials":    {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + strings.Replace(validRest, "inmemory", "openstack", 1) + "cluster_credentials = false\n", "[bridge] cluster_credentials"},
		"bad require_admission_policies":   {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + validRest + "require_admission_policies = maybe\n", "[bridge] require_admission_policies"},
		"bad service_down_time":            {"[database]\nconnection = mysql://u@127.0.0.1/m\n" + strings.Replace(validRest, "[DEFAULT]", "[DEFAULT]\nservice_down_time = soon", 1), "service_down_time"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "absent.conf")
			if c.conf != "" {
				path = writeConf(t, c.conf)
			}
			code, _, errOut := runBridge("--check-config", "--config-file", path)
			require.Equal(t, 2, code, errOut)
			require.Contains(t, errOut, "configuration error")
			require.Contains(t, errOut, c.want)
		})
	}
}

// An unreachable database or one without Magnum's tables fails the start-up check, naming the cause.
// Integration tier: the check reaches the test RabbitMQ (validRest's transport_url) before the
// database, and the second database is made on the test MariaDB.
func TestUnusableDatabaseFailsCheck(t *testing.T) {
	testutil.Require(t, testutil.Integration)
	conf := "[database]\nconnection = mysql+pymysql://nobody:pw@127.0.0.1:1/magnum\n" + validRest
	code, _, errOut := runBridge("--check-config", "--config-file", writeConf(t, conf))
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "127.0.0.1:1")
	require.NotContains(t, errOut, "pw@")

	empty := emptyMySQLDatabase(t)
	code, _, errOut = runBridge("--check-config", "--config-file", writeConf(t, "[database]\nconnection = "+empty+"\n"+validRest))
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "cluster")
}

// emptyMySQLDatabase creates a database without Magnum's tables and returns its SQLAlchemy URL.
func emptyMySQLDatabase(t *testing.T) string {
	t.Helper()
	db, err := sql.Open("mysql", testutil.MySQLDSN())
	require.NoError(t, err)
	defer db.Close()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "mcb_empty_" + hex.EncodeToString(b)
	_, err = db.Exec("CREATE DATABASE " + name)
	require.NoError(t, err)
	t.Cleanup(func() {
		if c, err := sql.Open("mysql", testutil.MySQLDSN()); err == nil {
			_, _ = c.Exec("DROP DATABASE " + name)
			_ = c.Close()
		}
	})
	return "mysql+pymysql://root@127.0.0.1:3306/" + name
}

func TestUnknownCommand(t *testing.T) {
	code, _, errOut := runBridge("frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown command "frobnicate"`)
}
