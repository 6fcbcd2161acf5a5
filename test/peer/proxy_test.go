package peer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// countingProxy stands between one conductor and the management cluster's apiserver and counts
// that conductor's requests (the apiserver's own metrics do not say who asked). It serves TLS with
// a certificate of the harness's own CA and forwards with the identity of its upstream config.
type countingProxy struct {
	URL    string
	mu     sync.Mutex
	counts map[string]int // "VERB resource"
	total  int
}

func (p *countingProxy) snapshot() (int, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	by := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		by[k] = v
	}
	return p.total, by
}

// requestKind names a request by verb and resource: GET clusters, WATCH machines, PATCH secrets…
func requestKind(r *http.Request) string {
	verb := r.Method
	if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
		verb = "WATCH"
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1/namespaces/ns/secrets/name, /apis/group/version/namespaces/ns/kind/name
	i := 2
	if len(parts) > 0 && parts[0] == "apis" {
		i = 3
	}
	if len(parts) > i+1 && parts[i] == "namespaces" {
		i += 2
	}
	if len(parts) > i {
		return verb + " " + parts[i]
	}
	return verb + " " + r.URL.Path
}

func startCountingProxy(tb testing.TB, ca *testCA, upstream *rest.Config) *countingProxy {
	tb.Helper()
	target, err := url.Parse(upstream.Host)
	if err != nil {
		tb.Fatal(err)
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		tb.Fatal(err)
	}
	p := &countingProxy{counts: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.counts[requestKind(r)]++
		p.total++
		p.mu.Unlock()
		r.Header.Del("Authorization") // the upstream config's identity, not the client's
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{ca.serving}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	tb.Cleanup(func() { _ = srv.Close() })
	p.URL = "https://" + ln.Addr().String()
	return p
}

// testCA is the harness's CA: it signs the proxies' serving certificate and the peer's client
// certificate. Python 3.14 verifies strictly (key usage on the CA, key identifiers), so both have them.
type testCA struct {
	certPEM, clientCertPEM, clientKeyPEM []byte
	serving                              tls.Certificate
}

func newTestCA(tb testing.TB) *testCA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcb-bench-peer-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(der)
	ca := &testCA{certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	issue := func(serial int64, cn string, server bool) (certPEM, keyPEM []byte) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		t := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
		if server {
			t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			t.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		} else {
			t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		}
		d, err := x509.CreateCertificate(rand.Reader, t, caCert, &k.PublicKey, key)
		if err != nil {
			tb.Fatal(err)
		}
		kd, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			tb.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
	}
	sc, sk := issue(2, "127.0.0.1", true)
	if ca.serving, err = tls.X509KeyPair(sc, sk); err != nil {
		tb.Fatal(err)
	}
	ca.clientCertPEM, ca.clientKeyPEM = issue(3, "magnum-peer", false)
	return ca
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
