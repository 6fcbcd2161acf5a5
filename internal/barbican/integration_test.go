package barbican

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/google/uuid"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/keymanager/v1/containers"
	"github.com/gophercloud/gophercloud/v2/openstack/keymanager/v1/secrets"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican/barbicantest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The tests below talk to the local stack's real Barbican as Magnum's service user, and run
// Magnum's own Python certificate code next to it (testdata/magnum_certs.py).

func serviceAuth(b testutil.Barbican) keystone.PasswordAuth {
	return keystone.PasswordAuth{AuthURL: b.KeystoneURL, Username: b.Username, UserDomainID: "default",
		Password: keystone.NewSecret(b.Password), ProjectName: b.ProjectName, ProjectDomainID: "default"}
}

func newBackend(t *testing.T, d Dialect) (*Backend, *gophercloud.ServiceClient, testutil.Barbican) {
	t.Helper()
	target := testutil.RequireBarbican(t)
	b := New(Options{Service: serviceAuth(target), Region: target.Region, Dialect: d})
	kc, err := b.keyManager(context.Background())
	require.NoError(t, err)
	return b, kc, target
}

// generate is a cluster's key material as the bridge makes it (2048-bit keys: quicker).
func generate(t *testing.T, issuer string) *certs.ClusterPKI {
	t.Helper()
	pki, err := certs.GenerateClusterWithOptions(issuer, certs.GenerateOptions{RSAKeySize: 2048})
	require.NoError(t, err)
	return pki
}

// container reads a container and its secrets' names and default content types.
func container(t *testing.T, kc *gophercloud.ServiceClient, ref string) (*containers.Container, map[string][2]string) {
	t.Helper()
	ctx := context.Background()
	c, err := containers.Get(ctx, kc, lastSegment(ref)).Extract()
	require.NoError(t, err)
	out := map[string][2]string{}
	for _, sr := range c.SecretRefs {
		s, err := secrets.Get(ctx, kc, lastSegment(sr.SecretRef)).Extract()
		require.NoError(t, err)
		out[sr.Name] = [2]string{s.Name, s.ContentTypes["default"]}
	}
	return c, out
}

// The bridge stores a key pair as Magnum does, reads it back, registers the cluster as a consumer
// when the dialect says so, and deletes the container with its secrets.
func TestStoreLoadDelete(t *testing.T) {
	for name, d := range map[string]Dialect{"barbicanclient": DialectBarbicanClient, "openstacksdk": DialectOpenStackSDK} {
		t.Run(name, func(t *testing.T) {
			b, kc, target := newBackend(t, d)
			ctx := context.Background()
			pki := generate(t, "k8s-roundtrip")
			kp := pki.KubernetesCA.Stored
			ref, err := b.Store(ctx, pki.Issuer, kp, certs.Owner{})
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(ref, target.URL+"/v1/containers/"), "the ref is the container's href: %s", ref)

			c, stored := container(t, kc, ref)
			assert.Equal(t, "certificate", c.Type)
			assert.Equal(t, "k8s-roundtrip", c.Name)
			pemType := "application/octet-stream"
			if d.TextPEM {
				pemType = "text/plain"
			}
			assert.Equal(t, map[string][2]string{
				"certificate":            {"Certificate", pemType},
				"private_key":            {"Private Key", pemType},
				"private_key_passphrase": {"Private Key Passphrase", "text/plain"},
			}, stored, "no intermediates secret: Magnum stores none when there are none")

			got, err := b.Load(ctx, ref)
			require.NoError(t, err)
			if d.TextPEM {
				// Barbican trims text/plain payloads: Magnum 23 reads its PEM without the final
				// newline too, which PEM parsers do not need.
				kp.Certificate, kp.PrivateKey = strings.TrimSpace(kp.Certificate), strings.TrimSpace(kp.PrivateKey)
			}
			assert.Equal(t, kp, got)
			assert.Contains(t, got.PrivateKey, "BEGIN ENCRYPTED PRIVATE KEY", "the key stays encrypted with its passphrase, as Magnum keeps it")
			_, _, err = certs.Decrypt(got)
			require.NoError(t, err)

			cluster := uuid.NewString()
			_, err = b.LoadForCluster(ctx, ref, cluster)
			require.NoError(t, err)
			c, _ = container(t, kc, ref)
			if d.RegisterConsumers {
				require.Len(t, c.Consumers, 1)
				assert.Equal(t, containers.ConsumerRef{Name: "Magnum", URL: cluster}, c.Consumers[0])
			} else {
				assert.Empty(t, c.Consumers)
			}

			require.NoError(t, b.Delete(ctx, ref))
			for _, sr := range c.SecretRefs {
				_, err := secrets.Get(ctx, kc, lastSegment(sr.SecretRef)).Extract()
				assert.True(t, gophercloud.ResponseCodeIs(err, http.StatusNotFound), "secret %s deleted: %v", sr.Name, err)
			}
			_, err = b.Load(ctx, ref)
			require.ErrorIs(t, err, certs.ErrKeyPairNotFound)
			require.ErrorIs(t, b.Delete(ctx, ref), certs.ErrKeyPairNotFound, "a second delete finds nothing")
		})
	}
}

// A container that does not exist: the error names Barbican and the ref, and is certs' not-found.
func TestMissingContainer(t *testing.T) {
	b, _, target := newBackend(t, DialectBarbicanClient)
	ref := target.URL + "/v1/containers/" + uuid.NewString()
	_, err := b.LoadForCluster(context.Background(), ref, uuid.NewString())
	require.ErrorIs(t, err, certs.ErrKeyPairNotFound)
	assert.Contains(t, err.Error(), "Barbican: register as consumer of certificate container "+ref+": 404 Not Found")
	_, err = New(Options{Service: serviceAuth(target), Dialect: DialectOpenStackSDK}).Load(context.Background(), ref)
	require.ErrorIs(t, err, certs.ErrKeyPairNotFound)
	assert.Contains(t, err.Error(), "Barbican: read certificate container "+ref+": 404 Not Found")
}

// refusingBarbican is a network on which Keystone answers and Barbican's address refuses
// connections, as when barbican-api is down.
func refusingBarbican(t *testing.T, target testutil.Barbican) *http.Client {
	t.Helper()
	host := strings.TrimPrefix(strings.TrimPrefix(target.URL, "http://"), "https://")
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == host {
				return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connect: connection refused")}
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}}
}

// Barbican unreachable: every operation fails with an error naming Barbican (and the ref).
func TestUnreachableBarbican(t *testing.T) {
	target := testutil.RequireBarbican(t)
	b := New(Options{Service: serviceAuth(target), Region: target.Region, Dialect: DialectBarbicanClient, HTTPClient: refusingBarbican(t, target)})
	ctx := context.Background()
	ref := target.URL + "/v1/containers/" + uuid.NewString()
	_, err := b.LoadForCluster(ctx, ref, uuid.NewString())
	var be *Error
	require.ErrorAs(t, err, &be)
	assert.Contains(t, err.Error(), "Barbican: read certificate container "+ref)
	assert.Contains(t, err.Error(), "connection refused")
	assert.NotErrorIs(t, err, certs.ErrKeyPairNotFound, "unreachable is not missing")
	assert.Equal(t, "no answer", be.Reason)

	_, err = b.Store(ctx, "k8s", generate(t, "k8s").KubernetesCA.Stored, certs.Owner{})
	require.ErrorAs(t, err, &be)
	assert.Contains(t, err.Error(), `Barbican: store certificate container "k8s"`)
	require.ErrorAs(t, b.Delete(ctx, ref), &be)
	_, err = b.Probe(ctx)
	require.ErrorAs(t, err, &be)
}

// projectObjects lists the hrefs of every secret and container in the service user's project.
func projectObjects(t *testing.T, kc *gophercloud.ServiceClient) []string {
	t.Helper()
	return barbicantest.ProjectObjects(t, kc)
}

// A store that Barbican refuses half-way (here the container: its name is longer than Barbican
// takes) removes the secrets it wrote.
func TestFailedStoreLeavesNoSecrets(t *testing.T) {
	b, kc, _ := newBackend(t, DialectBarbicanClient)
	before := projectObjects(t, kc)
	_, err := b.Store(context.Background(), strings.Repeat("k", 300), generate(t, "k8s").KubernetesCA.Stored, certs.Owner{})
	var be *Error
	require.ErrorAs(t, err, &be)
	assert.Equal(t, http.StatusBadRequest, be.Status)
	assert.Contains(t, err.Error(), "Barbican: store certificate container")
	assert.Equal(t, before, projectObjects(t, kc), "no secret or container left behind")
}

// --check-config's probe: the service user creates, reads and deletes a secret.
func TestProbe(t *testing.T) {
	b, kc, target := newBackend(t, DialectBarbicanClient)
	before := projectObjects(t, kc)
	endpoint, err := b.Probe(context.Background())
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSuffix(target.URL, "/")+"/", endpoint)
	assert.Equal(t, before, projectObjects(t, kc))
}

// magnumPython runs testdata/magnum_certs.py with an installed Magnum's Python: Zed's on the host,
// 23.0.0's in its chroot (deploy/local/openstack/newest-up.sh). The Magnum configuration reaches
// the local Keystone and Barbican with the service user, as magnum-conductor's does.
type magnumPython struct {
	release string
	root    string // the chroot, or "" for the host
	dialect Dialect
}

var magnumReleases = []magnumPython{
	{release: "zed", dialect: DialectBarbicanClient},
	{release: "23", root: testutil.Env("MCB_NEWEST_ROOT", "/srv/magnum-forky"), dialect: DialectOpenStackSDK},
}

const magnumConf = `[DEFAULT]
debug = false
[certificates]
cert_manager_type = barbican
[barbican_client]
region_name = {{.Region}}
endpoint_type = publicURL
[x509]
rsa_key_size = 2048
[keystone_auth]
auth_type = password
auth_url = {{.KeystoneURL}}
username = {{.Username}}
user_domain_name = Default
password = {{.Password}}
project_name = {{.ProjectName}}
project_domain_name = Default
[keystone_authtoken]
www_authenticate_uri = {{.KeystoneURL}}
auth_url = {{.KeystoneURL}}
`

// run runs the helper with args and stdin and decodes its JSON answer; the test is skipped when
// this Magnum is not installed.
func (m magnumPython) run(t *testing.T, target testutil.Barbican, stdin string, args ...string) map[string]any {
	t.Helper()
	python := filepath.Join(m.root, "/usr/bin/python3")
	if _, err := os.Stat(filepath.Join(m.root, "/usr/lib/python3/dist-packages/magnum/common/cert_manager/barbican_cert_manager.py")); err != nil {
		t.Skipf("Magnum %s is not installed at %s/ (%v)", m.release, m.root, err)
	}
	dir := filepath.Join(m.root, "/tmp")
	if m.root == "" {
		dir = t.TempDir()
	} else if os.Geteuid() != 0 {
		t.Skipf("Magnum %s runs in the chroot %s, which needs root", m.release, m.root)
	}
	work, err := os.MkdirTemp(dir, "mcb-barbican-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(work) })
	var conf bytes.Buffer
	require.NoError(t, template.Must(template.New("conf").Parse(magnumConf)).Execute(&conf, target))
	require.NoError(t, os.WriteFile(filepath.Join(work, "magnum.conf"), conf.Bytes(), 0o600))
	script, err := os.ReadFile("testdata/magnum_certs.py")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(work, "magnum_certs.py"), script, 0o600))

	inside := strings.TrimPrefix(work, m.root)
	argv := append([]string{filepath.Join(inside, "magnum_certs.py"), filepath.Join(inside, "magnum.conf")}, args...)
	cmd := exec.Command(python, argv...)
	if m.root != "" {
		cmd = exec.Command("chroot", append([]string{m.root, "/usr/bin/python3"}, argv...)...)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "Magnum %s: magnum_certs.py %v:\n%s", m.release, args, stderr.String())
	out := map[string]any{}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	return out
}

// newCSR is a client's CSR, as `openstack coe cluster config` makes one.
func newCSR(t *testing.T, commonName, org string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: commonName, Organization: []string{org}}}, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func parseCert(t *testing.T, pemText string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(pemText))
	require.NotNil(t, block, "a PEM certificate: %q", pemText)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

// A CA that Magnum's conductor stored (its own _generate_ca_cert and cert manager) is read by the
// bridge, which signs a CSR with it; Magnum's delete_cert then removes it.
func TestMagnumStoredCAIsReadByTheBridge(t *testing.T) {
	for _, m := range magnumReleases {
		t.Run(m.release, func(t *testing.T) {
			b, kc, target := newBackend(t, m.dialect)
			ctx := context.Background()
			ref := m.run(t, target, "", "generate", "k8s-from-magnum")["ref"].(string)
			t.Cleanup(func() { _ = b.Delete(ctx, ref) })
			assert.True(t, strings.HasPrefix(ref, target.URL+"/v1/containers/"), ref)

			// The shape the bridge writes for this release is the one Magnum wrote.
			c, stored := container(t, kc, ref)
			assert.Equal(t, "k8s-from-magnum", c.Name)
			pemType := "application/octet-stream"
			if m.dialect.TextPEM {
				pemType = "text/plain"
			}
			assert.Equal(t, map[string][2]string{
				"certificate":            {"Certificate", pemType},
				"private_key":            {"Private Key", pemType},
				"private_key_passphrase": {"Private Key Passphrase", "text/plain"},
			}, stored)

			cluster := uuid.NewString()
			kp, err := b.LoadForCluster(ctx, ref, cluster)
			require.NoError(t, err)
			key, ca, err := certs.Decrypt(kp)
			require.NoError(t, err)
			require.NotNil(t, key)
			assert.Equal(t, "k8s-from-magnum", ca.Subject.CommonName)

			csr := newCSR(t, "someone", "a-group")
			signed, err := certs.Sign(kp, "k8s-from-magnum", csr, certs.SignOptions{})
			require.NoError(t, err)
			pool := x509.NewCertPool()
			pool.AddCert(ca)
			_, err = parseCert(t, signed).Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			require.NoError(t, err, "the bridge's signature chains to Magnum's CA")

			m.run(t, target, "", "delete", ref)
			_, err = b.Load(ctx, ref)
			require.ErrorIs(t, err, certs.ErrKeyPairNotFound, "Magnum's delete_cert removed what the bridge read")
		})
	}
}

// A CA the bridge stored is read by Magnum's conductor code: get_ca_certificate returns it and
// sign_certificate signs a CSR with its key and passphrase. Each release reads both shapes, so a
// cloud that upgrades Magnum keeps its CAs.
func TestBridgeStoredCAIsReadByMagnum(t *testing.T) {
	for _, m := range magnumReleases {
		for shape, d := range map[string]Dialect{"barbicanclient": DialectBarbicanClient, "openstacksdk": DialectOpenStackSDK} {
			t.Run(m.release+"/"+shape, func(t *testing.T) { magnumReadsBridgeCA(t, m, d) })
		}
	}
}

func magnumReadsBridgeCA(t *testing.T, m magnumPython, d Dialect) {
	b, kc, target := newBackend(t, d)
	ctx := context.Background()
	pki := generate(t, "k8s-from-bridge")
	ref, err := b.Store(ctx, pki.Issuer, pki.KubernetesCA.Stored, certs.Owner{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Delete(ctx, ref) })

	cluster := uuid.NewString()
	csr := newCSR(t, "kubernetes-admin", "system:masters")
	out := m.run(t, target, csr, "sign", cluster, pki.Issuer, ref)
	ca := parseCert(t, out["ca"].(string))
	assert.True(t, ca.Equal(pki.KubernetesCA.Certificate), "get_ca_certificate returns the bridge's CA")
	signed := parseCert(t, out["certificate"].(string))
	pool := x509.NewCertPool()
	pool.AddCert(pki.KubernetesCA.Certificate)
	_, err = signed.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	require.NoError(t, err, "Magnum signed with the bridge's CA key, decrypted with the stored passphrase")
	assert.Equal(t, "kubernetes-admin", signed.Subject.CommonName)

	c, _ := container(t, kc, ref)
	if m.dialect.RegisterConsumers {
		assert.Contains(t, c.Consumers, containers.ConsumerRef{Name: "Magnum", URL: cluster}, "Magnum %s registers itself on read", m.release)
	} else {
		assert.Empty(t, c.Consumers)
	}
}
