// Package stack_test checks the OpenStack half of the local stack (deploy/local/openstack/up.sh) end
// to end: the real `openstack` CLI talks to the real Keystone and magnum-api 15.0.1, which validate
// against the fake Glance/Nova/Neutron, write MariaDB and publish on RabbitMQ.
//
// They are the e2e tier (testutil.E2E): built without the `e2e` tag they are skipped, saying so;
// with it they need the stack to be up and FAIL when it is not, because a silently skipped
// end-to-end suite looks exactly like a passing one.
//
// Environment: MCB_MAGNUM_CONF (default /etc/magnum/magnum.conf),
// MCB_OPENSTACK_CLI (default: `openstack` from PATH), MCB_FAKE_OPENSTACK_REQUEST_LOG (default
// /var/log/magnum-capi-bridge/fake-openstack-requests.jsonl).
package stack_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// Clouds of /etc/openstack/clouds.yaml written by up.sh.
const (
	cloudDemo  = "devstack"
	cloudAlt   = "devstack-alt"
	cloudAdmin = "devstack-admin"
)

// The default seed of cmd/fake-openstack.
const (
	ubuntuImage     = "ubuntu-2404-kube-v1.36.3"
	externalNetwork = "public"
)

type stack struct {
	cli        string
	amqpURL    string
	magnumDSN  string
	requestLog string
}

var (
	stackOnce sync.Once
	theStack  *stack
	stackErr  error
)

// requireStack returns the running stack, skips without the `e2e` build tag, and fails the test
// otherwise when the stack is not reachable.
func requireStack(t *testing.T) *stack {
	t.Helper()
	testutil.Require(t, testutil.E2E)
	stackOnce.Do(func() { theStack, stackErr = probeStack() })
	if stackErr != nil {
		t.Fatalf("the local OpenStack stack is not up: %v\n"+
			"start it with deploy/local/openstack/up.sh (or `make up`)", stackErr)
	}
	return theStack
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func probeStack() (*stack, error) {
	confPath := envOr("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf")
	conf, err := config.Load(confPath)
	if err != nil {
		return nil, err
	}
	s := &stack{requestLog: envOr("MCB_FAKE_OPENSTACK_REQUEST_LOG",
		"/var/log/magnum-capi-bridge/fake-openstack-requests.jsonl")}
	if s.cli, err = exec.LookPath(envOr("MCB_OPENSTACK_CLI", "openstack")); err != nil {
		return nil, fmt.Errorf("openstack CLI (python3-openstackclient): %w", err)
	}
	if s.amqpURL, err = amqpURLFromTransport(conf.String("DEFAULT", "transport_url", "")); err != nil {
		return nil, fmt.Errorf("%s: [DEFAULT] transport_url: %w", confPath, err)
	}
	if s.magnumDSN, err = dsnFromConnection(conf.String("database", "connection", "")); err != nil {
		return nil, fmt.Errorf("%s: [database] connection: %w", confPath, err)
	}
	keystone := conf.String("keystone_authtoken", "www_authenticate_uri", "")
	magnumAPI := "http://" + net.JoinHostPort(conf.String("api", "host", "127.0.0.1"), conf.String("api", "port", "9511")) + "/"
	client := &http.Client{Timeout: 10 * time.Second}
	for name, u := range map[string]string{"Keystone": keystone, "magnum-api": magnumAPI} {
		resp, err := client.Get(u)
		if err != nil {
			return nil, fmt.Errorf("%s at %s: %w", name, u, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s at %s answers %s", name, u, resp.Status)
		}
	}
	if _, err := os.Stat(s.requestLog); err != nil {
		return nil, fmt.Errorf("request log of the fake: %w", err)
	}
	return s, nil
}

// amqpURLFromTransport turns oslo.messaging's rabbit://user:pass@host:port/vhost (first host of a
// list) into an AMQP URL.
func amqpURLFromTransport(transport string) (string, error) {
	if !strings.HasPrefix(transport, "rabbit://") {
		return "", fmt.Errorf("not a rabbit:// URL")
	}
	rest := strings.TrimPrefix(transport, "rabbit://")
	hosts, vhost, _ := strings.Cut(rest, "/")
	first, _, _ := strings.Cut(hosts, ",")
	return "amqp://" + first + "/" + vhost, nil
}

// dsnFromConnection turns SQLAlchemy's mysql+pymysql://user:pass@host[:port]/db?... into a DSN for
// go-sql-driver/mysql.
func dsnFromConnection(connection string) (string, error) {
	u, err := url.Parse(connection)
	if err != nil {
		return "", err
	}
	if u.Scheme != "mysql+pymysql" && u.Scheme != "mysql" {
		return "", fmt.Errorf("scheme %q: the tests read MariaDB only", u.Scheme)
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	cfg.ParseTime = true
	return cfg.FormatDSN(), nil
}

// cliEnv is the environment of the CLI without OS_* variables: python-openstackclient lets them
// override the values of --os-cloud, so a stray OS_PASSWORD in the caller's shell would change who
// the tests act as.
func cliEnv() []string { return testutil.OpenStackCLIEnv() }

type cliResult struct {
	stdout, stderr string
}

// openstack runs `openstack --os-cloud CLOUD ARGS...`. The error carries the end of stderr (the CLI's
// error message), never the --debug request dumps.
func (s *stack) openstack(t *testing.T, cloud string, args ...string) (cliResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full := append([]string{"--os-cloud", cloud}, args...)
	cmd := exec.CommandContext(ctx, s.cli, full...)
	cmd.Env = cliEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	err := cmd.Run()
	t.Logf("openstack %s (%.1f s)", strings.Join(full, " "), time.Since(started).Seconds())
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		return res, fmt.Errorf("openstack %s: %w: %s", strings.Join(full, " "), err, lastLines(res.stderr, 3))
	}
	return res, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// decodeJSONOutput decodes `-f json` output. magnumclient prints "Request to create ... accepted" on
// stdout before the JSON document, so decoding starts at the first '{' or '['.
func decodeJSONOutput(t *testing.T, out string, into any) {
	t.Helper()
	i := strings.IndexAny(out, "{[")
	if i < 0 {
		t.Fatalf("no JSON in CLI output: %q", out)
	}
	if err := json.Unmarshal([]byte(out[i:]), into); err != nil {
		t.Fatalf("CLI output is not the JSON expected: %v\n%s", err, out)
	}
}

func uniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

type clusterTemplate struct {
	UUID              string `json:"uuid"`
	Name              string `json:"name"`
	COE               string `json:"coe"`
	ClusterDistro     string `json:"cluster_distro"`
	ServerType        string `json:"server_type"`
	ImageID           string `json:"image_id"`
	ExternalNetworkID string `json:"external_network_id"`
	FlavorID          string `json:"flavor_id"`
	MasterFlavorID    string `json:"master_flavor_id"`
	KeypairID         string `json:"keypair_id"`
	Public            bool   `json:"public"`
}

// createTemplate makes a non-public Kubernetes template on the Ubuntu image as CLOUD's user and
// deletes it when the test ends.
func (s *stack) createTemplate(t *testing.T, cloud string) clusterTemplate {
	t.Helper()
	name := uniqueName("mcb-e2e-tpl")
	res, err := s.openstack(t, cloud, "coe", "cluster", "template", "create", name,
		"--coe", "kubernetes", "--image", ubuntuImage, "--external-network", externalNetwork,
		"--flavor", "m1.small", "--master-flavor", "m1.medium", "--keypair", "default",
		"--network-driver", "calico", "-f", "json")
	if err != nil {
		t.Fatal(err)
	}
	var tpl clusterTemplate
	decodeJSONOutput(t, res.stdout, &tpl)
	if tpl.UUID == "" {
		t.Fatalf("template create returned no uuid: %s", res.stdout)
	}
	t.Cleanup(func() { s.deleteTemplate(t, cloud, tpl.UUID) })
	return tpl
}

// deleteTemplate retries while a cluster still uses the template: with magnum-capi-bridge running, a
// cluster created by a test really exists and is deleted asynchronously.
func (s *stack) deleteTemplate(t *testing.T, cloud, uuid string) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := s.openstack(t, cloud, "coe", "cluster", "template", "delete", uuid)
		if err == nil || strings.Contains(err.Error(), "could not be found") {
			return
		}
		if !strings.Contains(err.Error(), "is referenced by") || time.Now().After(deadline) {
			t.Errorf("cleanup: cluster template %s is left behind: %v", uuid, err)
			return
		}
		time.Sleep(5 * time.Second)
	}
}

// listUUIDs runs a `coe ... list -f json` and returns the uuids listed.
func (s *stack) listUUIDs(t *testing.T, cloud string, args ...string) map[string]bool {
	t.Helper()
	res, err := s.openstack(t, cloud, append(args, "-f", "json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		UUID string `json:"uuid"`
	}
	decodeJSONOutput(t, res.stdout, &rows)
	uuids := map[string]bool{}
	for _, r := range rows {
		uuids[r.UUID] = true
	}
	return uuids
}

var (
	acceptedCluster = regexp.MustCompile(`Request to create cluster ([0-9a-f-]{36}) accepted`)
	respStatus      = regexp.MustCompile(`RESP: \[(\d{3})\]`)
)

// responseStatus finds, in `openstack --debug` output, the HTTP status of the first response that
// follows the request line "-X METHOD URL".
func responseStatus(debug, method, rawURL string) (int, error) {
	i := strings.Index(debug, "-X "+method+" "+rawURL+" ")
	if i < 0 {
		return 0, fmt.Errorf("no %s %s in the --debug output", method, rawURL)
	}
	m := respStatus.FindStringSubmatch(debug[i:])
	if m == nil {
		return 0, errors.New("no response logged after " + method + " " + rawURL)
	}
	return strconv.Atoi(m[1])
}
