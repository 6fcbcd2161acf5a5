package peer

import (
	"crypto/tls"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
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
	ca := testutil.NewTestCA(tb, "mcb-bench-peer-ca")
	sc, sk := ca.Issue(tb, "127.0.0.1", nil, true)
	serving, err := tls.X509KeyPair(sc, sk)
	if err != nil {
		tb.Fatal(err)
	}
	cc, ck := ca.Issue(tb, "magnum-peer", nil, false)
	return &testCA{certPEM: ca.CertPEM, clientCertPEM: cc, clientKeyPEM: ck, serving: serving}
}

func b64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }
