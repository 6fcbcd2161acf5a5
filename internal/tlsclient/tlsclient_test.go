package tlsclient

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// writeFile puts data in a file of the test's temporary directory.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serverCA is the PEM of an httptest TLS server's certificate.
func serverCA(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

func TestMissingCAFileIsAClearError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.pem")
	_, err := Config(Options{CAFile: path})
	var te *Error
	if !errors.As(err, &te) || te.Part != PartCA || te.Path != path {
		t.Fatalf("want a CA *Error naming %s, got %#v", path, err)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the file system's error is kept: %v", err)
	}
	if !strings.Contains(err.Error(), "read CA file") || !strings.Contains(err.Error(), path) {
		t.Errorf("message: %v", err)
	}
	if _, err := HTTPClient(Options{CAFile: path}); !errors.As(err, &te) {
		t.Errorf("HTTPClient passes the error on: %v", err)
	}
}

func TestCABundleWithoutCertificate(t *testing.T) {
	path := writeFile(t, "ca.pem", []byte("not a certificate\n"))
	_, err := Config(Options{CAFile: path})
	if !errors.Is(err, ErrNoCertificate) || err.Error() != "tls: CA file "+path+": no PEM certificate found" {
		t.Errorf("file: %v", err)
	}
	_, err = Config(Options{CAPEM: []byte("junk")})
	if !errors.Is(err, ErrNoCertificate) || err.Error() != "tls: CA bundle: no PEM certificate found" {
		t.Errorf("bytes: %v", err)
	}
}

func TestDefaultsAndFlags(t *testing.T) {
	cfg, err := Config(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs != nil || cfg.InsecureSkipVerify || len(cfg.Certificates) != 0 {
		t.Errorf("zero options: %+v", cfg)
	}
	cfg, err = Config(Options{Insecure: true, ServerName: "db.example", MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.InsecureSkipVerify || cfg.ServerName != "db.example" || cfg.MinVersion != tls.VersionTLS13 {
		t.Errorf("flags not applied: %+v", cfg)
	}
}

func TestClientCertificate(t *testing.T) {
	certPEM, keyPEM := testutil.NewTestCA(t, "test CA").Issue(t, "client", nil, false)
	certFile, keyFile := writeFile(t, "c.pem", certPEM), writeFile(t, "k.pem", keyPEM)
	cfg, err := Config(Options{CertFile: certFile, KeyFile: keyFile})
	if err != nil || len(cfg.Certificates) != 1 {
		t.Fatalf("cert: %v %+v", err, cfg)
	}
	_, err = Config(Options{CertFile: certFile})
	var te *Error
	if !errors.As(err, &te) || te.Part != PartClientCert {
		t.Errorf("a certificate without its key: %v", err)
	}
}

// The bundle replaces the system pool unless SystemRoots keeps it; either way the server whose
// certificate is in the bundle is trusted.
func TestHTTPClientTrust(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	get := func(o Options) error {
		hc, err := HTTPClient(o)
		if err != nil {
			return err
		}
		if hc.Timeout != DefaultTimeout {
			t.Errorf("timeout %s", hc.Timeout)
		}
		resp, err := hc.Get(srv.URL)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	if err := get(Options{}); err == nil {
		t.Error("an unknown CA is refused")
	}
	if err := get(Options{CAFile: writeFile(t, "ca.pem", serverCA(srv))}); err != nil {
		t.Errorf("CA file: %v", err)
	}
	if err := get(Options{CAPEM: serverCA(srv), SystemRoots: true}); err != nil {
		t.Errorf("CA bytes with the system pool: %v", err)
	}
	if err := get(Options{Insecure: true}); err != nil {
		t.Errorf("insecure: %v", err)
	}
}

func TestHTTPClientWithoutSettingsSharesTheDefaultTransport(t *testing.T) {
	hc, err := HTTPClient(Options{})
	if err != nil || hc.Transport != http.DefaultTransport || hc.Timeout != DefaultTimeout {
		t.Errorf("%v %+v", err, hc)
	}
}
