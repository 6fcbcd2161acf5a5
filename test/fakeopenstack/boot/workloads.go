package boot

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	"sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"
	inmemoryapi "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server/api"
	inmemoryetcd "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server/etcd"
	"sigs.k8s.io/cluster-api/util/certs"
)

// Workloads serves the simulated workload clusters: each on its own API endpoint (the address a
// booted control-plane node answers on, e.g. the cluster's floating IP and port 6443), with a
// serving certificate from the cluster's CA, backed by an in-memory store of the cluster's objects
// (CAPI's in-memory API server and etcd handlers, the ones CAPD's in-memory backend uses). Unlike
// CAPD's mux, which tells clusters apart by port on one host, clusters here are told apart by the
// endpoint's address, so every cluster keeps the port CAPO gave it.
type Workloads struct {
	mgr    inmemoryruntime.Manager
	server *http.Server

	mu       sync.RWMutex
	clusters map[string]*workload // by endpoint, host:port
	nodes    map[string]booted    // by server ID
	extra    extraStore
}

type workload struct {
	listener net.Listener
	apiCert  *tls.Certificate
	// etcdCert answers the etcd clients CAPI's kubeadm control plane provider reaches through the
	// API server's port-forward (TLS server name etcd-<node>); signed by the cluster's etcd CA.
	etcdCert *tls.Certificate
	version  string // the Kubernetes version kubeadm init was given
}

// NewWorkloads starts the store; Close stops every endpoint.
func NewWorkloads(ctx context.Context, log logr.Logger) (*Workloads, error) {
	scheme := runtime.NewScheme()
	// The kinds the in-memory API serves (CAPD registers the same).
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme,
		storagev1.AddToScheme, apiextensionsv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	w := &Workloads{mgr: inmemoryruntime.NewManager(scheme), clusters: map[string]*workload{}, nodes: map[string]booted{}}
	if err := w.mgr.Start(ctx); err != nil {
		return nil, err
	}
	api := inmemoryapi.NewAPIServerHandler(w.mgr, log, w.resourceGroup)
	etcd := inmemoryetcd.NewEtcdServerHandler(w.mgr, log, w.resourceGroup)
	w.server = &http.Server{
		// etcd's gRPC (reached through the API server's port-forward, looped back here) or the API.
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
				etcd.ServeHTTP(rw, r)
				return
			}
			if !w.serveExtraKinds(rw, r, api) {
				api.ServeHTTP(rw, r)
			}
		}),
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: w.certificate},
	}
	return w, nil
}

// resourceGroup names the store of the cluster a request's Host (the endpoint) belongs to.
func (w *Workloads) resourceGroup(host string) (string, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if _, ok := w.clusters[host]; !ok {
		return "", fmt.Errorf("no workload cluster serves %s", host)
	}
	return host, nil
}

// certificate picks the serving certificate of the endpoint the connection arrived on.
func (w *Workloads) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	local := hello.Conn.LocalAddr().String()
	w.mu.RLock()
	defer w.mu.RUnlock()
	c, ok := w.clusters[local]
	if !ok {
		return nil, fmt.Errorf("no workload cluster serves %s", local)
	}
	if strings.HasPrefix(hello.ServerName, "etcd-") && c.etcdCert != nil {
		return c.etcdCert, nil
	}
	return c.apiCert, nil
}

// Serve starts serving the workload cluster at endpoint (host:port, host an IP address this machine
// can bind), its API certificate signed by ca. A second call for the same endpoint is a no-op.
func (w *Workloads) Serve(endpoint string, ca KeyPair) error {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("endpoint %s: the simulator serves IP addresses only", endpoint)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.clusters[endpoint]; ok {
		return nil
	}
	cert, err := servingCertificate(ca, "kube-apiserver", ip)
	if err != nil {
		return fmt.Errorf("endpoint %s: %w", endpoint, err)
	}
	l, err := net.Listen("tcp", endpoint)
	if err != nil {
		return err
	}
	w.mgr.AddResourceGroup(endpoint)
	w.clusters[endpoint] = &workload{listener: l, apiCert: cert}
	go func() { _ = w.server.ServeTLS(l, "", "") }()
	return nil
}

// Client reads and writes the objects of the workload cluster at endpoint.
func (w *Workloads) Client(endpoint string) (client.Client, error) {
	if _, err := w.resourceGroup(endpoint); err != nil {
		return nil, err
	}
	return w.mgr.GetResourceGroup(endpoint).GetClient(), nil
}

// Stop stops serving endpoint and forgets its objects.
func (w *Workloads) Stop(endpoint string) {
	w.mu.Lock()
	c, ok := w.clusters[endpoint]
	delete(w.clusters, endpoint)
	for id, n := range w.nodes { // a later cluster on the same address knows none of them
		if n.endpoint == endpoint {
			delete(w.nodes, id)
		}
	}
	w.mu.Unlock()
	if ok {
		_ = c.listener.Close()
		w.mgr.DeleteResourceGroup(endpoint)
		w.extra.forget(endpoint)
	}
}

// Close stops every endpoint.
func (w *Workloads) Close() error {
	w.mu.Lock()
	w.clusters = map[string]*workload{}
	w.mu.Unlock()
	return w.server.Close()
}

// servingCertificate makes a serving certificate as kubeadm would: signed by ca, for the endpoint's
// address (if any) and the API server's in-cluster names.
func servingCertificate(ca KeyPair, commonName string, ip net.IP) (*tls.Certificate, error) {
	caCert, err := certs.DecodeCertPEM(ca.Cert)
	if err != nil || caCert == nil {
		return nil, errors.Join(errors.New("the cluster's CA certificate is unreadable"), err)
	}
	caKey, err := certs.DecodePrivateKeyPEM(ca.Key)
	if err != nil || caKey == nil {
		return nil, errors.Join(errors.New("the cluster's CA key is unreadable"), err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	cfg := certs.Config{
		CommonName: commonName,
		AltNames: certs.AltNames{
			DNSNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if ip != nil {
		cfg.AltNames.IPs = []net.IP{ip}
	}
	cert, err := cfg.NewSignedCert(key, caCert, caKey)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}, nil
}
