package certs

import (
	"bufio"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// fakeBackend is an in-memory Backend for unit tests (production uses the x509keypair table).
type fakeBackend struct {
	mu     sync.Mutex
	rows   map[string]fakeRow
	stores int
	// clusters are the cluster rows' refs (StoreClusterSet); a cluster must be here to get a set.
	clusters map[string]Refs
	// failStoreAt makes the n-th Store call (1-based) fail; failDelete makes Delete of that ref fail.
	failStoreAt int
	failDelete  string
}

type fakeRow struct {
	name  string
	kp    KeyPair
	owner Owner
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{rows: map[string]fakeRow{}, clusters: map[string]Refs{}}
}

// StoreClusterSet implements ClusterSetStore under the backend's lock (its transaction).
func (b *fakeBackend) StoreClusterSet(_ context.Context, cluster string, pki *ClusterPKI, owner Owner) (Refs, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.clusters[cluster]; !ok {
		return Refs{}, false, fmt.Errorf("cluster %s not found", cluster)
	}
	refs := ClusterRefs(cluster)
	set := []struct {
		ref, name string
		kp        KeyPair
	}{
		{refs.CACertRef, pki.Issuer, pki.KubernetesCA.Stored}, {refs.EtcdCACertRef, pki.Issuer, pki.EtcdCA.Stored},
		{refs.FrontProxyCACertRef, pki.Issuer, pki.FrontProxyCA.Stored}, {refs.MagnumCertRef, ClientCertName, pki.MagnumClient.Stored},
	}
	present := 0
	for _, it := range set {
		if _, ok := b.rows[it.ref]; ok {
			present++
		}
	}
	b.clusters[cluster] = refs
	if present == len(set) {
		return refs, false, nil
	}
	for _, it := range set {
		b.rows[it.ref] = fakeRow{it.name, it.kp, owner}
	}
	return refs, true, nil
}

func (b *fakeBackend) Store(_ context.Context, name string, kp KeyPair, owner Owner) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stores++
	if b.stores == b.failStoreAt {
		return "", errors.New("injected store failure")
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	ref := hex.EncodeToString(id[:])
	b.rows[ref] = fakeRow{name, kp, owner}
	return ref, nil
}

func (b *fakeBackend) Load(_ context.Context, ref string) (KeyPair, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	row, ok := b.rows[ref]
	if !ok {
		return KeyPair{}, fmt.Errorf("x509keypair %s: %w", ref, ErrKeyPairNotFound)
	}
	return row.kp, nil
}

func (b *fakeBackend) Delete(_ context.Context, ref string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ref == b.failDelete {
		return errors.New("injected delete failure")
	}
	if _, ok := b.rows[ref]; !ok {
		return fmt.Errorf("x509keypair %s: %w", ref, ErrKeyPairNotFound)
	}
	delete(b.rows, ref)
	return nil
}

func (b *fakeBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.rows)
}

// put stores a row under a given ref (used to load fixtures written by Python Magnum).
func (b *fakeBackend) put(ref string, kp KeyPair) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rows[ref] = fakeRow{kp: kp}
}

// testNow is a fixed clock so validity assertions are exact.
var testNow = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

var (
	sharedPKIOnce sync.Once
	sharedPKI     *ClusterPKI
	sharedPKIErr  error
)

// clusterPKI is one generated cluster shared by the tests that only read it (key generation is
// the slow part).
func clusterPKI(t testing.TB) *ClusterPKI {
	t.Helper()
	sharedPKIOnce.Do(func() {
		sharedPKI, sharedPKIErr = GenerateClusterWithOptions("k8s-demo", GenerateOptions{Now: testNow})
	})
	require.NoError(t, sharedPKIErr)
	return sharedPKI
}

var (
	rsaKeysMu sync.Mutex
	rsaKeys   = map[int]*rsa.PrivateKey{}
)

// rsaKey returns a cached RSA key of the given size (a 4096-bit key takes seconds to make).
func rsaKey(t testing.TB, bits int) *rsa.PrivateKey {
	t.Helper()
	rsaKeysMu.Lock()
	defer rsaKeysMu.Unlock()
	if k, ok := rsaKeys[bits]; ok {
		return k
	}
	k, err := rsa.GenerateKey(rand.Reader, bits)
	require.NoError(t, err)
	rsaKeys[bits] = k
	return k
}

type csrSpec struct {
	key        crypto.Signer
	rawSubject []byte    // takes precedence over subject
	subject    pkix.Name // Go's encoding (PrintableString), like Terraform's gophercloud
	sigAlg     x509.SignatureAlgorithm
	extensions []pkix.Extension
}

func makeCSR(t testing.TB, s csrSpec) string {
	t.Helper()
	tmpl := &x509.CertificateRequest{
		RawSubject:         s.rawSubject,
		Subject:            s.subject,
		SignatureAlgorithm: s.sigAlg,
		ExtraExtensions:    s.extensions,
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, s.key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

// magnumclientCSR is what `openstack coe cluster config` sends: RSA 2048, SHA-256,
// CN=admin, O=system:masters as UTF8Strings (python-cryptography's default encoding).
func magnumclientCSR(t testing.TB) (string, crypto.Signer) {
	t.Helper()
	key := rsaKey(t, 2048)
	subject, err := utf8Name(attribute{oidCommonName, "admin"}, attribute{oidOrganization, "system:masters"})
	require.NoError(t, err)
	return makeCSR(t, csrSpec{key: key, rawSubject: subject, sigAlg: x509.SHA256WithRSA}), key
}

// terraformCSR is what terraform-provider-openstack sends: RSA 4096, SHA-512,
// CN=admin, O=system:masters, OU=terraform (Go's pkix encoding).
func terraformCSR(t testing.TB) (string, crypto.Signer) {
	t.Helper()
	key := rsaKey(t, 4096)
	return makeCSR(t, csrSpec{
		key:     key,
		subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}, OrganizationalUnit: []string{"terraform"}},
		sigAlg:  x509.SHA512WithRSA,
	}), key
}

func parseCertPEM(t testing.TB, s string) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode([]byte(s))
	require.NotNil(t, block, "no PEM block in %q", s)
	require.Equal(t, "CERTIFICATE", block.Type)
	require.Empty(t, strings.TrimSpace(string(rest)))
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

func extensionIDs(cert *x509.Certificate) []string {
	var ids []string
	for _, e := range cert.Extensions {
		ids = append(ids, e.Id.String())
	}
	return ids
}

func findExtension(cert *x509.Certificate, oid string) (pkix.Extension, bool) {
	for _, e := range cert.Extensions {
		if e.Id.String() == oid {
			return e, true
		}
	}
	return pkix.Extension{}, false
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// requireTool returns the path of an external program the interoperability tests need, failing
// with an actionable message when it is missing.
func requireTool(t testing.TB, name, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found in PATH; it is needed to prove interoperability (Debian: apt-get install %s)", name, debianPackage)
	}
	return p
}

// python3WithCryptography returns a python3 that can import python-cryptography.
func python3WithCryptography(t testing.TB) string {
	t.Helper()
	py := requireTool(t, "python3", "python3")
	out, err := exec.Command(py, "-c", "import cryptography; print(cryptography.__version__)").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import cryptography (%v: %s); install it (Debian: apt-get install python3-cryptography)", py, err, strings.TrimSpace(string(out)))
	}
	t.Logf("using %s with cryptography %s", py, strings.TrimSpace(string(out)))
	return py
}

// runPython runs script with env (KEY=VALUE) and decodes the JSON it prints.
func runPython(t testing.TB, py, script string, env []string, out any) {
	t.Helper()
	cmd := exec.Command(py, "-c", script)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("python failed: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("python failed: %v", err)
	}
	require.NoError(t, json.Unmarshal(stdout, out), "python output: %s", stdout)
}

// --- Fixtures written by Python Magnum (mysql \G dumps under shared/fixtures/magnum-*/db) ---

type dumpRow map[string]string

var (
	dumpSection = regexp.MustCompile(`^## (\w+)\s*$`)
	dumpRowHdr  = regexp.MustCompile(`^\*+ \d+\. row \*+$`)
	dumpField   = regexp.MustCompile(`^\s*([a-z_0-9]+): (.*)$`)
)

// parseDump reads the "## table" sections of a fixture dump into rows of column → value
// (NULL → ""). Multi-line values (PEM) continue on lines that are not "column: value".
func parseDump(t testing.TB, path string) map[string][]dumpRow {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	tables := map[string][]dumpRow{}
	var (
		table   string
		row     dumpRow
		lastKey string
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case dumpSection.MatchString(line):
			table = dumpSection.FindStringSubmatch(line)[1]
			row, lastKey = nil, ""
		case table == "":
		case dumpRowHdr.MatchString(line):
			row = dumpRow{}
			tables[table] = append(tables[table], row)
			lastKey = ""
		case row != nil && dumpField.MatchString(line):
			m := dumpField.FindStringSubmatch(line)
			lastKey = m[1]
			if m[2] == "NULL" {
				row[lastKey] = ""
			} else {
				row[lastKey] = m[2]
			}
		case row != nil && lastKey != "":
			row[lastKey] += "\n" + line
		}
	}
	require.NoError(t, sc.Err())
	return tables
}

// pythonCluster is one cluster of a fixture dump with its four x509keypair rows loaded into a
// fakeBackend under their real uuids, plus the CSR and reply of the captured sign_certificate.
type pythonCluster struct {
	name       string
	refs       Refs
	backend    *fakeBackend
	csr        string
	pythonPEM  string
	keypairRow map[string]dumpRow
}

func loadPythonCluster(t testing.TB, version string) pythonCluster {
	t.Helper()
	base := filepath.Join(testutil.SharedDir(t), "fixtures", version)
	tables := parseDump(t, filepath.Join(base, "db", "ca_sign_with_reply_probe.txt"))
	require.Len(t, tables["cluster"], 1)
	cl := tables["cluster"][0]
	pc := pythonCluster{
		name: cl["name"],
		refs: Refs{
			CACertRef:           cl["ca_cert_ref"],
			EtcdCACertRef:       cl["etcd_ca_cert_ref"],
			FrontProxyCACertRef: cl["front_proxy_ca_cert_ref"],
			MagnumCertRef:       cl["magnum_cert_ref"],
		},
		backend:    newFakeBackend(),
		keypairRow: map[string]dumpRow{},
	}
	require.Len(t, tables["x509keypair"], 4)
	for _, r := range tables["x509keypair"] {
		pc.keypairRow[r["uuid"]] = r
		pc.backend.put(r["uuid"], KeyPair{
			Certificate:   r["certificate"],
			PrivateKey:    r["private_key"],
			Intermediates: r["intermediates"],
			Passphrase:    r["private_key_passphrase"],
		})
	}
	raw, err := os.ReadFile(filepath.Join(base, "trace", "ca_sign_with_reply_probe.REPLY.decoded.json"))
	require.NoError(t, err)
	var reply struct {
		Msg struct {
			Result struct {
				Data struct {
					CSR string `json:"csr"`
					PEM string `json:"pem"`
				} `json:"magnum_object.data"`
			} `json:"result"`
		} `json:"oslo.message"`
	}
	require.NoError(t, json.Unmarshal(raw, &reply))
	pc.csr, pc.pythonPEM = reply.Msg.Result.Data.CSR, reply.Msg.Result.Data.PEM
	require.NotEmpty(t, pc.csr)
	require.NotEmpty(t, pc.pythonPEM)
	return pc
}
