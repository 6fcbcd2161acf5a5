// Package certs owns the per-cluster certificate authorities that Magnum's conductor used to create:
// a Kubernetes CA, an etcd CA, a front-proxy CA and the "magnum" admin client certificate, all kept in
// Magnum's own storage format (certificate PEM + PKCS#8 PEM private key encrypted with a 12-character
// passphrase) so that Python tooling (magnum-api, capi-helm's decrypt_key, operators' scripts) keeps
// reading what we write and we keep reading what Python wrote.
//
// It also signs client CSRs the way magnum's sign_certificate does (subject from the CSR, extensions
// filtered by Magnum's validator rules) and turns a cluster's key material into the data of the
// Cluster API secrets (<cluster>-ca, -etcd, -proxy, -sa) so that a workload cluster trusts the CA that
// `openstack coe cluster config` hands out.
//
// The package does no I/O of its own: storage goes through the Backend interface (the x509keypair
// table in production) and Kubernetes objects are built by the capi package from plain data.
package certs

import (
	"errors"
	"fmt"
)

// Sentinel errors; callers map them onto Magnum's exception classes with errors.Is.
var (
	// ErrInvalidCSR: the CSR is not PEM, not a PKCS#10 request, or its self-signature does not
	// verify (Magnum: InvalidCsr).
	ErrInvalidCSR = errors.New("invalid certificate signing request")
	// ErrCertificateValidation: the CSR asks for something the signing policy refuses, e.g. a
	// critical extension that is not allowed (Magnum: CertificateValidationError).
	ErrCertificateValidation = errors.New("certificate validation error")
	// ErrUnknownCAType: ca_cert_type is none of "", kubernetes, etcd, front_proxy, front-proxy
	// (the RPC layer reports it as InvalidParameterValue).
	ErrUnknownCAType = errors.New("unknown CA certificate type")
	// ErrMissingRef: the cluster row has no reference for the requested certificate.
	ErrMissingRef = errors.New("cluster has no certificate reference")
	// ErrKeyPairNotFound is what a Backend returns (wrapped) when a ref does not exist. The Manager
	// treats it as "already deleted" when deleting.
	ErrKeyPairNotFound = errors.New("x509 key pair not found")
	// ErrBadKeyPair: stored material cannot be used (unparsable certificate, wrong passphrase,
	// key not matching the certificate, ...).
	ErrBadKeyPair = errors.New("unusable x509 key pair")
)

// InvalidCSRError says why a CSR was refused. errors.Is(err, ErrInvalidCSR) holds.
type InvalidCSRError struct {
	Reason string
	Err    error
}

func (e *InvalidCSRError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("invalid certificate signing request: %s: %v", e.Reason, e.Err)
	}
	return "invalid certificate signing request: " + e.Reason
}

func (e *InvalidCSRError) Is(target error) bool { return target == ErrInvalidCSR }
func (e *InvalidCSRError) Unwrap() error        { return e.Err }

// CertificateValidationError names the extension that made the signing policy refuse a CSR. Its
// message is Magnum's ("Extension '<name>' not allowed"). errors.Is(err, ErrCertificateValidation)
// holds.
type CertificateValidationError struct {
	Extension string
	Detail    string
}

func (e *CertificateValidationError) Error() string {
	msg := fmt.Sprintf("Extension '%s' not allowed", e.Extension)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *CertificateValidationError) Is(target error) bool { return target == ErrCertificateValidation }

// KeyPair is one stored certificate the way Magnum's cert managers keep it: PEM certificate,
// PKCS#8 PEM private key encrypted with Passphrase ("-----BEGIN ENCRYPTED PRIVATE KEY-----"), and
// intermediates (always empty for what Magnum and this package generate). It maps 1:1 onto an
// x509keypair row (certificate, private_key, private_key_passphrase, intermediates).
//
// KeyPair holds secrets: never log it.
type KeyPair struct {
	Certificate   string
	PrivateKey    string
	Intermediates string
	Passphrase    string
}

// String keeps the private key and passphrase out of accidental %v logging.
func (KeyPair) String() string { return "certs.KeyPair{<redacted>}" }

// GoString does the same for %#v.
func (k KeyPair) GoString() string { return k.String() }
