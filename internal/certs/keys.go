package certs

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base32"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/youmark/pkcs8"
)

const (
	pemTypeEncryptedKey = "ENCRYPTED PRIVATE KEY"
	pemTypePKCS8Key     = "PRIVATE KEY"
	pemTypePKCS1Key     = "RSA PRIVATE KEY"
	pemTypeCertificate  = "CERTIFICATE"
	pemTypePublicKey    = "PUBLIC KEY"

	// pbkdf2Iterations and pbkdf2SaltSize reproduce what python-cryptography's
	// BestAvailableEncryption wrote for Magnum 15.0.1 and 23.0.0 (as their x509keypair rows show):
	// PBES2, PBKDF2-HMAC-SHA256, 2048 iterations, AES-256-CBC. The encryption is
	// only obfuscation anyway, because the passphrase sits next to the key in the same row.
	pbkdf2Iterations = 2048
	pbkdf2SaltSize   = 16

	// maxPBKDF2Iterations bounds the work a stored (i.e. not attacker-chosen, but possibly corrupt)
	// key can make us do before we even know whether the passphrase is right.
	maxPBKDF2Iterations = 10_000_000
)

var keyEncryption = &pkcs8.Opts{
	Cipher: pkcs8.AES256CBC,
	KDFOpts: pkcs8.PBKDF2Opts{
		SaltSize:       pbkdf2SaltSize,
		IterationCount: pbkdf2Iterations,
		HMACHash:       crypto.SHA256,
	},
}

// newPassphrase returns 12 lowercase base32 characters (60 random bits), the shape of Magnum's
// short_id.generate_id() that Magnum uses as private_key_passphrase.
func newPassphrase() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("certs: random passphrase: %w", err)
	}
	return strings.ToLower(base32.StdEncoding.EncodeToString(b[:])[:12]), nil
}

// encryptKey returns key as an encrypted PKCS#8 PEM block (with the trailing newline Python writes).
func encryptKey(key crypto.Signer, passphrase string) (string, error) {
	der, err := pkcs8.MarshalPrivateKey(key, []byte(passphrase), keyEncryption)
	if err != nil {
		return "", fmt.Errorf("certs: encrypt private key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: pemTypeEncryptedKey, Bytes: der})), nil
}

// decryptKey reads a private key PEM as stored by Magnum (encrypted PKCS#8), and for robustness
// also unencrypted PKCS#8 or PKCS#1 (in which case the passphrase is ignored).
func decryptKey(keyPEM, passphrase string) (crypto.Signer, error) {
	block, _ := pem.Decode([]byte(keyPEM))
	if block == nil {
		return nil, fmt.Errorf("%w: private key is not PEM", ErrBadKeyPair)
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case pemTypeEncryptedKey:
		if passphrase == "" {
			return nil, fmt.Errorf("%w: private key is encrypted but no passphrase is stored", ErrBadKeyPair)
		}
		if err := checkEncryptedKeyShape(block.Bytes); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadKeyPair, err)
		}
		key, err = parseEncrypted(block.Bytes, []byte(passphrase))
	case pemTypePKCS8Key:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case pemTypePKCS1Key:
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%w: unexpected PEM block %q for a private key", ErrBadKeyPair, block.Type)
	}
	if err != nil {
		// The library's messages ("pkcs8: incorrect password", ...) never contain key material.
		return nil, fmt.Errorf("%w: decrypt private key: %v", ErrBadKeyPair, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: private key of type %T cannot sign", ErrBadKeyPair, key)
	}
	return signer, nil
}

// parseEncrypted calls the PKCS#8 library and turns a panic into an error: the library hands the
// IV and ciphertext to crypto/cipher, which panics on lengths that checkEncryptedKeyShape should
// already have refused. Belt and braces, because a corrupt row must not take the service down.
func parseEncrypted(der, passphrase []byte) (key any, err error) {
	defer func() {
		if r := recover(); r != nil {
			key, err = nil, fmt.Errorf("malformed encrypted private key")
		}
	}()
	return pkcs8.ParsePKCS8PrivateKey(der, passphrase)
}

// Shapes of the PKCS#5 v2 structures, only to check lengths and bounds before decrypting.
type encryptedPrivateKeyInfo struct {
	Algorithm     pkix.AlgorithmIdentifier
	EncryptedData []byte
}

type pbes2Params struct {
	KeyDerivationFunc pkix.AlgorithmIdentifier
	EncryptionScheme  pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt           []byte
	IterationCount int
	KeyLength      int                      `asn1:"optional"`
	PRF            pkix.AlgorithmIdentifier `asn1:"optional"`
}

var (
	oidPBES2  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
)

// checkEncryptedKeyShape refuses encrypted keys that would make the decryption panic or run for an
// unbounded time: a non-PBES2 scheme, a PBKDF2 iteration count outside 1..maxPBKDF2Iterations,
// a CBC IV that is not one block, or ciphertext that is not a whole number of blocks.
func checkEncryptedKeyShape(der []byte) error {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) != 0 {
		return fmt.Errorf("encrypted private key is not a PKCS#8 EncryptedPrivateKeyInfo")
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return fmt.Errorf("encrypted private key uses %v, only PBES2 is supported", info.Algorithm.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil {
		return fmt.Errorf("invalid PBES2 parameters")
	}
	// Only PBKDF2: it is what python-cryptography writes, and scrypt's cost parameters could ask
	// for unbounded memory.
	if !params.KeyDerivationFunc.Algorithm.Equal(oidPBKDF2) {
		return fmt.Errorf("encrypted private key uses KDF %v, only PBKDF2 is supported", params.KeyDerivationFunc.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KeyDerivationFunc.Parameters.FullBytes, &kdf); err != nil {
		return fmt.Errorf("invalid PBKDF2 parameters")
	}
	if kdf.IterationCount < 1 || kdf.IterationCount > maxPBKDF2Iterations {
		return fmt.Errorf("PBKDF2 iteration count %d out of range", kdf.IterationCount)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.EncryptionScheme.Parameters.FullBytes, &iv); err != nil {
		return fmt.Errorf("invalid cipher parameters")
	}
	blockSize := 16 // AES
	if params.EncryptionScheme.Algorithm.Equal(asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}) {
		blockSize = 8 // DES-EDE3-CBC
	}
	if len(iv) != blockSize || len(info.EncryptedData) == 0 || len(info.EncryptedData)%blockSize != 0 {
		return fmt.Errorf("encrypted private key has inconsistent IV or ciphertext length")
	}
	return nil
}

// Decrypt parses a stored key pair: the first certificate of kp.Certificate and the private key
// decrypted with kp.Passphrase. It checks that the two belong together.
func Decrypt(kp KeyPair) (crypto.Signer, *x509.Certificate, error) {
	cert, err := parseCertificatePEM(kp.Certificate)
	if err != nil {
		return nil, nil, err
	}
	key, err := decryptKey(kp.PrivateKey, kp.Passphrase)
	if err != nil {
		return nil, nil, err
	}
	if !publicKeysEqual(key.Public(), cert.PublicKey) {
		return nil, nil, fmt.Errorf("%w: private key does not match the certificate %q", ErrBadKeyPair, cert.Subject.String())
	}
	return key, cert, nil
}

func parseCertificatePEM(certPEM string) (*x509.Certificate, error) {
	rest := []byte(certPEM)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, fmt.Errorf("%w: no PEM CERTIFICATE block", ErrBadKeyPair)
		}
		if block.Type != pemTypeCertificate {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: parse certificate: %v", ErrBadKeyPair, err)
		}
		return cert, nil
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// encodeCertificate returns the PEM of der without the trailing newline, as Magnum stores and
// returns certificates (its x509 helpers end in .strip()).
func encodeCertificate(der []byte) string {
	return strings.TrimRight(string(pem.EncodeToMemory(&pem.Block{Type: pemTypeCertificate, Bytes: der})), "\n")
}

// encodePrivateKeyPEM is the unencrypted PKCS#8 PEM that Magnum's decrypt_key (and so capi-helm's
// CAPI secrets) produce; Cluster API and kubeadm accept it as well as PKCS#1.
func encodePrivateKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemTypePKCS8Key, Bytes: der}), nil
}

func encodePublicKeyPEM(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("certs: marshal public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemTypePublicKey, Bytes: der}), nil
}
