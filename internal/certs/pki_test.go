package certs

import (
	"crypto/rsa"
	"crypto/sha1" // #nosec G505 -- recomputing an RFC 5280 key identifier
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	oidSKI              = "2.5.29.14"
	oidKeyUsageExt      = "2.5.29.15"
	oidSANExt           = "2.5.29.17"
	oidBasicConstraints = "2.5.29.19"
	oidAKI              = "2.5.29.35"
	oidEKU              = "2.5.29.37"
)

// derUTF8Name builds the expected DER by hand (not with utf8Name) so the test does not trust the
// code under test: SEQUENCE { SET { SEQUENCE { OID, UTF8String } } ... }.
func derUTF8Name(attrs ...[2]string) []byte {
	oids := map[string][]byte{"CN": {0x55, 0x04, 0x03}, "O": {0x55, 0x04, 0x0a}}
	tlv := func(tag byte, content []byte) []byte {
		if len(content) >= 128 {
			panic("test helper handles short lengths only")
		}
		return append([]byte{tag, byte(len(content))}, content...)
	}
	var seq []byte
	for _, a := range attrs {
		atv := tlv(0x30, append(tlv(0x06, oids[a[0]]), tlv(0x0c, []byte(a[1]))...))
		seq = append(seq, tlv(0x31, atv)...)
	}
	return tlv(0x30, seq)
}

func sha1KeyID(t *testing.T, cert *x509.Certificate) []byte {
	t.Helper()
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	_, err := asn1.Unmarshal(cert.RawSubjectPublicKeyInfo, &spki)
	require.NoError(t, err)
	sum := sha1.Sum(spki.PublicKey.Bytes) // #nosec G401
	return sum[:]
}

func TestGenerateClusterCAs(t *testing.T) {
	pki := clusterPKI(t)
	wantSubject := derUTF8Name([2]string{"CN", "k8s-demo"})
	serials := map[string]bool{}
	keys := map[string]bool{}
	for name, ca := range map[string]Credential{"kubernetes": pki.KubernetesCA, "etcd": pki.EtcdCA, "front-proxy": pki.FrontProxyCA} {
		t.Run(name, func(t *testing.T) {
			c := ca.Certificate
			assert.Equal(t, wantSubject, c.RawSubject, "subject must be CN=<issuer> as UTF8String")
			assert.Equal(t, wantSubject, c.RawIssuer, "self-signed: issuer bytes = subject bytes")
			require.NoError(t, c.CheckSignatureFrom(c))
			assert.Equal(t, x509.SHA256WithRSA, c.SignatureAlgorithm)
			assert.Equal(t, 3, c.Version)

			pub := c.PublicKey.(*rsa.PublicKey)
			assert.Equal(t, 2048, pub.N.BitLen())
			assert.Equal(t, 65537, pub.E)

			assert.True(t, c.IsCA)
			assert.True(t, c.BasicConstraintsValid)
			assert.Equal(t, 0, c.MaxPathLen)
			assert.True(t, c.MaxPathLenZero)
			assert.Equal(t, x509.KeyUsageCertSign|x509.KeyUsageCRLSign|x509.KeyUsageDigitalSignature, c.KeyUsage)
			bc, ok := findExtension(c, oidBasicConstraints)
			require.True(t, ok)
			assert.True(t, bc.Critical, "basicConstraints must be critical")
			ku, ok := findExtension(c, oidKeyUsageExt)
			require.True(t, ok)
			assert.True(t, ku.Critical, "keyUsage must be critical")
			assert.Equal(t, sha1KeyID(t, c), c.SubjectKeyId, "SKI is RFC 5280 method 1, like python-cryptography")
			assert.ElementsMatch(t, []string{oidBasicConstraints, oidKeyUsageExt, oidSKI}, extensionIDs(c))

			assert.Equal(t, testNow.Add(-24*time.Hour), c.NotBefore)
			assert.Equal(t, testNow.AddDate(0, 0, 1825), c.NotAfter)
			assert.True(t, c.SerialNumber.Sign() > 0)
			assert.LessOrEqual(t, c.SerialNumber.BitLen(), 128)
			serials[c.SerialNumber.String()] = true
			keys[pub.N.String()] = true

			assertStoredForm(t, ca)
		})
	}
	assert.Len(t, serials, 3, "every CA has its own serial")
	assert.Len(t, keys, 3, "every CA has its own key")
}

func TestGenerateClusterMagnumClientCert(t *testing.T) {
	pki := clusterPKI(t)
	c := pki.MagnumClient.Certificate
	assert.Equal(t, derUTF8Name([2]string{"CN", "admin"}, [2]string{"O", "system:masters"}), c.RawSubject)
	assert.Equal(t, pki.KubernetesCA.Certificate.RawSubject, c.RawIssuer)
	assert.False(t, c.IsCA)
	assert.True(t, c.BasicConstraintsValid)
	bc, _ := findExtension(c, oidBasicConstraints)
	assert.True(t, bc.Critical)
	assert.Equal(t, x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment, c.KeyUsage)
	ku, _ := findExtension(c, oidKeyUsageExt)
	assert.True(t, ku.Critical)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, c.ExtKeyUsage)
	eku, _ := findExtension(c, oidEKU)
	assert.False(t, eku.Critical)
	assert.Equal(t, pki.KubernetesCA.Certificate.SubjectKeyId, c.AuthorityKeyId)
	assert.Equal(t, x509.SHA256WithRSA, c.SignatureAlgorithm)
	assert.Equal(t, 2048, c.PublicKey.(*rsa.PublicKey).N.BitLen())

	// Chains to the Kubernetes CA for client auth, and not to the etcd CA although both CAs have
	// the same subject name.
	verifyClientCert(t, c, pki.KubernetesCA.Certificate)
	etcdPool := x509.NewCertPool()
	etcdPool.AddCert(pki.EtcdCA.Certificate)
	_, err := c.Verify(x509.VerifyOptions{Roots: etcdPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: testNow})
	assert.Error(t, err, "a certificate of the Kubernetes CA must not verify against the etcd CA")

	assertStoredForm(t, pki.MagnumClient)
	assert.Equal(t, pki.MagnumClient.Key, pki.ServiceAccountKey())
}

func verifyClientCert(t *testing.T, cert, ca *x509.Certificate) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: testNow})
	require.NoError(t, err)
}

var passphraseShape = regexp.MustCompile(`^[a-z2-7]{12}$`)

// assertStoredForm checks the Magnum storage format of one credential.
func assertStoredForm(t *testing.T, c Credential) {
	t.Helper()
	s := c.Stored
	assert.Regexp(t, passphraseShape, s.Passphrase, "passphrase shaped like Magnum's short_id")
	assert.Empty(t, s.Intermediates)
	assert.False(t, strings.HasSuffix(s.Certificate, "\n"), "certificate PEM is stored stripped, like Magnum")
	assert.Equal(t, c.Certificate.Raw, parseCertPEM(t, s.Certificate).Raw)

	require.True(t, strings.HasPrefix(s.PrivateKey, "-----BEGIN ENCRYPTED PRIVATE KEY-----\n"))
	assert.NotContains(t, s.PrivateKey, "BEGIN RSA PRIVATE KEY")
	block, _ := pem.Decode([]byte(s.PrivateKey))
	require.NotNil(t, block)
	assertPBES2Parameters(t, block.Bytes)

	key, cert, err := Decrypt(s)
	require.NoError(t, err)
	assert.True(t, c.Key.Public().(*rsa.PublicKey).Equal(key.Public()))
	assert.Equal(t, c.Certificate.Raw, cert.Raw)

	wrong := s
	wrong.Passphrase = "aaaaaaaaaaaa"
	_, _, err = Decrypt(wrong)
	assert.ErrorIs(t, err, ErrBadKeyPair, "a wrong passphrase must not decrypt")
	assert.NotContains(t, err.Error(), s.Passphrase)
}

// assertPBES2Parameters decodes the EncryptedPrivateKeyInfo independently and checks the exact
// algorithm choice python-cryptography makes: PBES2, PBKDF2 with HMAC-SHA256, 2048 iterations,
// AES-256-CBC.
func assertPBES2Parameters(t *testing.T, der []byte) {
	t.Helper()
	var info struct {
		Algo struct {
			OID    asn1.ObjectIdentifier
			Params struct {
				KDF struct {
					OID    asn1.ObjectIdentifier
					Params struct {
						Salt       []byte
						Iterations int
						PRF        pkix.AlgorithmIdentifier
					}
				}
				Enc struct {
					OID asn1.ObjectIdentifier
					IV  []byte
				}
			}
		}
		Data []byte
	}
	_, err := asn1.Unmarshal(der, &info)
	require.NoError(t, err)
	assert.Equal(t, "1.2.840.113549.1.5.13", info.Algo.OID.String(), "PBES2")
	assert.Equal(t, "1.2.840.113549.1.5.12", info.Algo.Params.KDF.OID.String(), "PBKDF2")
	assert.Len(t, info.Algo.Params.KDF.Params.Salt, 16)
	assert.Equal(t, 2048, info.Algo.Params.KDF.Params.Iterations)
	assert.Equal(t, "1.2.840.113549.2.9", info.Algo.Params.KDF.Params.PRF.Algorithm.String(), "hmacWithSHA256")
	assert.Equal(t, "2.16.840.1.101.3.4.1.42", info.Algo.Params.Enc.OID.String(), "aes256-CBC")
	assert.Len(t, info.Algo.Params.Enc.IV, 16)
}

func TestGenerateClusterNonASCIIIssuer(t *testing.T) {
	pki, err := GenerateCluster("clüster-ø")
	require.NoError(t, err)
	c := pki.KubernetesCA.Certificate
	assert.Equal(t, derUTF8Name([2]string{"CN", "clüster-ø"}), c.RawSubject)
	assert.Equal(t, "clüster-ø", c.Subject.CommonName)
	// Real clock: notBefore is a day back so that a skewed client accepts the certificate.
	assert.WithinDuration(t, time.Now().Add(-24*time.Hour), c.NotBefore, time.Minute)
}

func TestGenerateClusterRejectsBadInput(t *testing.T) {
	_, err := GenerateCluster("")
	assert.ErrorContains(t, err, "issuer name")
	_, err = GenerateCluster("bad\xffutf8")
	assert.ErrorContains(t, err, "UTF-8")
	_, err = GenerateClusterWithOptions("c", GenerateOptions{RSAKeySize: 1024})
	assert.ErrorContains(t, err, "key size 1024")
	_, err = GenerateClusterWithOptions("c", GenerateOptions{ValidityDays: -1})
	assert.ErrorContains(t, err, "validity")
}

func TestGenerateClusterOptions(t *testing.T) {
	pki, err := GenerateClusterWithOptions("opts", GenerateOptions{RSAKeySize: 3072, ValidityDays: 30, Now: testNow})
	require.NoError(t, err)
	for _, c := range []*x509.Certificate{pki.KubernetesCA.Certificate, pki.MagnumClient.Certificate} {
		assert.Equal(t, 3072, c.PublicKey.(*rsa.PublicKey).N.BitLen())
		assert.Equal(t, testNow.AddDate(0, 0, 30), c.NotAfter)
	}
}

func TestDecryptRejectsCorruptMaterial(t *testing.T) {
	good := clusterPKI(t).EtcdCA.Stored
	block, _ := pem.Decode([]byte(good.PrivateKey))
	require.NotNil(t, block)

	reencode := func(der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}))
	}
	// Ciphertext cut to a length that is not a whole number of AES blocks: crypto/cipher would
	// panic on it if it reached the library.
	var info encryptedPrivateKeyInfo
	_, err := asn1.Unmarshal(block.Bytes, &info)
	require.NoError(t, err)
	info.EncryptedData = info.EncryptedData[:len(info.EncryptedData)-3]
	truncated, err := asn1.Marshal(info)
	require.NoError(t, err)

	cases := map[string]KeyPair{
		"not PEM":             {Certificate: good.Certificate, PrivateKey: "garbage", Passphrase: good.Passphrase},
		"no passphrase":       {Certificate: good.Certificate, PrivateKey: good.PrivateKey},
		"truncated ciphertxt": {Certificate: good.Certificate, PrivateKey: reencode(truncated), Passphrase: good.Passphrase},
		"not ASN.1":           {Certificate: good.Certificate, PrivateKey: reencode([]byte{1, 2, 3}), Passphrase: good.Passphrase},
		"bad certificate":     {Certificate: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", PrivateKey: good.PrivateKey, Passphrase: good.Passphrase},
		"key of another cert": {Certificate: clusterPKI(t).KubernetesCA.Stored.Certificate, PrivateKey: good.PrivateKey, Passphrase: good.Passphrase},
		"wrong PEM type":      {Certificate: good.Certificate, PrivateKey: good.Certificate, Passphrase: good.Passphrase},
	}
	for name, kp := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := Decrypt(kp)
			require.ErrorIs(t, err, ErrBadKeyPair)
			assert.NotContains(t, err.Error(), good.Passphrase)
		})
	}
}

func TestKeyPairFormattingRedactsSecrets(t *testing.T) {
	pki := clusterPKI(t)
	kp := pki.KubernetesCA.Stored
	for _, s := range []string{kp.String(), kp.GoString(), fmt.Sprintf("%v", pki), fmt.Sprintf("%+v", *pki)} {
		assert.NotContains(t, s, kp.Passphrase)
		assert.NotContains(t, s, "PRIVATE KEY")
		assert.NotContains(t, s, pki.KubernetesCA.Key.(*rsa.PrivateKey).D.String())
		assert.NotContains(t, s, pki.MagnumClient.Key.(*rsa.PrivateKey).D.String())
	}
}
