package boot

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"sync"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types/upstream"
	"sigs.k8s.io/cluster-api/util/secret"
)

// The user data in these tests is made by CAPI's kubeadm bootstrap provider's own code (cloudinit and
// the kubeadm API marshalling), from the node registration the bridge's OpenStack ClusterClass renders
// (internal/templates/testdata/openstack-class.golden.yaml): what CAPO hands to Nova.

var testServer = Server{ID: "4f1c2b9e-0d7a-4c55-9a8e-2f6b1d3c7e90", Name: "Demo-abc12-Control-Plane-x7k2q"}

const endpoint = "172.24.4.17:6443"

func registration(labels string) bootstrapv1.NodeRegistrationOptions {
	return bootstrapv1.NodeRegistrationOptions{
		Name: "{{ local_hostname }}",
		KubeletExtraArgs: []bootstrapv1.Arg{
			{Name: "cloud-provider", Value: ptr.To("external")},
			{Name: "provider-id", Value: ptr.To("openstack:///'{{ instance_id }}'")},
			{Name: "node-labels", Value: ptr.To(labels)},
		},
	}
}

// clusterCerts are a cluster's CAs (generated once: RSA keys are slow), as CABPK writes them for
// the first control-plane node and for the ones that join.
var clusterCerts = func() func(t *testing.T) secret.Certificates {
	var once sync.Once
	var certs secret.Certificates
	var err error
	return func(t *testing.T) secret.Certificates {
		once.Do(func() {
			certs = secret.NewCertificatesForInitialControlPlane(&bootstrapv1.ClusterConfiguration{})
			err = certs.Generate()
		})
		require.NoError(t, err)
		return certs
	}
}()

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func initUserData(t *testing.T, version string) (string, secret.Certificates) {
	t.Helper()
	v := semver.MustParse(version)
	cluster, err := kubeadmtypes.MarshalClusterConfigurationForVersion(&bootstrapv1.ClusterConfiguration{ControlPlaneEndpoint: endpoint},
		v, &upstream.AdditionalData{KubernetesVersion: ptr.To("v" + version), ClusterName: ptr.To("demo-abc12")})
	require.NoError(t, err)
	reg := registration("magnum.openstack.org/role=master")
	reg.Taints = &[]corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	init, err := kubeadmtypes.MarshalInitConfigurationForVersion(&bootstrapv1.InitConfiguration{NodeRegistration: reg}, v)
	require.NoError(t, err)
	certs := clusterCerts(t)
	ud, err := cloudinit.NewInitControlPlane(&cloudinit.ControlPlaneInput{Certificates: certs, ClusterConfiguration: cluster, InitConfiguration: init})
	require.NoError(t, err)
	return b64(ud), certs
}

func joinConfiguration(t *testing.T, version string, controlPlane bool, labels string) string {
	t.Helper()
	cfg := &bootstrapv1.JoinConfiguration{
		NodeRegistration: registration(labels),
		Discovery: bootstrapv1.Discovery{BootstrapToken: bootstrapv1.BootstrapTokenDiscovery{
			Token: "abcdef.0123456789abcdef", APIServerEndpoint: endpoint, CACertHashes: []string{"sha256:00"}}},
	}
	if controlPlane {
		cfg.ControlPlane = &bootstrapv1.JoinControlPlane{}
	}
	s, err := kubeadmtypes.MarshalJoinConfigurationForVersion(cfg, semver.MustParse(version))
	require.NoError(t, err)
	return s
}

func TestParseKubeadmUserData(t *testing.T) {
	// v1beta4 (Kubernetes ≥ 1.31: kubelet args a list) and v1beta3 (a map).
	for _, version := range []string{"1.33.1", "1.30.4"} {
		t.Run("init "+version, func(t *testing.T) {
			ud, certs := initUserData(t, version)
			n, err := Parse(ud, testServer)
			require.NoError(t, err)
			assert.Equal(t, RoleInit, n.Role)
			assert.Equal(t, "demo-abc12-control-plane-x7k2q", n.Name, "kubeadm registers the host name in lower case")
			assert.Equal(t, "openstack:///"+testServer.ID, n.ProviderID, "as CAPO sets it on the OpenStackMachine")
			assert.Equal(t, endpoint, n.Endpoint)
			assert.Equal(t, "v"+version, n.KubernetesVersion)
			assert.Equal(t, map[string]string{"magnum.openstack.org/role": "master"}, n.Labels)
			assert.Equal(t, []string{"node-role.kubernetes.io/control-plane:NoSchedule"}, n.Taints)
			assert.Empty(t, n.Token)
			ca := certs.GetByPurpose(secret.ClusterCA).KeyPair
			assert.Equal(t, ca.Cert, n.CA.Cert)
			assert.Equal(t, ca.Key, n.CA.Key)
			assert.Equal(t, certs.GetByPurpose(secret.EtcdCA).KeyPair.Cert, n.EtcdCA.Cert)
		})
		t.Run("control-plane join "+version, func(t *testing.T) {
			certs := clusterCerts(t)
			ud, err := cloudinit.NewJoinControlPlane(&cloudinit.ControlPlaneJoinInput{Certificates: certs,
				BootstrapToken: "abcdef.0123456789abcdef", JoinConfiguration: joinConfiguration(t, version, true, "magnum.openstack.org/role=master")})
			require.NoError(t, err)
			n, err := Parse(b64(ud), testServer)
			require.NoError(t, err)
			assert.Equal(t, RoleJoinControlPlane, n.Role)
			assert.Equal(t, endpoint, n.Endpoint)
			assert.Equal(t, "abcdef.0123456789abcdef", n.Token)
			assert.Equal(t, "openstack:///"+testServer.ID, n.ProviderID)
			assert.Equal(t, certs.GetByPurpose(secret.ClusterCA).KeyPair.Cert, n.CA.Cert)
		})
		t.Run("worker "+version, func(t *testing.T) {
			ud, err := cloudinit.NewNode(&cloudinit.NodeInput{JoinConfiguration: joinConfiguration(t, version, false,
				"magnum.openstack.org/role=worker,magnum.openstack.org/nodegroup=default-worker")})
			require.NoError(t, err)
			worker := Server{ID: "9d0e8a61-5b3c-4f27-8c1a-7e6d5f4b3a21", Name: "demo-abc12-default-worker-5f7c9-h2lqz"}
			n, err := Parse(b64(ud), worker)
			require.NoError(t, err)
			assert.Equal(t, RoleJoinWorker, n.Role)
			assert.Equal(t, worker.Name, n.Name)
			assert.Equal(t, "openstack:///"+worker.ID, n.ProviderID)
			assert.Equal(t, "abcdef.0123456789abcdef", n.Token)
			assert.Equal(t, map[string]string{"magnum.openstack.org/role": "worker", "magnum.openstack.org/nodegroup": "default-worker"}, n.Labels)
			assert.Nil(t, n.CA.Cert, "workers are not given the CA's key pair")
		})
	}
}

func TestParseEncodings(t *testing.T) {
	ud, _ := initUserData(t, "1.33.1")
	plain, err := base64.StdEncoding.DecodeString(ud)
	require.NoError(t, err)
	fromPlain, err := Parse(string(plain), testServer)
	require.NoError(t, err, "user data given as text, not base64")
	fromB64, err := Parse(ud, testServer)
	require.NoError(t, err)
	assert.Equal(t, fromB64, fromPlain)

	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	_, _ = w.Write(plain)
	require.NoError(t, w.Close())
	fromGzip, err := Parse(b64(z.Bytes()), testServer)
	require.NoError(t, err, "gzip-compressed user data, which cloud-init accepts")
	assert.Equal(t, fromB64, fromGzip)

	join := joinConfiguration(t, "1.33.1", false, "a=b")
	var zf bytes.Buffer
	w = gzip.NewWriter(&zf)
	_, _ = w.Write([]byte(join))
	require.NoError(t, w.Close())
	doc := "## template: jinja\n#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  encoding: gz+b64\n  content: " +
		b64(zf.Bytes()) + "\n"
	n, err := Parse(b64([]byte(doc)), testServer)
	require.NoError(t, err, "a gz+b64 write_files entry")
	assert.Equal(t, RoleJoinWorker, n.Role)
	assert.Equal(t, map[string]string{"a": "b"}, n.Labels)
}

func TestParseRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		userData   string
		notKubeadm bool
	}{
		"a shell script":                        {userData: b64([]byte("#!/bin/sh\necho hello\n")), notKubeadm: true},
		"cloud-config without kubeadm":          {userData: b64([]byte("#cloud-config\npackages: [htop]\n")), notKubeadm: true},
		"not base64":                            {userData: "%%%not base64%%%"},
		"invalid YAML":                          {userData: b64([]byte("#cloud-config\nwrite_files: [\n"))},
		"an unknown file encoding":              {userData: b64([]byte("#cloud-config\nwrite_files:\n- path: /x\n  encoding: rot13\n  content: abc\n"))},
		"a join configuration with no endpoint": {userData: b64([]byte("#cloud-config\nwrite_files:\n- path: /run/kubeadm/kubeadm-join-config.yaml\n  content: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: JoinConfiguration\n"))},
	} {
		t.Run(name, func(t *testing.T) {
			n, err := Parse(tc.userData, testServer)
			require.Error(t, err)
			assert.Nil(t, n)
			assert.Equal(t, tc.notKubeadm, err == ErrNotKubeadm, "%v", err)
		})
	}
}
