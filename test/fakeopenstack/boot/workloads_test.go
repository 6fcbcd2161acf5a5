package boot

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cluster-api/util/secret"
)

// freeEndpoint finds a free port on ip, which every machine can bind without configuration: Linux
// routes all of 127.0.0.0/8 to the loopback interface.
func freeEndpoint(t *testing.T, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	endpoint := l.Addr().String()
	require.NoError(t, l.Close())
	return endpoint
}

// TestWorkloadsServeClustersByAddress: two workload clusters on two addresses, each answering
// with its own objects over TLS that verifies against its own CA (no insecure skip), as CAPI's
// controllers will reach them through the kubeconfig made from the cluster's CA.
func TestWorkloadsServeClustersByAddress(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := NewWorkloads(ctx, logr.Discard())
	require.NoError(t, err)
	defer func() { _ = w.Close() }()

	caA := clusterCerts(t).GetByPurpose(secret.ClusterCA).KeyPair
	other := secret.NewCertificatesForInitialControlPlane(nil)
	require.NoError(t, other.Generate())
	caB := other.GetByPurpose(secret.ClusterCA).KeyPair

	a, b := freeEndpoint(t, "127.24.4.21"), freeEndpoint(t, "127.24.4.22")
	require.NoError(t, w.Serve(a, KeyPair{Cert: caA.Cert, Key: caA.Key}))
	require.NoError(t, w.Serve(a, KeyPair{Cert: caA.Cert, Key: caA.Key}), "serving the same endpoint again is a no-op")
	require.NoError(t, w.Serve(b, KeyPair{Cert: caB.Cert, Key: caB.Key}))
	for endpoint, node := range map[string]string{a: "cluster-a-cp-0", b: "cluster-b-cp-0"} {
		c, err := w.Client(endpoint)
		require.NoError(t, err)
		require.NoError(t, c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: corev1.NodeSpec{ProviderID: "openstack:///" + node}}))
	}

	list := func(endpoint string, ca []byte) ([]string, error) {
		cs, err := kubernetes.NewForConfig(&rest.Config{Host: "https://" + endpoint, Timeout: 10 * time.Second,
			TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
		require.NoError(t, err)
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.Name+" "+n.Spec.ProviderID)
		}
		return names, nil
	}
	names, err := list(a, caA.Cert)
	require.NoError(t, err)
	assert.Equal(t, []string{"cluster-a-cp-0 openstack:///cluster-a-cp-0"}, names)
	names, err = list(b, caB.Cert)
	require.NoError(t, err)
	assert.Equal(t, []string{"cluster-b-cp-0 openstack:///cluster-b-cp-0"}, names)
	_, err = list(a, caB.Cert)
	require.Error(t, err, "cluster a's certificate is not trusted with cluster b's CA")

	w.Stop(a)
	_, err = list(a, caA.Cert)
	require.Error(t, err, "a stopped endpoint no longer answers")
	_, err = w.Client(a)
	require.Error(t, err)
	names, err = list(b, caB.Cert)
	require.NoError(t, err, "stopping one cluster leaves the other")
	assert.Len(t, names, 1)

	require.Error(t, w.Serve("cluster.example:6443", KeyPair{Cert: caA.Cert, Key: caA.Key}), "only addresses")
	require.Error(t, w.Serve(freeEndpoint(t, "127.24.4.23"), KeyPair{Cert: []byte("junk"), Key: caA.Key}))
}
