package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func signOpts() SignOptions { return SignOptions{Now: testNow} }

func TestSignMagnumclientCSR(t *testing.T) {
	pki := clusterPKI(t)
	csrPEM, key := magnumclientCSR(t)
	certPEM, err := Sign(pki.KubernetesCA.Stored, "k8s-demo", csrPEM, signOpts())
	require.NoError(t, err)
	assert.False(t, strings.HasSuffix(certPEM, "\n"), "PEM is returned stripped, like Magnum")

	c := parseCertPEM(t, certPEM)
	csr := parseCSRForTest(t, csrPEM)
	assert.Equal(t, csr.RawSubject, c.RawSubject, "subject copied byte for byte")
	assert.Equal(t, pki.KubernetesCA.Certificate.RawSubject, c.RawIssuer, "issuer bytes are the CA's subject bytes")
	assert.True(t, publicKeysEqual(key.Public(), c.PublicKey))
	assert.Equal(t, x509.SHA256WithRSA, c.SignatureAlgorithm)
	assert.Equal(t, testNow.Add(-24*time.Hour), c.NotBefore)
	assert.Equal(t, testNow.AddDate(0, 0, 1825), c.NotAfter)
	assert.True(t, c.SerialNumber.Sign() > 0)
	assert.LessOrEqual(t, c.SerialNumber.BitLen(), 128)
	assert.False(t, c.IsCA)
	// The CSR has no extensions, so like Magnum ≥ 21 the certificate only gets key identifiers.
	assert.ElementsMatch(t, []string{oidSKI, oidAKI}, extensionIDs(c))
	assert.Equal(t, sha1KeyID(t, c), c.SubjectKeyId)
	assert.Equal(t, pki.KubernetesCA.Certificate.SubjectKeyId, c.AuthorityKeyId)
	verifyClientCert(t, c, pki.KubernetesCA.Certificate)
}

func TestSignTerraformCSR(t *testing.T) {
	pki := clusterPKI(t)
	csrPEM, _ := terraformCSR(t)
	csr := parseCSRForTest(t, csrPEM)
	require.Equal(t, x509.SHA512WithRSA, csr.SignatureAlgorithm)

	certPEM, err := Sign(pki.KubernetesCA.Stored, "k8s-demo", csrPEM, signOpts())
	require.NoError(t, err)
	c := parseCertPEM(t, certPEM)
	assert.Equal(t, x509.SHA256WithRSA, c.SignatureAlgorithm, "always SHA-256, whatever the CSR used")
	assert.Equal(t, csr.RawSubject, c.RawSubject)
	assert.Equal(t, "admin", c.Subject.CommonName)
	assert.Equal(t, []string{"system:masters"}, c.Subject.Organization)
	assert.Equal(t, []string{"terraform"}, c.Subject.OrganizationalUnit)
	assert.Equal(t, 4096, c.PublicKey.(interface{ Size() int }).Size()*8)
	verifyClientCert(t, c, pki.KubernetesCA.Certificate)
}

func TestSignWithEtcdAndFrontProxyCAs(t *testing.T) {
	pki := clusterPKI(t)
	csrPEM, _ := magnumclientCSR(t)
	for _, ca := range []Credential{pki.EtcdCA, pki.FrontProxyCA} {
		certPEM, err := Sign(ca.Stored, "k8s-demo", csrPEM, signOpts())
		require.NoError(t, err)
		c := parseCertPEM(t, certPEM)
		verifyClientCert(t, c, ca.Certificate)
		assert.Equal(t, ca.Certificate.SubjectKeyId, c.AuthorityKeyId)
	}
}

func TestSignECDSACSR(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	csrPEM := makeCSR(t, csrSpec{key: key, subject: pkix.Name{CommonName: "ec-user"}})
	certPEM, err := Sign(clusterPKI(t).KubernetesCA.Stored, "k8s-demo", csrPEM, signOpts())
	require.NoError(t, err)
	c := parseCertPEM(t, certPEM)
	assert.Equal(t, x509.SHA256WithRSA, c.SignatureAlgorithm)
	assert.Equal(t, x509.ECDSA, c.PublicKeyAlgorithm)
	verifyClientCert(t, c, clusterPKI(t).KubernetesCA.Certificate)
}

func mustExt(t *testing.T, oid asn1.ObjectIdentifier, critical bool, value any) pkix.Extension {
	t.Helper()
	der, err := asn1.Marshal(value)
	require.NoError(t, err)
	return pkix.Extension{Id: oid, Critical: critical, Value: der}
}

func keyUsageExt(t *testing.T, critical bool, usage x509.KeyUsage) pkix.Extension {
	t.Helper()
	der, err := marshalKeyUsage(usage)
	require.NoError(t, err)
	return pkix.Extension{Id: oidExtKeyUsage, Critical: critical, Value: der}
}

type basicConstraints struct {
	IsCA       bool `asn1:"optional"`
	MaxPathLen int  `asn1:"optional,default:-1"`
}

var oidCertificatePolicies = asn1.ObjectIdentifier{2, 5, 29, 32}

func TestSignFiltersExtensionsLikeMagnum(t *testing.T) {
	pki := clusterPKI(t)
	key := rsaKey(t, 2048)
	foreignSKI := mustExt(t, oidExtSubjectKeyID, false, []byte{1, 2, 3, 4})
	policies := mustExt(t, oidCertificatePolicies, false, []asn1.ObjectIdentifier{{2, 5, 29, 32, 0}})
	csrPEM := makeCSR(t, csrSpec{
		key:     key,
		subject: pkix.Name{CommonName: "filtered"},
		sigAlg:  x509.SHA256WithRSA,
		extensions: []pkix.Extension{
			// digitalSignature is allowed; keyCertSign is a CA usage; dataEncipherment is not in
			// the default list. Non-critical, so the disallowed ones are silently removed.
			keyUsageExt(t, false, x509.KeyUsageDigitalSignature|x509.KeyUsageCertSign|x509.KeyUsageDataEncipherment),
			mustExt(t, oidExtBasicConstraints, false, basicConstraints{IsCA: true, MaxPathLen: 3}),
			mustExt(t, asn1.ObjectIdentifier{2, 5, 29, 37}, false, []asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 2}}),
			policies, // not allowed, not critical → dropped
			foreignSKI,
		},
	})
	// subjectAltName is allowed and copied as requested.
	csrWithSAN := makeCSR(t, csrSpec{key: key, subject: pkix.Name{CommonName: "san"}, sigAlg: x509.SHA256WithRSA,
		extensions: []pkix.Extension{sanExt(t, "admin.example", net.ParseIP("127.0.0.1"))}})

	certPEM, err := Sign(pki.KubernetesCA.Stored, "k8s-demo", csrPEM, signOpts())
	require.NoError(t, err)
	c := parseCertPEM(t, certPEM)
	assert.Equal(t, x509.KeyUsageDigitalSignature, c.KeyUsage, "CA and disallowed usages removed")
	ku, _ := findExtension(c, oidKeyUsageExt)
	assert.False(t, ku.Critical, "criticality copied from the CSR")
	assert.False(t, c.IsCA, "CA:TRUE downgraded")
	bc, ok := findExtension(c, oidBasicConstraints)
	require.True(t, ok)
	assert.False(t, bc.Critical)
	assert.Equal(t, []byte{0x30, 0x00}, bc.Value, "CA:FALSE without a path length")
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, c.ExtKeyUsage)
	_, hasPolicies := findExtension(c, oidCertificatePolicies.String())
	assert.False(t, hasPolicies, "disallowed extension dropped")
	assert.Equal(t, sha1KeyID(t, c), c.SubjectKeyId, "the CSR's own SKI is replaced")
	assert.ElementsMatch(t, []string{oidKeyUsageExt, oidBasicConstraints, oidEKU, oidSKI, oidAKI}, extensionIDs(c))
	verifyClientCert(t, c, pki.KubernetesCA.Certificate)

	sanPEM, err := Sign(pki.KubernetesCA.Stored, "k8s-demo", csrWithSAN, signOpts())
	require.NoError(t, err)
	sc := parseCertPEM(t, sanPEM)
	assert.Equal(t, []string{"admin.example"}, sc.DNSNames)
	require.Len(t, sc.IPAddresses, 1)
	assert.True(t, sc.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")))
}

func sanExt(t *testing.T, dns string, ip net.IP) pkix.Extension {
	t.Helper()
	raw := []asn1.RawValue{
		{Class: asn1.ClassContextSpecific, Tag: 2, Bytes: []byte(dns)},
		{Class: asn1.ClassContextSpecific, Tag: 7, Bytes: ip.To4()},
	}
	return mustExt(t, asn1.ObjectIdentifier{2, 5, 29, 17}, false, raw)
}

func TestSignRefusesWhatMagnumRefuses(t *testing.T) {
	pki := clusterPKI(t)
	key := rsaKey(t, 2048)
	cases := map[string]struct {
		ext       pkix.Extension
		extension string
	}{
		"critical disallowed extension": {
			mustExt(t, oidCertificatePolicies, true, []asn1.ObjectIdentifier{{2, 5, 29, 32, 0}}), "certificatePolicies"},
		"critical unknown extension": {
			pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 99999, 1}, Critical: true, Value: []byte{0x05, 0x00}}, "1.3.6.1.4.1.99999.1"},
		"critical CA:TRUE": {
			mustExt(t, oidExtBasicConstraints, true, basicConstraints{IsCA: true, MaxPathLen: -1}), "basicConstraints"},
		"critical keyUsage asking keyCertSign": {
			keyUsageExt(t, true, x509.KeyUsageDigitalSignature|x509.KeyUsageCertSign), "keyUsage"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			csrPEM := makeCSR(t, csrSpec{key: key, subject: pkix.Name{CommonName: "x"}, extensions: []pkix.Extension{tc.ext}})
			_, err := Sign(pki.KubernetesCA.Stored, "k8s-demo", csrPEM, signOpts())
			require.ErrorIs(t, err, ErrCertificateValidation)
			var cve *CertificateValidationError
			require.ErrorAs(t, err, &cve)
			assert.Equal(t, tc.extension, cve.Extension)
			assert.Contains(t, err.Error(), "Extension '"+tc.extension+"' not allowed")
		})
	}
}

func TestSignAllowCAOption(t *testing.T) {
	pki := clusterPKI(t)
	csrPEM := makeCSR(t, csrSpec{key: rsaKey(t, 2048), subject: pkix.Name{CommonName: "sub-ca"}, extensions: []pkix.Extension{
		mustExt(t, oidExtBasicConstraints, true, basicConstraints{IsCA: true, MaxPathLen: -1}),
		keyUsageExt(t, true, x509.KeyUsageCertSign),
	}})
	opts := signOpts()
	opts.AllowCA = true
	opts.AllowedKeyUsage = append([]string{"Certificate Sign"}, DefaultAllowedKeyUsage...)
	certPEM, err := Sign(pki.KubernetesCA.Stored, "k8s-demo", csrPEM, opts)
	require.NoError(t, err)
	c := parseCertPEM(t, certPEM)
	assert.True(t, c.IsCA)
	assert.Equal(t, x509.KeyUsageCertSign, c.KeyUsage)

	// With no extension allowed at all, everything non-critical is dropped and the critical
	// basicConstraints is refused.
	none := signOpts()
	none.AllowedExtensions = []string{}
	_, err = Sign(pki.KubernetesCA.Stored, "k8s-demo", csrPEM, none)
	require.ErrorIs(t, err, ErrCertificateValidation)
}

func TestSignValidityOption(t *testing.T) {
	csrPEM, _ := magnumclientCSR(t)
	opts := signOpts()
	opts.ValidityDays = 30
	certPEM, err := Sign(clusterPKI(t).KubernetesCA.Stored, "k8s-demo", csrPEM, opts)
	require.NoError(t, err)
	assert.Equal(t, testNow.AddDate(0, 0, 30), parseCertPEM(t, certPEM).NotAfter)

	opts.AllowedKeyUsage = []string{"Sign Everything"}
	_, err = Sign(clusterPKI(t).KubernetesCA.Stored, "k8s-demo", csrPEM, opts)
	assert.ErrorContains(t, err, "unknown x509 key usage")
}

func TestSignInvalidCSR(t *testing.T) {
	pki := clusterPKI(t)
	good, _ := magnumclientCSR(t)
	block, _ := pem.Decode([]byte(good))
	tampered := append([]byte(nil), block.Bytes...)
	tampered[len(tampered)-5] ^= 0xff // inside the signature
	wrongKeySig := resignWithOtherKey(t, block.Bytes)

	cases := map[string]string{
		"empty":           "",
		"garbage":         "this is not a CSR",
		"certificate PEM": pki.KubernetesCA.Stored.Certificate,
		"random DER":      string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x01}})),
		"bad signature":   string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered})),
		"wrong key sig":   wrongKeySig,
		"truncated PEM":   good[:len(good)/2],
		"huge":            "-----BEGIN CERTIFICATE REQUEST-----\n" + strings.Repeat("A", 70_000) + "\n-----END CERTIFICATE REQUEST-----\n",
	}
	for name, csr := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Sign(pki.KubernetesCA.Stored, "k8s-demo", csr, signOpts())
			require.ErrorIs(t, err, ErrInvalidCSR)
			var ice *InvalidCSRError
			require.ErrorAs(t, err, &ice)
			assert.NotEmpty(t, ice.Reason)
			assert.True(t, strings.HasPrefix(err.Error(), "invalid certificate signing request: "), err.Error())
		})
	}
}

// signedRequest is the outer PKCS#10 structure: body, algorithm, signature.
type signedRequest struct {
	TBS       asn1.RawValue
	Algorithm pkix.AlgorithmIdentifier
	Signature asn1.BitString
}

// resignWithOtherKey keeps the CSR body (and its public key) but takes the signature of another
// request made with a different key, so the request parses but its proof of possession fails.
func resignWithOtherKey(t *testing.T, der []byte) string {
	t.Helper()
	var csr, other signedRequest
	_, err := asn1.Unmarshal(der, &csr)
	require.NoError(t, err)
	otherPEM := makeCSR(t, csrSpec{key: rsaKey(t, 3072), subject: pkix.Name{CommonName: "x"}, sigAlg: x509.SHA256WithRSA})
	block, _ := pem.Decode([]byte(otherPEM))
	_, err = asn1.Unmarshal(block.Bytes, &other)
	require.NoError(t, err)
	csr.Signature = other.Signature
	out, err := asn1.Marshal(csr)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: out}))
}

func TestSignWithUnusableCA(t *testing.T) {
	pki := clusterPKI(t)
	csrPEM, _ := magnumclientCSR(t)
	wrongPass := pki.KubernetesCA.Stored
	wrongPass.Passphrase = "zzzzzzzzzzzz"
	_, err := Sign(wrongPass, "k8s-demo", csrPEM, signOpts())
	require.ErrorIs(t, err, ErrBadKeyPair)
	assert.Contains(t, err.Error(), "k8s-demo")

	mixed := pki.KubernetesCA.Stored
	mixed.PrivateKey, mixed.Passphrase = pki.EtcdCA.Stored.PrivateKey, pki.EtcdCA.Stored.Passphrase
	_, err = Sign(mixed, "k8s-demo", csrPEM, signOpts())
	require.ErrorIs(t, err, ErrBadKeyPair)
}

func TestMarshalKeyUsageMatchesGo(t *testing.T) {
	// Go's own encoder (used for the CA templates) is the reference for the DER named-bit form.
	for _, usage := range []x509.KeyUsage{
		x509.KeyUsageDigitalSignature,
		x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		x509.KeyUsageKeyAgreement | x509.KeyUsageDecipherOnly,
	} {
		ours, err := marshalKeyUsage(usage)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), KeyUsage: usage}
		key := rsaKey(t, 2048)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		require.NoError(t, err)
		c, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		ext, _ := findExtension(c, oidKeyUsageExt)
		assert.Equal(t, base64.StdEncoding.EncodeToString(ext.Value), base64.StdEncoding.EncodeToString(ours), "usage %b", usage)
	}
}

func parseCSRForTest(t *testing.T, s string) *x509.CertificateRequest {
	t.Helper()
	block, _ := pem.Decode([]byte(s))
	require.NotNil(t, block)
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)
	return csr
}
