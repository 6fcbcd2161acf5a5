package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"fmt"
	"slices"
	"time"
)

// maxCSRSize bounds the input; a CSR with a 16384-bit key is about 5 KiB of PEM.
const maxCSRSize = 64 << 10

// Magnum's extension names ([x509] allowed_extensions choices, python-cryptography's OID names).
const (
	ExtAuthorityKeyIdentifier = "authorityKeyIdentifier"
	ExtSubjectKeyIdentifier   = "subjectKeyIdentifier"
	ExtAuthorityInfoAccess    = "authorityInfoAccess"
	ExtBasicConstraints       = "basicConstraints"
	ExtCRLDistributionPoints  = "cRLDistributionPoints"
	ExtCertificatePolicies    = "certificatePolicies"
	ExtExtendedKeyUsage       = "extendedKeyUsage"
	ExtOCSPNoCheck            = "OCSPNoCheck"
	ExtInhibitAnyPolicy       = "inhibitAnyPolicy"
	ExtKeyUsage               = "keyUsage"
	ExtNameConstraints        = "nameConstraints"
	ExtSubjectAlternativeName = "subjectAltName"
	ExtIssuerAlternativeName  = "issuerAltName"
)

var extensionNamesByOID = map[string]string{
	"2.5.29.35":            ExtAuthorityKeyIdentifier,
	"2.5.29.14":            ExtSubjectKeyIdentifier,
	"1.3.6.1.5.5.7.1.1":    ExtAuthorityInfoAccess,
	"2.5.29.19":            ExtBasicConstraints,
	"2.5.29.31":            ExtCRLDistributionPoints,
	"2.5.29.32":            ExtCertificatePolicies,
	"2.5.29.37":            ExtExtendedKeyUsage,
	"1.3.6.1.5.5.7.48.1.5": ExtOCSPNoCheck,
	"2.5.29.54":            ExtInhibitAnyPolicy,
	"2.5.29.15":            ExtKeyUsage,
	"2.5.29.30":            ExtNameConstraints,
	"2.5.29.17":            ExtSubjectAlternativeName,
	"2.5.29.18":            ExtIssuerAlternativeName,
}

// DefaultAllowedExtensions is Magnum's [x509] allowed_extensions default.
var DefaultAllowedExtensions = []string{ExtKeyUsage, ExtExtendedKeyUsage, ExtSubjectAlternativeName, ExtBasicConstraints, ExtSubjectKeyIdentifier}

// keyUsageNames are Magnum's [x509] allowed_key_usage spellings, indexed by KeyUsage bit
// (bit 0 = digitalSignature … bit 8 = decipherOnly, which is also x509.KeyUsage's order).
var keyUsageNames = []string{
	"Digital Signature", "Non Repudiation", "Key Encipherment", "Data Encipherment", "Key Agreement",
	"Certificate Sign", "CRL Sign", "Encipher Only", "Decipher Only",
}

// DefaultAllowedKeyUsage is Magnum's [x509] allowed_key_usage default.
var DefaultAllowedKeyUsage = []string{"Digital Signature", "Key Encipherment", "Non Repudiation"}

// SignOptions is the signing policy ([x509] in magnum.conf). The zero value is Magnum's default.
type SignOptions struct {
	// ValidityDays is [x509] term_of_validity; 0 → 1825.
	ValidityDays int
	// AllowCA is [x509] allow_ca: keep CA:TRUE and the keyCertSign/cRLSign usages a CSR asks for.
	AllowCA bool
	// AllowedExtensions is [x509] allowed_extensions (Magnum's names, see Ext*). nil → the default;
	// an empty non-nil slice allows none.
	AllowedExtensions []string
	// AllowedKeyUsage is [x509] allowed_key_usage (Magnum's names, e.g. "Digital Signature").
	// nil → the default; an empty non-nil slice allows none.
	AllowedKeyUsage []string
	// Now overrides the clock (tests); zero → time.Now().
	Now time.Time
}

type signPolicy struct {
	validityDays int
	allowCA      bool
	extensions   map[string]bool
	keyUsage     x509.KeyUsage
	now          time.Time
}

func (o SignOptions) policy() (signPolicy, error) {
	p := signPolicy{validityDays: o.ValidityDays, allowCA: o.AllowCA, extensions: map[string]bool{}, now: o.Now}
	if p.validityDays == 0 {
		p.validityDays = DefaultValidityDays
	}
	if p.validityDays < 1 || p.validityDays > maxValidityDays {
		return p, fmt.Errorf("certs: validity of %d days outside 1..%d", p.validityDays, maxValidityDays)
	}
	exts := o.AllowedExtensions
	if exts == nil {
		exts = DefaultAllowedExtensions
	}
	for _, name := range exts {
		if !isKnownExtensionName(name) {
			return p, fmt.Errorf("certs: unknown x509 extension name %q", name)
		}
		p.extensions[name] = true
	}
	usages := o.AllowedKeyUsage
	if usages == nil {
		usages = DefaultAllowedKeyUsage
	}
	for _, name := range usages {
		bit := slices.Index(keyUsageNames, name)
		if bit < 0 {
			return p, fmt.Errorf("certs: unknown x509 key usage %q", name)
		}
		p.keyUsage |= 1 << bit
	}
	if !p.allowCA {
		p.keyUsage &^= x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	}
	if p.now.IsZero() {
		p.now = time.Now()
	}
	p.now = p.now.UTC().Truncate(time.Second)
	return p, nil
}

func isKnownExtensionName(name string) bool {
	for _, n := range extensionNamesByOID {
		if n == name {
			return true
		}
	}
	return false
}

// Sign issues a certificate for csrPEM with the CA in ca (certificate + encrypted key + passphrase),
// like Magnum's x509.operations.sign:
//   - subject = the CSR's subject, byte for byte (every RDN kept);
//   - issuer = the CA certificate's own subject bytes. Magnum re-encodes CN=<issuerName> instead;
//     we take the CA's RawSubject so the chain verifies even if the two ever differ. issuerName
//     (the cluster name or UUID) is only used in error messages;
//   - validity now−1d … now+ValidityDays, random 128-bit serial, SHA-256 with RSA whatever hash the
//     CSR was signed with;
//   - extensions: the CSR's, filtered by Magnum's validator rules (see filterExtensions), plus a
//     subjectKeyIdentifier (Magnum ≥ 21.0.0) and, when the CA has a key identifier, an
//     authorityKeyIdentifier (which OpenSSL's strict mode, used by Python ≥ 3.13, requires).
//
// The result is PEM without a trailing newline, as Magnum returns it. Errors: ErrInvalidCSR,
// ErrCertificateValidation, ErrBadKeyPair (CA material unusable).
func Sign(ca KeyPair, issuerName string, csrPEM string, opts SignOptions) (string, error) {
	policy, err := opts.policy()
	if err != nil {
		return "", err
	}
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return "", err
	}
	extensions, err := filterExtensions(csr.Extensions, policy)
	if err != nil {
		return "", err
	}
	caKey, caCert, err := Decrypt(ca)
	if err != nil {
		return "", fmt.Errorf("certs: CA of %q: %w", issuerName, err)
	}
	sigAlg, err := signatureAlgorithmFor(caKey)
	if err != nil {
		return "", fmt.Errorf("certs: CA of %q: %w", issuerName, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return "", err
	}
	ski, err := subjectKeyID(csr.PublicKey)
	if err != nil {
		return "", &InvalidCSRError{Reason: "unsupported public key", Err: err}
	}
	tmpl := &x509.Certificate{
		SerialNumber:       serial,
		RawSubject:         csr.RawSubject,
		NotBefore:          policy.now.Add(-backdate),
		NotAfter:           policy.now.AddDate(0, 0, policy.validityDays),
		SignatureAlgorithm: sigAlg,
		SubjectKeyId:       ski,
		ExtraExtensions:    extensions,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, csr.PublicKey, caKey)
	if err != nil {
		return "", fmt.Errorf("certs: sign certificate for cluster %q: %w", issuerName, err)
	}
	// Extensions were copied raw; parsing the result proves they still form a valid certificate.
	if _, err := x509.ParseCertificate(der); err != nil {
		return "", &InvalidCSRError{Reason: "requested extensions do not form a valid certificate", Err: err}
	}
	return encodeCertificate(der), nil
}

func signatureAlgorithmFor(key crypto.Signer) (x509.SignatureAlgorithm, error) {
	switch key.Public().(type) {
	case *rsa.PublicKey:
		return x509.SHA256WithRSA, nil
	case *ecdsa.PublicKey:
		return x509.ECDSAWithSHA256, nil
	case ed25519.PublicKey:
		return x509.PureEd25519, nil
	default:
		return 0, fmt.Errorf("%w: unsupported CA key type %T", ErrBadKeyPair, key.Public())
	}
}

// parseCSR accepts the first "CERTIFICATE REQUEST" (or legacy "NEW CERTIFICATE REQUEST") PEM block
// and checks the request's self-signature.
func parseCSR(csrPEM string) (*x509.CertificateRequest, error) {
	if len(csrPEM) > maxCSRSize {
		return nil, &InvalidCSRError{Reason: fmt.Sprintf("%d bytes is larger than the %d accepted", len(csrPEM), maxCSRSize)}
	}
	rest := []byte(csrPEM)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, &InvalidCSRError{Reason: "no PEM \"CERTIFICATE REQUEST\" block found"}
		}
		if block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST" {
			continue
		}
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return nil, &InvalidCSRError{Reason: "not a PKCS#10 request", Err: err}
		}
		if err := csr.CheckSignature(); err != nil {
			return nil, &InvalidCSRError{Reason: "signature does not verify", Err: err}
		}
		return csr, nil
	}
}

func extensionName(id asn1.ObjectIdentifier) string {
	if name, ok := extensionNamesByOID[id.String()]; ok {
		return name
	}
	return id.String()
}

var (
	oidExtKeyUsage         = asn1.ObjectIdentifier{2, 5, 29, 15}
	oidExtBasicConstraints = asn1.ObjectIdentifier{2, 5, 29, 19}
	oidExtSubjectKeyID     = asn1.ObjectIdentifier{2, 5, 29, 14}
)

// filterExtensions applies Magnum's validator.filter_extensions:
//   - an extension whose name is not allowed is dropped, or refused if it is critical;
//   - keyUsage keeps only allowed usages (CA usages only with allow_ca); a disallowed usage in a
//     critical keyUsage refuses the CSR. If nothing is left the extension is dropped (Magnum would
//     emit an empty keyUsage, which RFC 5280 forbids);
//   - basicConstraints CA:TRUE becomes a non-critical CA:FALSE, or is refused if critical (unless
//     allow_ca);
//   - the CSR's own subjectKeyIdentifier is replaced by the one we compute (Magnum ≥ 21 would add
//     a second one and fail).
//
// Encipher/decipher-only are only read when keyAgreement is set, as python-cryptography does.
func filterExtensions(requested []pkix.Extension, p signPolicy) ([]pkix.Extension, error) {
	var out []pkix.Extension
	seen := map[string]bool{}
	for _, ext := range requested {
		id := ext.Id.String()
		if seen[id] {
			return nil, &InvalidCSRError{Reason: fmt.Sprintf("extension %s requested twice", extensionName(ext.Id))}
		}
		seen[id] = true
		name := extensionName(ext.Id)
		if !p.extensions[name] {
			if ext.Critical {
				return nil, &CertificateValidationError{Extension: name, Detail: "critical extension is not in the allowed list"}
			}
			continue
		}
		switch {
		case ext.Id.Equal(oidExtSubjectKeyID):
			continue
		case ext.Id.Equal(oidExtKeyUsage):
			filtered, keep, err := filterKeyUsage(ext, p)
			if err != nil {
				return nil, err
			}
			if keep {
				out = append(out, filtered)
			}
		case ext.Id.Equal(oidExtBasicConstraints):
			filtered, err := filterBasicConstraints(ext, p)
			if err != nil {
				return nil, err
			}
			out = append(out, filtered)
		default:
			out = append(out, ext)
		}
	}
	return out, nil
}

func filterKeyUsage(ext pkix.Extension, p signPolicy) (pkix.Extension, bool, error) {
	var bits asn1.BitString
	if rest, err := asn1.Unmarshal(ext.Value, &bits); err != nil || len(rest) != 0 {
		return ext, false, &InvalidCSRError{Reason: "malformed keyUsage extension"}
	}
	var kept x509.KeyUsage
	for bit := range keyUsageNames {
		if bits.At(bit) == 0 {
			continue
		}
		usage := x509.KeyUsage(1 << bit)
		if (usage == x509.KeyUsageEncipherOnly || usage == x509.KeyUsageDecipherOnly) && bits.At(4) == 0 {
			continue
		}
		if p.keyUsage&usage == 0 {
			if ext.Critical {
				return ext, false, &CertificateValidationError{
					Extension: ExtKeyUsage,
					Detail:    fmt.Sprintf("key usage %q is not allowed in a critical keyUsage", keyUsageNames[bit]),
				}
			}
			continue
		}
		kept |= usage
	}
	if kept == 0 {
		return ext, false, nil
	}
	value, err := marshalKeyUsage(kept)
	if err != nil {
		return ext, false, err
	}
	return pkix.Extension{Id: ext.Id, Critical: ext.Critical, Value: value}, true, nil
}

// marshalKeyUsage encodes usage as a DER named-bit BIT STRING (bit 0 = most significant bit of the
// first byte, trailing zero bits removed).
func marshalKeyUsage(usage x509.KeyUsage) ([]byte, error) {
	var bytes [2]byte
	length := 0
	for bit := range keyUsageNames {
		if usage&(1<<bit) != 0 {
			bytes[bit/8] |= 0x80 >> (bit % 8)
			length = bit + 1
		}
	}
	return asn1.Marshal(asn1.BitString{Bytes: bytes[:(length+7)/8], BitLength: length})
}

func filterBasicConstraints(ext pkix.Extension, p signPolicy) (pkix.Extension, error) {
	var bc struct {
		IsCA       bool `asn1:"optional"`
		MaxPathLen int  `asn1:"optional,default:-1"`
	}
	if rest, err := asn1.Unmarshal(ext.Value, &bc); err != nil || len(rest) != 0 {
		return ext, &InvalidCSRError{Reason: "malformed basicConstraints extension"}
	}
	if !bc.IsCA || p.allowCA {
		return ext, nil
	}
	if ext.Critical {
		return ext, &CertificateValidationError{Extension: ExtBasicConstraints, Detail: "CA:TRUE is not allowed"}
	}
	// An empty SEQUENCE is CA:FALSE with no path length, what python-cryptography writes for
	// BasicConstraints(ca=False, path_length=None).
	return pkix.Extension{Id: ext.Id, Critical: false, Value: []byte{0x30, 0x00}}, nil
}
