package certs

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" // #nosec G505 -- RFC 5280 key identifier, not a security use
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"time"
	"unicode/utf8"
)

const (
	// DefaultRSAKeySize is Magnum's [x509] rsa_key_size default.
	DefaultRSAKeySize = 2048
	// DefaultValidityDays is Magnum's [x509] term_of_validity default (5 years).
	DefaultValidityDays = 1825

	// ClientCertName is the name Magnum gives the stored "magnum" client certificate.
	ClientCertName = "Magnum-Conductor"

	minRSAKeySize   = 2048
	maxRSAKeySize   = 8192
	maxValidityDays = 36500
	// backdate is how far notBefore lies in the past, like Magnum (absorbs clock skew).
	backdate = 24 * time.Hour
)

var (
	oidCommonName   = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOrganization = asn1.ObjectIdentifier{2, 5, 4, 10}
)

// GenerateOptions are the [x509] settings that shape generated certificates. The zero value means
// Magnum's defaults.
type GenerateOptions struct {
	RSAKeySize   int       // 0 → 2048
	ValidityDays int       // 0 → 1825
	Now          time.Time // zero → time.Now(); for tests
	// Keys supplies keys generated ahead of demand; nil: each is generated when needed.
	Keys *KeyPool
}

func (o GenerateOptions) normalized() (GenerateOptions, error) {
	if o.RSAKeySize == 0 {
		o.RSAKeySize = DefaultRSAKeySize
	}
	if o.RSAKeySize < minRSAKeySize || o.RSAKeySize > maxRSAKeySize {
		return o, fmt.Errorf("certs: RSA key size %d outside %d..%d", o.RSAKeySize, minRSAKeySize, maxRSAKeySize)
	}
	if o.ValidityDays == 0 {
		o.ValidityDays = DefaultValidityDays
	}
	if o.ValidityDays < 1 || o.ValidityDays > maxValidityDays {
		return o, fmt.Errorf("certs: validity of %d days outside 1..%d", o.ValidityDays, maxValidityDays)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	o.Now = o.Now.UTC().Truncate(time.Second)
	return o, nil
}

// Credential is one certificate with its private key, in parsed form and in the stored form.
type Credential struct {
	Certificate *x509.Certificate
	Key         crypto.Signer
	// Stored is what goes into the backend: certificate PEM (no trailing newline, like Magnum),
	// encrypted PKCS#8 private key PEM and its passphrase.
	Stored KeyPair
}

// String keeps the private key out of accidental logging.
func (c Credential) String() string {
	if c.Certificate == nil {
		return "certs.Credential{<empty>}"
	}
	return fmt.Sprintf("certs.Credential{%s, <key redacted>}", c.Certificate.Subject)
}

// ClusterPKI is the key material of one cluster, as generated at cluster_create or loaded back from
// the four stored refs.
type ClusterPKI struct {
	// Issuer is the CN of the three CAs: the cluster name, or its UUID when it has no name.
	Issuer       string
	KubernetesCA Credential
	EtcdCA       Credential
	FrontProxyCA Credential
	// MagnumClient is "CN=admin, O=system:masters" issued by KubernetesCA. Its key doubles as the
	// cluster's service-account signing key (see ServiceAccountKey).
	MagnumClient Credential
}

// ServiceAccountKey is the key kube-apiserver signs service-account tokens with (the CAPI
// "<cluster>-sa" secret). Like magnum-capi-helm we reuse the magnum client certificate's key rather
// than storing a fifth key pair: Magnum's cluster table has exactly four certificate refs, clusters
// created by Magnum + capi-helm already run with this key (a different one would invalidate every
// issued service-account token on adoption), and it can be re-derived from the database at any time.
func (p *ClusterPKI) ServiceAccountKey() crypto.Signer { return p.MagnumClient.Key }

// GenerateCluster creates a cluster's CAs and client certificate with Magnum's default settings.
func GenerateCluster(issuer string) (*ClusterPKI, error) {
	return GenerateClusterWithOptions(issuer, GenerateOptions{})
}

// GenerateClusterWithOptions creates, like magnum-conductor's generate_certificates_to_cluster:
//   - three self-signed CAs (Kubernetes, etcd, front-proxy), each with subject = issuer =
//     CN=<issuer> as a UTF8String, a random 128-bit serial, validity now−1d … now+ValidityDays,
//     SHA-256 with RSA, basicConstraints CA:TRUE pathlen:0 (critical) and keyUsage keyCertSign,
//     cRLSign, digitalSignature (critical; Magnum only sets keyCertSign, but Python ≥ 3.13 and
//     OpenSSL's strict mode want the CA profile of RFC 5280), plus a subjectKeyIdentifier;
//   - the "magnum" client certificate: CN=admin, O=system:masters, issued by the Kubernetes CA,
//     keyUsage digitalSignature+keyEncipherment (critical), extendedKeyUsage clientAuth,
//     basicConstraints CA:FALSE (critical).
//
// Every private key is stored as encrypted PKCS#8 PEM under its own 12-character passphrase.
func GenerateClusterWithOptions(issuer string, opts GenerateOptions) (*ClusterPKI, error) {
	if issuer == "" {
		return nil, errors.New("certs: issuer name (cluster name or UUID) is empty")
	}
	if !utf8.ValidString(issuer) {
		return nil, errors.New("certs: issuer name is not valid UTF-8")
	}
	opts, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	keys, err := generateRSAKeys(opts.Keys, 4, opts.RSAKeySize)
	if err != nil {
		return nil, err
	}
	caSubject, err := utf8Name(attribute{oidCommonName, issuer})
	if err != nil {
		return nil, err
	}
	pki := &ClusterPKI{Issuer: issuer}
	for i, dst := range []*Credential{&pki.KubernetesCA, &pki.EtcdCA, &pki.FrontProxyCA} {
		if *dst, err = newCA(caSubject, keys[i], opts); err != nil {
			return nil, err
		}
	}
	clientSubject, err := utf8Name(attribute{oidCommonName, "admin"}, attribute{oidOrganization, "system:masters"})
	if err != nil {
		return nil, err
	}
	if pki.MagnumClient, err = newClientCert(clientSubject, keys[3], pki.KubernetesCA, opts); err != nil {
		return nil, err
	}
	return pki, nil
}

// generateRSAKeys takes n keys from the pool or makes them concurrently: key generation dominates
// GenerateCluster's cost and the keys are independent.
func generateRSAKeys(pool *KeyPool, n, bits int) ([]*rsa.PrivateKey, error) {
	type result struct {
		i   int
		key *rsa.PrivateKey
		err error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			key, err := pool.take(bits)
			results <- result{i, key, err}
		}()
	}
	keys := make([]*rsa.PrivateKey, n)
	var firstErr error
	for range n {
		r := <-results
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		}
		keys[r.i] = r.key
	}
	return keys, firstErr
}

func newCA(subject []byte, key *rsa.PrivateKey, opts GenerateOptions) (Credential, error) {
	tmpl, err := baseTemplate(subject, key, opts)
	if err != nil {
		return Credential{}, err
	}
	tmpl.IsCA, tmpl.MaxPathLen, tmpl.MaxPathLenZero = true, 0, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	// Self-signed: the template is its own parent, so the issuer bytes are the same RawSubject.
	return issue(tmpl, tmpl, key, key)
}

func newClientCert(subject []byte, key *rsa.PrivateKey, ca Credential, opts GenerateOptions) (Credential, error) {
	tmpl, err := baseTemplate(subject, key, opts)
	if err != nil {
		return Credential{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return issue(tmpl, ca.Certificate, key, ca.Key)
}

// baseTemplate is what every certificate the bridge generates shares: a random serial, the subject
// bytes as given, the validity window, SHA-256 with RSA and the key's subject key identifier.
func baseTemplate(subject []byte, key *rsa.PrivateKey, opts GenerateOptions) (*x509.Certificate, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	ski, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		RawSubject:            subject,
		NotBefore:             opts.Now.Add(-backdate),
		NotAfter:              opts.Now.AddDate(0, 0, opts.ValidityDays),
		SignatureAlgorithm:    x509.SHA256WithRSA,
		BasicConstraintsValid: true,
		SubjectKeyId:          ski,
	}, nil
}

func issue(tmpl, parent *x509.Certificate, key *rsa.PrivateKey, signer crypto.Signer) (Credential, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return Credential{}, fmt.Errorf("certs: create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Credential{}, fmt.Errorf("certs: parse created certificate: %w", err)
	}
	passphrase, err := newPassphrase()
	if err != nil {
		return Credential{}, err
	}
	encrypted, err := encryptKey(key, passphrase)
	if err != nil {
		return Credential{}, err
	}
	return Credential{
		Certificate: cert,
		Key:         key,
		Stored: KeyPair{
			Certificate: encodeCertificate(der),
			PrivateKey:  encrypted,
			Passphrase:  passphrase,
		},
	}, nil
}

// serialLimit is 2^128: serials are random 128-bit numbers, like Magnum's int(uuid4()).
var serialLimit = new(big.Int).Lsh(big.NewInt(1), 128)

func randomSerial() (*big.Int, error) {
	for {
		n, err := rand.Int(rand.Reader, serialLimit)
		if err != nil {
			return nil, fmt.Errorf("certs: random serial: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// subjectKeyID is RFC 5280 §4.2.1.2 method 1 (SHA-1 of the subjectPublicKey bits), the method
// python-cryptography's SubjectKeyIdentifier.from_public_key uses, so a certificate we issue for a
// key carries the same identifier Magnum ≥ 21 would give it.
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("certs: marshal public key: %w", err)
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, fmt.Errorf("certs: parse public key: %w", err)
	}
	sum := sha1.Sum(spki.PublicKey.Bytes) // #nosec G401 -- identifier, not a signature
	return sum[:], nil
}

type attribute struct {
	oid   asn1.ObjectIdentifier
	value string
}

// utf8Name DER-encodes a Name with one attribute per RDN, every value as UTF8String, in the given
// order. crypto/x509's pkix.Name would pick PrintableString for ASCII values; Magnum's names are
// UTF8String, and TLS stacks compare issuer and subject bytes verbatim, so we build them ourselves.
func utf8Name(attrs ...attribute) ([]byte, error) {
	rdns := make(pkix.RDNSequence, 0, len(attrs))
	for _, a := range attrs {
		value, err := asn1.MarshalWithParams(a.value, "utf8")
		if err != nil {
			return nil, fmt.Errorf("certs: encode name attribute %v: %w", a.oid, err)
		}
		rdns = append(rdns, []pkix.AttributeTypeAndValue{{Type: a.oid, Value: asn1.RawValue{FullBytes: value}}})
	}
	der, err := asn1.Marshal(rdns)
	if err != nil {
		return nil, fmt.Errorf("certs: encode name: %w", err)
	}
	return der, nil
}
