package certs

import (
	"errors"
	"fmt"
	"regexp"
)

// Cluster API's conventions for the secrets it looks up before generating its own certificates
// (sigs.k8s.io/cluster-api util/secret, v1.14): name "<cluster>-<purpose>", type
// "cluster.x-k8s.io/secret", label "cluster.x-k8s.io/cluster-name: <cluster>", data keys tls.crt and
// tls.key. They are repeated here so that this package stays free of Kubernetes dependencies; a
// test pins them to the constants of sigs.k8s.io/cluster-api/api.
const (
	CAPISecretType       = "cluster.x-k8s.io/secret"
	CAPIClusterNameLabel = "cluster.x-k8s.io/cluster-name"
	CAPICertDataKey      = "tls.crt"
	CAPIKeyDataKey       = "tls.key"

	PurposeClusterCA      = "ca"
	PurposeEtcdCA         = "etcd"
	PurposeFrontProxyCA   = "proxy"
	PurposeServiceAccount = "sa"
)

// CAPISecret is the content of one Secret in the cluster's namespace of the management cluster.
// It holds unencrypted private keys: never log Data.
type CAPISecret struct {
	Name    string
	Purpose string
	Type    string
	Labels  map[string]string
	Data    map[string][]byte
}

// String keeps the key material out of accidental logging.
func (s CAPISecret) String() string { return fmt.Sprintf("certs.CAPISecret{%s, <redacted>}", s.Name) }

// dnsSubdomain is Kubernetes' RFC 1123 subdomain rule for object names.
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// CAPISecrets returns the four secrets that make Cluster API use this cluster's CAs instead of
// generating its own, in the order ca, etcd, proxy, sa:
//   - <cluster>-ca, -etcd, -proxy: tls.crt = CA certificate PEM, tls.key = unencrypted PKCS#8 PEM
//     (what Magnum's decrypt_key, and so capi-helm, produces);
//   - <cluster>-sa: tls.crt = the service-account public key as PKIX "PUBLIC KEY" PEM and tls.key =
//     its private key, as CAPI generates it. The key is the magnum client certificate's key
//     (see ServiceAccountKey); capi-helm put the client certificate itself into tls.crt, which
//     kube-apiserver accepts too.
func (p *ClusterPKI) CAPISecrets(clusterName string) ([]CAPISecret, error) {
	if clusterName == "" {
		return nil, errors.New("certs: CAPI cluster name is empty")
	}
	if len(clusterName)+1+len(PurposeFrontProxyCA) > 253 || !dnsSubdomain.MatchString(clusterName) {
		return nil, fmt.Errorf("certs: %q is not a valid Kubernetes object name", clusterName)
	}
	secrets := make([]CAPISecret, 0, 4)
	for _, ca := range []struct {
		purpose string
		cred    Credential
	}{
		{PurposeClusterCA, p.KubernetesCA},
		{PurposeEtcdCA, p.EtcdCA},
		{PurposeFrontProxyCA, p.FrontProxyCA},
	} {
		if ca.cred.Certificate == nil || ca.cred.Key == nil {
			return nil, fmt.Errorf("certs: %s CA of cluster %q is not loaded", ca.purpose, clusterName)
		}
		key, err := encodePrivateKeyPEM(ca.cred.Key)
		if err != nil {
			return nil, err
		}
		cert := []byte(encodeCertificate(ca.cred.Certificate.Raw) + "\n")
		secrets = append(secrets, newCAPISecret(clusterName, ca.purpose, cert, key))
	}
	sa := p.ServiceAccountKey()
	if sa == nil {
		return nil, fmt.Errorf("certs: service-account key of cluster %q is not loaded", clusterName)
	}
	pub, err := encodePublicKeyPEM(sa.Public())
	if err != nil {
		return nil, err
	}
	key, err := encodePrivateKeyPEM(sa)
	if err != nil {
		return nil, err
	}
	secrets = append(secrets, newCAPISecret(clusterName, PurposeServiceAccount, pub, key))
	return secrets, nil
}

func newCAPISecret(cluster, purpose string, cert, key []byte) CAPISecret {
	return CAPISecret{
		Name:    cluster + "-" + purpose,
		Purpose: purpose,
		Type:    CAPISecretType,
		Labels:  map[string]string{CAPIClusterNameLabel: cluster},
		Data:    map[string][]byte{CAPICertDataKey: cert, CAPIKeyDataKey: key},
	}
}
