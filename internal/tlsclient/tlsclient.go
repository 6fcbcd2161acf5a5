// Package tlsclient builds the TLS settings of every outgoing connection of the bridge (Keystone,
// Nova, Glance, Cinder, RabbitMQ, the database) from the few knobs their configurations offer: a
// CA bundle, a client certificate, skipping verification. It also builds the HTTP client the
// OpenStack clients share, so that each of them gets the same trust rules and request timeout.
package tlsclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"
)

// DefaultTimeout bounds every request of an HTTPClient, so that an endpoint that accepts
// connections but never answers cannot hang the caller.
const DefaultTimeout = 30 * time.Second

// Options are the TLS knobs of one connection. The zero value trusts the system pool only.
type Options struct {
	// CAFile is a PEM bundle on disk to trust; CAPEM is one already in memory (a Secret's). Both
	// may be given; each must hold at least one certificate.
	CAFile string
	CAPEM  []byte
	// SystemRoots keeps the system pool trusted beside the bundle, as keystoneauth does. Without
	// it a bundle replaces the system pool, as the Python AMQP and database drivers do.
	SystemRoots bool
	// CertFile and KeyFile are a client certificate and its key (PEM), given together.
	CertFile, KeyFile string
	// Insecure skips the verification of the server's certificate; only for operators who ask.
	Insecure bool
	// ServerName is the name checked against the server's certificate; empty: the dialled host.
	ServerName string
	// MinVersion is the oldest TLS version accepted; 0: TLS 1.2.
	MinVersion uint16
}

func (o Options) isZero() bool {
	return o.CAFile == "" && len(o.CAPEM) == 0 && o.CertFile == "" && o.KeyFile == "" && !o.Insecure &&
		o.ServerName == "" && o.MinVersion == 0
}

// Part names which setting an Error is about.
type Part string

const (
	PartCA         Part = "CA"
	PartClientCert Part = "client certificate"
)

// ErrNoCertificate: a CA bundle was read but holds no PEM certificate (a key, a DER file, a typo).
var ErrNoCertificate = errors.New("no PEM certificate found")

// Error is a setting that cannot be used. Callers that name settings in their own terms (a
// configuration key) read Part, Path and Err; Error() alone is clear enough for a log.
type Error struct {
	Part Part
	// Path is the file concerned; empty for a bundle given as bytes.
	Path string
	// Err is the file system's error, ErrNoCertificate, or crypto/tls's for a client certificate.
	Err error
}

func (e *Error) Error() string {
	switch {
	case e.Part == PartCA && e.Path == "":
		return fmt.Sprintf("tls: CA bundle: %v", e.Err)
	case e.Part == PartCA && errors.Is(e.Err, ErrNoCertificate):
		return fmt.Sprintf("tls: CA file %s: %v", e.Path, e.Err)
	case e.Part == PartCA:
		return fmt.Sprintf("tls: read CA file: %v", e.Err)
	}
	return fmt.Sprintf("tls: client certificate %s: %v", e.Path, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Config builds a *tls.Config from o. Errors are *Error.
func Config(o Options) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: o.ServerName, MinVersion: o.MinVersion}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	if o.CAFile != "" || len(o.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if o.SystemRoots {
			if system, err := x509.SystemCertPool(); err == nil && system != nil {
				pool = system
			}
		}
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, &Error{Part: PartCA, Path: o.CAFile, Err: err}
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, &Error{Part: PartCA, Path: o.CAFile, Err: ErrNoCertificate}
			}
		}
		if len(o.CAPEM) > 0 && !pool.AppendCertsFromPEM(o.CAPEM) {
			return nil, &Error{Part: PartCA, Err: ErrNoCertificate}
		}
		cfg.RootCAs = pool
	}
	if o.CertFile != "" || o.KeyFile != "" {
		pair, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, &Error{Part: PartClientCert, Path: o.CertFile, Err: err}
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	cfg.InsecureSkipVerify = o.Insecure // only when the operator configured it
	return cfg, nil
}

// HTTPClient is an HTTP client with o's TLS settings and DefaultTimeout. Without settings it uses
// http.DefaultTransport, whose connections all such clients share.
func HTTPClient(o Options) (*http.Client, error) {
	if o.isZero() {
		// The shared transport, named: callers wrap Transport (metrics, logging) and a nil one
		// would leave them nothing to call.
		return &http.Client{Transport: http.DefaultTransport, Timeout: DefaultTimeout}, nil
	}
	cfg, err := Config(o)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = cfg
	return &http.Client{Transport: transport, Timeout: DefaultTimeout}, nil
}
