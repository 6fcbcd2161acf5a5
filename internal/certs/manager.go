package certs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Owner is who a stored key pair belongs to. The x509keypair backend writes it into the row's
// project_id/user_id (Magnum takes them from the request context, i.e. the cluster's owner).
type Owner struct {
	ProjectID string
	UserID    string
}

// Backend stores key pairs; in production it is the x509keypair table (ref = row uuid).
//
// Load and Delete of a ref that does not exist return an error wrapping ErrKeyPairNotFound.
// name is what Magnum passes to its cert managers (the cluster name/UUID for CAs,
// "Magnum-Conductor" for the client certificate); the x509keypair table has no column for it.
type Backend interface {
	Store(ctx context.Context, name string, kp KeyPair, owner Owner) (ref string, err error)
	Load(ctx context.Context, ref string) (KeyPair, error)
	Delete(ctx context.Context, ref string) error
}

// Refs are the cluster row's certificate references.
type Refs struct {
	CACertRef           string // ca_cert_ref
	EtcdCACertRef       string // etcd_ca_cert_ref
	FrontProxyCACertRef string // front_proxy_ca_cert_ref
	MagnumCertRef       string // magnum_cert_ref
	// ClusterUUID is the cluster the refs belong to, for backends that record who reads a key pair
	// (ClusterLoader); empty when unknown.
	ClusterUUID string
}

// ClusterLoader is a Backend that records which cluster a read is for: Barbican, where Magnum's
// conductor up to 2026.1 registers the cluster as a consumer of every container it reads.
type ClusterLoader interface {
	LoadForCluster(ctx context.Context, ref, clusterUUID string) (KeyPair, error)
}

// MagnumDeleteScope is a Backend whose deleted clusters lose only what Magnum's
// delete_certificates_from_cluster deletes there, the cluster CA and the magnum client
// certificate: Barbican, where operators know Magnum's behaviour (the etcd and front-proxy CAs'
// containers are kept).
type MagnumDeleteScope interface {
	DeletesOnlyMagnumsRefs()
}

// CAType selects one of a cluster's CAs.
type CAType string

const (
	CAKubernetes CAType = "kubernetes"
	CAEtcd       CAType = "etcd"
	CAFrontProxy CAType = "front_proxy"
)

// ParseCAType maps the ca_cert_type values Magnum accepts: "" and "kubernetes" → CAKubernetes,
// "etcd" → CAEtcd, "front_proxy" and "front-proxy" → CAFrontProxy. Anything else wraps
// ErrUnknownCAType.
func ParseCAType(s string) (CAType, error) {
	switch s {
	case "", "kubernetes":
		return CAKubernetes, nil
	case "etcd":
		return CAEtcd, nil
	case "front_proxy", "front-proxy":
		return CAFrontProxy, nil
	default:
		return "", fmt.Errorf("%w %q (expected kubernetes, etcd or front_proxy)", ErrUnknownCAType, s)
	}
}

// Ref returns the reference of the CA of type t.
func (r Refs) Ref(t CAType) (string, error) {
	var ref, column string
	switch t {
	case CAKubernetes:
		ref, column = r.CACertRef, "ca_cert_ref"
	case CAEtcd:
		ref, column = r.EtcdCACertRef, "etcd_ca_cert_ref"
	case CAFrontProxy:
		ref, column = r.FrontProxyCACertRef, "front_proxy_ca_cert_ref"
	default:
		return "", fmt.Errorf("%w %q", ErrUnknownCAType, string(t))
	}
	if ref == "" {
		return "", fmt.Errorf("%w: %s is empty", ErrMissingRef, column)
	}
	return ref, nil
}

// Manager keeps clusters' key material in a Backend.
type Manager struct {
	backend Backend
}

// NewManager returns a Manager over b.
func NewManager(b Backend) *Manager { return &Manager{backend: b} }

// StoreCluster stores the four key pairs of pki (CA, etcd CA, front-proxy CA, magnum client
// certificate) and returns their refs. If one store fails, the ones already stored are deleted so
// that no orphan rows remain. The service-account key needs no row of its own: it is the magnum
// client certificate's key (ClusterPKI.ServiceAccountKey).
func (m *Manager) StoreCluster(ctx context.Context, pki *ClusterPKI, owner Owner) (Refs, error) {
	var refs Refs
	items := []struct {
		name string
		kp   KeyPair
		dst  *string
	}{
		{pki.Issuer, pki.KubernetesCA.Stored, &refs.CACertRef},
		{pki.Issuer, pki.EtcdCA.Stored, &refs.EtcdCACertRef},
		{pki.Issuer, pki.FrontProxyCA.Stored, &refs.FrontProxyCACertRef},
		{ClientCertName, pki.MagnumClient.Stored, &refs.MagnumCertRef},
	}
	var stored []string
	for _, it := range items {
		ref, err := m.backend.Store(ctx, it.name, it.kp, owner)
		if err == nil && ref == "" {
			err = errors.New("backend returned an empty ref")
		}
		if err != nil {
			err = fmt.Errorf("certs: store certificate for %q: %w", it.name, err)
			for _, r := range stored {
				if derr := m.backend.Delete(ctx, r); derr != nil && !errors.Is(derr, ErrKeyPairNotFound) {
					err = errors.Join(err, fmt.Errorf("certs: roll back ref %s: %w", r, derr))
				}
			}
			return Refs{}, err
		}
		*it.dst = ref
		stored = append(stored, ref)
	}
	return refs, nil
}

// LoadCA returns the stored key pair of the CA selected by caType (see ParseCAType); for
// get_ca_certificate the caller returns its Certificate, for sign_certificate it passes it to Sign.
func (m *Manager) LoadCA(ctx context.Context, refs Refs, caType string) (KeyPair, error) {
	t, err := ParseCAType(caType)
	if err != nil {
		return KeyPair{}, err
	}
	ref, err := refs.Ref(t)
	if err != nil {
		return KeyPair{}, err
	}
	kp, err := m.load(ctx, ref, refs.ClusterUUID)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certs: load %s CA (ref %s): %w", t, ref, err)
	}
	return kp, nil
}

// load reads ref for the cluster clusterUUID (ClusterLoader).
func (m *Manager) load(ctx context.Context, ref, clusterUUID string) (KeyPair, error) {
	if cl, ok := m.backend.(ClusterLoader); ok && clusterUUID != "" {
		return cl.LoadForCluster(ctx, ref, clusterUUID)
	}
	return m.backend.Load(ctx, ref)
}

// SignCSR loads the CA of caType and signs csrPEM with it (sign_certificate).
func (m *Manager) SignCSR(ctx context.Context, refs Refs, caType, issuerName, csrPEM string, opts SignOptions) (string, error) {
	ca, err := m.LoadCA(ctx, refs, caType)
	if err != nil {
		return "", err
	}
	return Sign(ca, issuerName, csrPEM, opts)
}

// LoadCluster loads and decrypts all four key pairs, e.g. to (re)create the CAPI secrets of a
// cluster whose certificates were made by Python Magnum. issuer is the cluster name or UUID.
func (m *Manager) LoadCluster(ctx context.Context, refs Refs, issuer string) (*ClusterPKI, error) {
	pki := &ClusterPKI{Issuer: issuer}
	items := []struct {
		column, ref string
		dst         *Credential
	}{
		{"ca_cert_ref", refs.CACertRef, &pki.KubernetesCA},
		{"etcd_ca_cert_ref", refs.EtcdCACertRef, &pki.EtcdCA},
		{"front_proxy_ca_cert_ref", refs.FrontProxyCACertRef, &pki.FrontProxyCA},
		{"magnum_cert_ref", refs.MagnumCertRef, &pki.MagnumClient},
	}
	for _, it := range items {
		if it.ref == "" {
			return nil, fmt.Errorf("%w: %s is empty", ErrMissingRef, it.column)
		}
	}
	for _, it := range items {
		kp, err := m.load(ctx, it.ref, refs.ClusterUUID)
		if err != nil {
			return nil, fmt.Errorf("certs: load %s %s: %w", it.column, it.ref, err)
		}
		key, cert, err := Decrypt(kp)
		if err != nil {
			return nil, fmt.Errorf("certs: %s %s: %w", it.column, it.ref, err)
		}
		*it.dst = Credential{Certificate: cert, Key: key, Stored: kp}
	}
	return pki, nil
}

// DeleteCluster deletes every non-empty ref, including the etcd and front-proxy CAs that Magnum's
// delete_certificates_from_cluster leaks — except on a MagnumDeleteScope backend, which keeps
// them as Magnum does. Refs that are already gone count as deleted; other failures are collected
// and returned together after trying all refs.
func (m *Manager) DeleteCluster(ctx context.Context, refs Refs) error {
	var errs []error
	done := map[string]bool{}
	doomed := []string{refs.CACertRef, refs.EtcdCACertRef, refs.FrontProxyCACertRef, refs.MagnumCertRef}
	if _, ok := m.backend.(MagnumDeleteScope); ok {
		doomed = []string{refs.CACertRef, refs.MagnumCertRef}
	}
	for _, ref := range doomed {
		if ref == "" || done[ref] {
			continue
		}
		done[ref] = true
		if err := m.backend.Delete(ctx, ref); err != nil && !errors.Is(err, ErrKeyPairNotFound) {
			errs = append(errs, fmt.Errorf("certs: delete ref %s: %w", ref, err))
		}
	}
	return errors.Join(errs...)
}

// refNamespace derives a cluster's key-pair refs from its uuid (UUIDv5), so every attempt to
// store a cluster's CAs — a retry, a redelivery, another replica — writes the same rows: a
// cluster gets one CA set, ever.
var refNamespace = uuid.MustParse("5d0c6b0e-6a1b-4f43-9d3f-6d6167e1b71d")

// ClusterRefs are the refs a cluster's key pairs are stored under.
func ClusterRefs(clusterUUID string) Refs {
	ref := func(kind string) string { return uuid.NewSHA1(refNamespace, []byte(clusterUUID+"/"+kind)).String() }
	return Refs{CACertRef: ref("ca"), EtcdCACertRef: ref("etcd-ca"), FrontProxyCACertRef: ref("front-proxy-ca"),
		MagnumCertRef: ref("magnum-client"), ClusterUUID: clusterUUID}
}

// ClusterSetStore is a Backend that stores a new cluster's four key pairs as one set together
// with the cluster row's refs to them, so that no attempt leaves a partial set, or a set no
// cluster refers to. The x509keypair table does it in one transaction under refs derived from the
// cluster (ClusterRefs); Barbican, which names what it stores itself, sets the row's refs once
// every container is written and removes what it wrote when that fails.
type ClusterSetStore interface {
	// StoreClusterSet stores pki's four stored key pairs (KubernetesCA, EtcdCA, FrontProxyCA,
	// MagnumClient, in that order) and sets the cluster's ref columns to them, all or nothing,
	// and returns the refs the row holds afterwards. When an earlier attempt's complete set is
	// there already, it is kept and referred to instead, and stored is false; a partial set is
	// replaced. A cluster without a row is an error, and nothing is left stored.
	StoreClusterSet(ctx context.Context, clusterUUID string, pki *ClusterPKI, owner Owner) (refs Refs, stored bool, err error)
}

// StoreNewCluster stores a new cluster's key material: pki's key pairs are stored and the cluster
// row refers to them (ClusterSetStore). When an earlier attempt (a retry, a redelivery, another
// replica) stored the cluster's set already, that set is kept and returned, loaded, instead of
// pki: a cluster gets one CA set, ever. pki itself is returned as it is: what was just stored is
// not read back.
func (m *Manager) StoreNewCluster(ctx context.Context, clusterUUID string, pki *ClusterPKI, owner Owner) (*ClusterPKI, error) {
	cs, ok := m.backend.(ClusterSetStore)
	if !ok {
		return nil, errors.New("certs: the backend cannot store a cluster's key pairs as one set")
	}
	refs, stored, err := cs.StoreClusterSet(ctx, clusterUUID, pki, owner)
	if err != nil {
		return nil, fmt.Errorf("certs: store the key pairs of cluster %s: %w", clusterUUID, err)
	}
	if stored {
		return pki, nil
	}
	refs.ClusterUUID = clusterUUID
	return m.LoadCluster(ctx, refs, pki.Issuer)
}
