package certs

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPythonWrittenKeyPairs reads the x509keypair rows that real Magnum conductors (15.0.1 and
// 23.0.0, cert_manager_type = x509keypair) wrote, and signs the CSR python-magnumclient sent in
// the captured `openstack coe ca sign`, comparing our certificate with the one Python returned.
func TestPythonWrittenKeyPairs(t *testing.T) {
	for _, version := range []string{"magnum-15.0.1", "magnum-23.0.0"} {
		t.Run(version, func(t *testing.T) {
			ctx := context.Background()
			pc := loadPythonCluster(t, version)
			m := NewManager(pc.backend)

			// Every encrypted key decrypts with its passphrase and matches its certificate.
			pki, err := m.LoadCluster(ctx, pc.refs, pc.name)
			require.NoError(t, err)

			// Our CA subject encoding is byte-identical to Python's.
			ourSubject, err := utf8Name(attribute{oidCommonName, pc.name})
			require.NoError(t, err)
			for _, ca := range []Credential{pki.KubernetesCA, pki.EtcdCA, pki.FrontProxyCA} {
				assert.Equal(t, ourSubject, ca.Certificate.RawSubject)
				assert.True(t, ca.Certificate.IsCA)
			}
			clientSubject, err := utf8Name(attribute{oidCommonName, "admin"}, attribute{oidOrganization, "system:masters"})
			require.NoError(t, err)
			assert.Equal(t, clientSubject, pki.MagnumClient.Certificate.RawSubject)
			verifyAt(t, pki.MagnumClient.Certificate, pki.KubernetesCA.Certificate, pki.KubernetesCA.Certificate.NotBefore.Add(48*time.Hour))

			// get_ca_certificate returns the stored PEM as is.
			kp, err := m.LoadCA(ctx, pc.refs, "")
			require.NoError(t, err)
			assert.Equal(t, pc.keypairRow[pc.refs.CACertRef]["certificate"], kp.Certificate)

			// sign_certificate on the captured CSR.
			opts := SignOptions{Now: pki.KubernetesCA.Certificate.NotBefore.Add(48 * time.Hour)}
			ourPEM, err := m.SignCSR(ctx, pc.refs, "", pc.name, pc.csr, opts)
			require.NoError(t, err)
			ours := parseCertPEM(t, ourPEM)
			python := parseCertPEM(t, pc.pythonPEM)
			require.NoError(t, python.CheckSignatureFrom(pki.KubernetesCA.Certificate), "fixture sanity: Python's reply is from this CA")
			assert.Equal(t, python.RawSubject, ours.RawSubject)
			assert.Equal(t, python.RawIssuer, ours.RawIssuer)
			assert.Equal(t, python.RawSubjectPublicKeyInfo, ours.RawSubjectPublicKeyInfo)
			assert.Equal(t, python.SignatureAlgorithm, ours.SignatureAlgorithm)
			assert.Equal(t, python.NotAfter.Sub(python.NotBefore), ours.NotAfter.Sub(ours.NotBefore))
			if len(python.SubjectKeyId) > 0 { // Magnum ≥ 21 adds it
				assert.Equal(t, python.SubjectKeyId, ours.SubjectKeyId, "same key identifier method as Python")
			}
			verifyAt(t, ours, pki.KubernetesCA.Certificate, opts.Now)

			// The CAPI secrets can be made from Python-written material.
			secrets, err := pki.CAPISecrets("k8s-demo-x1y2z3")
			require.NoError(t, err)
			assert.Len(t, secrets, 4)
		})
	}
}

func verifyAt(t *testing.T, cert, ca *x509.Certificate, at time.Time) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: at})
	require.NoError(t, err)
}
