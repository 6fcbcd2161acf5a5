package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/barbican"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestBarbicanCertificates runs a cluster's life with its certificates in Barbican: the Magnum 23
// instance's bridge restarted with cert_manager_type = barbican (held alone, newestBridge; magnum-api
// itself keeps no certificate). The cluster's refs are Barbican container hrefs whose secrets hold the
// CA `coe ca show` returns; `coe cluster config` gives a kubeconfig that lists the nodes; `coe ca sign`
// signs with that CA; a delete removes what Magnum removes (the CA and the client certificate) and
// keeps the etcd and front-proxy CAs.
func TestBarbicanCertificates(t *testing.T) {
	requireNewest(t)
	t.Parallel()
	t.Cleanup(newestBridge.hold(t, true)) // registered first: released after the bridge is restored
	// Barbican's service project alone (the integration tests compare what it holds), and stopped below.
	testutil.HoldBarbican(t)
	logPath := filepath.Join(logDir, "bridge-newest.log")
	logFrom := fileSize(t, logPath)
	bridgeUp := func(extra string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(repoRoot(t), "deploy/local/bridge-up.sh"), "newest")
		cmd.Env = append(os.Environ(), "BRIDGE_EXTRA_CONFIG="+extra)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	t.Cleanup(func() { bridgeUp("") })
	// bridge-up.sh appends these lines to the bridge's own file, read after magnum.conf.
	bridgeUp("[certificates]\ncert_manager_type = barbican")
	conf, err := config.Load(filepath.Join(newestRoot, "etc/magnum/magnum.conf"), filepath.Join(testutil.Env("MCB_ETC_DIR", "/etc/magnum-capi-bridge"), "bridge-newest.conf"))
	require.NoError(t, err)
	require.Equal(t, "barbican", conf.String("certificates", "cert_manager_type", ""))
	ctx := context.Background()
	store := magnumStore(t, conf)
	service, err := keystone.ServiceAuthFromConfig(conf)
	require.NoError(t, err)
	vault := barbican.New(barbican.Options{Service: service, Region: conf.String("barbican_client", "region_name", ""),
		Dialect: barbican.DialectOpenStackSDK})
	endpoint, err := vault.Endpoint(ctx)
	require.NoError(t, err)

	const cloud = cloudNewest
	tmpl := createTemplate(t, cloud)
	id := createCluster(t, cloud, tmpl, "bbq-"+testutil.RandomHex(3), "--node-count", "1")
	waitStatus(t, cloud, id, 6*time.Minute, "CREATE_COMPLETE")

	row, err := store.GetCluster(ctx, id)
	require.NoError(t, err)
	refs := map[string]*string{"ca_cert_ref": row.CACertRef, "etcd_ca_cert_ref": row.EtcdCACertRef,
		"front_proxy_ca_cert_ref": row.FrontProxyCACertRef, "magnum_cert_ref": row.MagnumCertRef}
	for column, ref := range refs {
		require.NotNil(t, ref, column)
		require.True(t, strings.HasPrefix(*ref, strings.TrimSuffix(endpoint, "/")+"/v1/containers/"), "%s = %s", column, *ref)
	}
	stored, err := vault.Load(ctx, *row.CACertRef)
	require.NoError(t, err)
	_, ca, err := certs.Decrypt(stored)
	require.NoError(t, err, "the container holds the CA with its key and passphrase")
	shown := mustOpenstack(t, cloud, "coe", "ca", "show", id)
	assert.Equal(t, strings.TrimSpace(stored.Certificate), strings.TrimSpace(shown), "coe ca show returns the CA in Barbican")

	host, forCLI := cliFor(cloud).tempDir(t)
	mustOpenstack(t, cloud, "coe", "cluster", "config", id, "--dir", forCLI, "--force")
	out, err := kubectl(t, filepath.Join(host, "config"), "get", "nodes", "-o", "name")
	require.NoError(t, err, out)
	assert.Len(t, strings.Fields(out), 2, out)

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "e2e-barbican"}}, key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(host, "client.csr"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), 0o644))
	signed := mustOpenstack(t, cloud, "coe", "ca", "sign", id, filepath.Join(forCLI, "client.csr"))
	start := strings.Index(signed, "-----BEGIN CERTIFICATE-----")
	require.GreaterOrEqual(t, start, 0, signed)
	block, _ := pem.Decode([]byte(signed[start:]))
	require.NotNil(t, block, signed)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	require.NoError(t, err, "coe ca sign signs with the CA in Barbican")

	// Barbican stopped: `coe ca sign` is refused naming it; a create writes nothing and waits, and
	// ends once Barbican is back; one whose deadline passes meanwhile fails naming Barbican.
	runScript(t, "deploy/local/openstack/barbican.sh", "stop")
	stopped := true
	t.Cleanup(func() {
		if stopped {
			runScript(t, "deploy/local/openstack/barbican.sh", "start")
		}
	})
	_, err = openstack(t, cloud, "coe", "ca", "sign", id, filepath.Join(forCLI, "client.csr"))
	require.Error(t, err, "ca sign without Barbican")
	assert.Contains(t, err.Error(), "Barbican", "the failure reply names the key manager")
	waiting := createCluster(t, cloud, tmpl, "bbq-wait-"+testutil.RandomHex(3), "--node-count", "1")
	late := createCluster(t, cloud, tmpl, "bbq-late-"+testutil.RandomHex(3), "--node-count", "1", "--timeout", "1")
	failed := waitStatus(t, cloud, late, 4*time.Minute, "CREATE_FAILED")
	assert.Contains(t, failed.StatusReason, "Barbican", "the reason names the key manager")
	for _, c := range []string{waiting, late} {
		row, err := store.GetCluster(ctx, c)
		require.NoError(t, err)
		assert.Nil(t, row.CACertRef, "nothing stored for %s while Barbican is down", c)
		assert.Nil(t, row.MagnumCertRef, "nothing stored for %s while Barbican is down", c)
	}
	waited, err := showCluster(t, cloud, waiting)
	require.NoError(t, err)
	assert.Equal(t, "CREATE_IN_PROGRESS", waited.Status, "the create waits for Barbican")
	runScript(t, "deploy/local/openstack/barbican.sh", "start")
	stopped = false
	waitStatus(t, cloud, waiting, 6*time.Minute, "CREATE_COMPLETE")
	row, err = store.GetCluster(ctx, waiting)
	require.NoError(t, err)
	require.NotNil(t, row.CACertRef)
	_, err = vault.Load(ctx, *row.CACertRef)
	require.NoError(t, err, "the create that waited stored its CA in Barbican")

	mustOpenstack(t, cloud, "coe", "cluster", "delete", id)
	waitGone(t, cloud, id, 4*time.Minute)
	for _, column := range []string{"ca_cert_ref", "magnum_cert_ref"} {
		_, err := vault.Load(ctx, *refs[column])
		assert.ErrorIs(t, err, certs.ErrKeyPairNotFound, "%s deleted, as Magnum deletes it", column)
	}
	for _, column := range []string{"etcd_ca_cert_ref", "front_proxy_ca_cert_ref"} {
		_, err := vault.Load(ctx, *refs[column])
		assert.NoError(t, err, "%s kept, as Magnum keeps it", column)
		require.NoError(t, vault.Delete(ctx, *refs[column]))
	}

	// No certificate, key or passphrase of these clusters in the bridge's log.
	logged := readFrom(t, logPath, logFrom)
	for _, marker := range []string{"PRIVATE KEY", "BEGIN CERTIFICATE", strings.TrimSpace(stored.Certificate)} {
		assert.NotContains(t, logged, marker, "the bridge's log")
	}
	if stored.Passphrase != "" {
		assert.NotContains(t, logged, stored.Passphrase, "the bridge's log holds a passphrase")
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}

// readFrom is what path holds from offset on.
func readFrom(t *testing.T, path string, offset int64) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(offset, io.SeekStart)
	require.NoError(t, err)
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return string(b)
}
