package certs

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pythonReadKeys is what other Python tooling does with our rows: magnum-api/capi-helm's
// decrypt_key (load_pem_private_key with the passphrase, then unencrypted PKCS#8), plus the CA
// checks Python ≥ 3.13 relies on.
const pythonReadKeys = `
import json, os
from cryptography import x509
from cryptography.hazmat.primitives import serialization
out = []
for i in range(int(os.environ["N"])):
    with open(os.environ["CERT%d" % i], "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    with open(os.environ["KEY%d" % i], "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=os.environ["PASS%d" % i].encode())
    same = key.public_key().public_numbers() == cert.public_key().public_numbers()
    pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode()
    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    ku = cert.extensions.get_extension_for_class(x509.KeyUsage)
    out.append({"matches": same, "pkcs8": pkcs8, "subject": cert.subject.rfc4514_string(),
                "ca": bc.value.ca, "bc_critical": bc.critical, "ku_critical": ku.critical,
                "key_cert_sign": ku.value.key_cert_sign, "crl_sign": ku.value.crl_sign,
                "digital_signature": ku.value.digital_signature})
print(json.dumps(out))
`

func TestPythonCryptographyReadsOurKeys(t *testing.T) {
	py := python3WithCryptography(t)
	pki := clusterPKI(t)
	dir := t.TempDir()
	creds := []Credential{pki.KubernetesCA, pki.EtcdCA, pki.FrontProxyCA, pki.MagnumClient}
	env := []string{fmt.Sprintf("N=%d", len(creds))}
	for i, c := range creds {
		env = append(env,
			"CERT"+fmt.Sprint(i)+"="+writeFile(t, dir, fmt.Sprintf("c%d.pem", i), []byte(c.Stored.Certificate)),
			"KEY"+fmt.Sprint(i)+"="+writeFile(t, dir, fmt.Sprintf("k%d.pem", i), []byte(c.Stored.PrivateKey)),
			"PASS"+fmt.Sprint(i)+"="+c.Stored.Passphrase)
	}
	var got []struct {
		Matches          bool   `json:"matches"`
		PKCS8            string `json:"pkcs8"`
		Subject          string `json:"subject"`
		CA               bool   `json:"ca"`
		BCCritical       bool   `json:"bc_critical"`
		KUCritical       bool   `json:"ku_critical"`
		KeyCertSign      bool   `json:"key_cert_sign"`
		CRLSign          bool   `json:"crl_sign"`
		DigitalSignature bool   `json:"digital_signature"`
	}
	runPython(t, py, pythonReadKeys, env, &got)
	require.Len(t, got, 4)

	secrets, err := pki.CAPISecrets("demo")
	require.NoError(t, err)
	for i, g := range got[:3] {
		assert.True(t, g.Matches, "CA %d: decrypted key matches its certificate", i)
		assert.Equal(t, "CN=k8s-demo", g.Subject)
		assert.True(t, g.CA && g.BCCritical && g.KUCritical, "CA %d basicConstraints/keyUsage", i)
		assert.True(t, g.KeyCertSign && g.CRLSign && g.DigitalSignature, "CA %d key usages", i)
		// capi-helm wrote decrypt_key's output into the CAPI secrets: ours are byte-identical.
		assert.Equal(t, g.PKCS8, string(secrets[i].Data["tls.key"]), "CA %d tls.key equals Python's decrypt_key", i)
	}
	client := got[3]
	assert.True(t, client.Matches)
	assert.Equal(t, "O=system:masters,CN=admin", client.Subject)
	assert.False(t, client.CA)
	assert.Equal(t, client.PKCS8, string(secrets[3].Data["tls.key"]), "SA key equals capi-helm's -sa tls.key")
}

func TestOpenSSLReadsOurKeysAndVerifiesChains(t *testing.T) {
	openssl := requireTool(t, "openssl", "openssl")
	pki := clusterPKI(t)
	dir := t.TempDir()

	for i, c := range []Credential{pki.KubernetesCA, pki.EtcdCA, pki.FrontProxyCA, pki.MagnumClient} {
		keyFile := writeFile(t, dir, fmt.Sprintf("k%d.pem", i), []byte(c.Stored.PrivateKey))
		cmd := exec.Command(openssl, "pkcs8", "-in", keyFile, "-passin", "env:KEYPASS")
		cmd.Env = append(os.Environ(), "KEYPASS="+c.Stored.Passphrase)
		out, err := cmd.Output()
		require.NoError(t, err, "openssl pkcs8 could not decrypt key %d", i)
		block, _ := pem.Decode(out)
		require.NotNil(t, block)
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		require.NoError(t, err)
		assert.True(t, publicKeysEqual(c.Certificate.PublicKey, key.(crypto.Signer).Public()), "key %d", i)
	}

	// -x509_strict is the OpenSSL mode Python ≥ 3.13 turns on by default (VERIFY_X509_STRICT).
	caFile := writeFile(t, dir, "ca.pem", []byte(pki.KubernetesCA.Stored.Certificate+"\n"))
	etcdFile := writeFile(t, dir, "etcd.pem", []byte(pki.EtcdCA.Stored.Certificate+"\n"))
	mc, _ := magnumclientCSR(t)
	tf, _ := terraformCSR(t)
	leaves := map[string]string{"magnum client cert": pki.MagnumClient.Stored.Certificate}
	for name, csr := range map[string]string{"magnumclient CSR": mc, "terraform CSR": tf} {
		// Real clock: openssl verify has no way to take ours.
		certPEM, err := Sign(pki.KubernetesCA.Stored, "k8s-demo", csr, SignOptions{})
		require.NoError(t, err)
		leaves[name] = certPEM
	}
	for name, certPEM := range leaves {
		leaf := writeFile(t, dir, strings.ReplaceAll(name, " ", "_")+".pem", []byte(certPEM+"\n"))
		out, err := exec.Command(openssl, "verify", "-x509_strict", "-purpose", "sslclient", "-CAfile", caFile, leaf).CombinedOutput()
		assert.NoError(t, err, "%s: %s", name, out)
		assert.Contains(t, string(out), ": OK", name)

		out, err = exec.Command(openssl, "verify", "-CAfile", etcdFile, leaf).CombinedOutput()
		assert.Error(t, err, "%s must not verify against the etcd CA: %s", name, out)
	}
}

// tlsPair builds a tls.Certificate from a PEM certificate and an unencrypted key PEM.
func tlsPair(t *testing.T, certPEM string, keyPEM []byte) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair([]byte(certPEM), keyPEM)
	require.NoError(t, err)
	return pair
}

// serverCertFor signs a kube-apiserver-like serving certificate for 127.0.0.1 with the CA.
func serverCertFor(t *testing.T, ca KeyPair) (string, []byte) {
	t.Helper()
	key := rsaKey(t, 2048)
	// subjectAltName and extendedKeyUsage are both in Magnum's allowed extensions.
	csr := makeCSR(t, csrSpec{key: key, rawSubject: mustUTF8Name(t, "kube-apiserver"), extensions: []pkix.Extension{
		sanExt(t, "localhost", net.ParseIP("127.0.0.1")),
		mustExt(t, asn1.ObjectIdentifier{2, 5, 29, 37}, false, []asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 1}}),
	}})
	certPEM, err := Sign(ca, "k8s-demo", csr, SignOptions{})
	require.NoError(t, err)
	keyPEM, err := encodePrivateKeyPEM(key)
	require.NoError(t, err)
	return certPEM, keyPEM
}

func mustUTF8Name(t *testing.T, cn string) []byte {
	t.Helper()
	n, err := utf8Name(attribute{oidCommonName, cn})
	require.NoError(t, err)
	return n
}

// apiserverLike starts a TLS server that, like kube-apiserver, requires client certificates
// issued by the cluster's Kubernetes CA and answers with the client's subject.
func apiserverLike(t *testing.T, pki *ClusterPKI) *httptest.Server {
	t.Helper()
	serverCert, serverKey := serverCertFor(t, pki.KubernetesCA.Stored)
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(pki.KubernetesCA.Certificate)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.TLS.PeerCertificates[0]
		fmt.Fprintf(w, "%s/%s", c.Subject.CommonName, strings.Join(c.Subject.Organization, ","))
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{tlsPair(t, serverCert, serverKey)},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
		MinVersion:   tls.VersionTLS12,
	}
	// Refused handshakes are expected in these tests; keep them out of the output.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestTLSHandshakeWithSignedClientCert(t *testing.T) {
	pki := clusterPKI(t)
	srv := apiserverLike(t, pki)
	roots := x509.NewCertPool()
	roots.AddCert(pki.KubernetesCA.Certificate) // certificate-authority-data of the kubeconfig

	get := func(clientCert tls.Certificate) (string, error) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12,
		}}}
		resp, err := client.Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}

	for name, csrFn := range map[string]func(testing.TB) (string, crypto.Signer){
		"magnumclient": magnumclientCSR, "terraform": terraformCSR,
	} {
		t.Run(name, func(t *testing.T) {
			csr, key := csrFn(t)
			certPEM, err := Sign(pki.KubernetesCA.Stored, "k8s-demo", csr, SignOptions{})
			require.NoError(t, err)
			keyPEM, err := encodePrivateKeyPEM(key)
			require.NoError(t, err)
			body, err := get(tlsPair(t, certPEM, keyPEM))
			require.NoError(t, err)
			assert.Equal(t, "admin/system:masters", body)
		})
	}

	t.Run("certificate of another CA is refused", func(t *testing.T) {
		csr, key := magnumclientCSR(t)
		certPEM, err := Sign(pki.EtcdCA.Stored, "k8s-demo", csr, SignOptions{})
		require.NoError(t, err)
		keyPEM, err := encodePrivateKeyPEM(key)
		require.NoError(t, err)
		_, err = get(tlsPair(t, certPEM, keyPEM))
		require.Error(t, err, "the etcd CA has the same subject but must not be trusted for clients")
	})
}

// pythonStrictClient connects like a Python ≥ 3.13 Kubernetes client: default context with
// VERIFY_X509_STRICT (and PARTIAL_CHAIN), our CA as the only trust anchor, our signed client cert.
const pythonStrictClient = `
import json, os, ssl, http.client
ctx = ssl.create_default_context(cafile=os.environ["CA"])
ctx.verify_flags |= ssl.VERIFY_X509_STRICT | ssl.VERIFY_X509_PARTIAL_CHAIN
ctx.load_cert_chain(os.environ["CERT"], os.environ["KEY"])
conn = http.client.HTTPSConnection("127.0.0.1", int(os.environ["PORT"]), context=ctx, timeout=10)
conn.request("GET", "/")
resp = conn.getresponse()
print(json.dumps({"status": resp.status, "body": resp.read().decode()}))
`

func TestPythonStrictTLSClientTrustsOurCA(t *testing.T) {
	py := python3WithCryptography(t)
	pki := clusterPKI(t)
	srv := apiserverLike(t, pki)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)

	dir := t.TempDir()
	csr, key := magnumclientCSR(t)
	certPEM, err := Sign(pki.KubernetesCA.Stored, "k8s-demo", csr, SignOptions{})
	require.NoError(t, err)
	keyPEM, err := encodePrivateKeyPEM(key)
	require.NoError(t, err)
	env := []string{
		"CA=" + writeFile(t, dir, "ca.pem", []byte(pki.KubernetesCA.Stored.Certificate+"\n")),
		"CERT=" + writeFile(t, dir, "cert.pem", []byte(certPEM+"\n")),
		"KEY=" + writeFile(t, dir, "key.pem", keyPEM),
		"PORT=" + port,
	}
	var got struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	runPython(t, py, pythonStrictClient, env, &got)
	assert.Equal(t, 200, got.Status)
	assert.Equal(t, "admin/system:masters", got.Body)
}
