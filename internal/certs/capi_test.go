package certs

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/keyutil"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestCAPIConstantsMatchClusterAPI(t *testing.T) {
	assert.Equal(t, string(clusterv1.ClusterSecretType), CAPISecretType)
	assert.Equal(t, clusterv1.ClusterNameLabel, CAPIClusterNameLabel)
}

func TestCAPISecrets(t *testing.T) {
	pki := clusterPKI(t)
	secrets, err := pki.CAPISecrets("k8s-demo-abc123")
	require.NoError(t, err)
	require.Len(t, secrets, 4)

	wantCA := map[string]Credential{"ca": pki.KubernetesCA, "etcd": pki.EtcdCA, "proxy": pki.FrontProxyCA}
	for i, purpose := range []string{"ca", "etcd", "proxy", "sa"} {
		s := secrets[i]
		assert.Equal(t, "k8s-demo-abc123-"+purpose, s.Name)
		assert.Equal(t, purpose, s.Purpose)
		assert.Equal(t, "cluster.x-k8s.io/secret", s.Type)
		assert.Equal(t, map[string]string{"cluster.x-k8s.io/cluster-name": "k8s-demo-abc123"}, s.Labels)
		require.Len(t, s.Data, 2)
		assert.NotContains(t, s.String(), "PRIVATE")

		// Parse the key the way kubeadm/Cluster API do (client-go keyutil).
		key, err := keyutil.ParsePrivateKeyPEM(s.Data["tls.key"])
		require.NoError(t, err, purpose)
		assert.NotContains(t, string(s.Data["tls.key"]), "ENCRYPTED")

		if purpose == "sa" {
			pubs, err := keyutil.ParsePublicKeysPEM(s.Data["tls.crt"])
			require.NoError(t, err)
			require.Len(t, pubs, 1)
			block, _ := pem.Decode(s.Data["tls.crt"])
			assert.Equal(t, "PUBLIC KEY", block.Type, "CAPI stores the SA public key, not a certificate")
			assert.True(t, publicKeysEqual(pki.MagnumClient.Key.Public(), pubs[0]), "SA key is the magnum client key")
			assert.True(t, publicKeysEqual(pki.MagnumClient.Key.Public(), key.(crypto.Signer).Public()))
			continue
		}
		ca := wantCA[purpose]
		cert := parseCertPEM(t, string(s.Data["tls.crt"]))
		assert.Equal(t, ca.Certificate.Raw, cert.Raw)
		assert.True(t, publicKeysEqual(cert.PublicKey, key.(crypto.Signer).Public()), "%s key matches its certificate", purpose)
		block, _ := pem.Decode(s.Data["tls.key"])
		assert.Equal(t, "PRIVATE KEY", block.Type, "unencrypted PKCS#8, as Magnum's decrypt_key writes")
		_, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		require.NoError(t, err)
	}
}

func TestCAPISecretsRejectsBadNames(t *testing.T) {
	pki := clusterPKI(t)
	for _, name := range []string{"", "Upper", "under_score", "-lead", "trail-"} {
		_, err := pki.CAPISecrets(name)
		assert.Error(t, err, "%q", name)
	}
	_, err := (&ClusterPKI{}).CAPISecrets("empty")
	assert.ErrorContains(t, err, "not loaded")
}
