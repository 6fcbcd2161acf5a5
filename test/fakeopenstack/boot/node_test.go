package boot

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/cluster-api/util/certs"
	"sigs.k8s.io/cluster-api/util/secret"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// TestBootNodesJoinACluster: kubeadm init on one server serves the cluster's API at its endpoint;
// workers and control-plane nodes join only once that API holds their bootstrap token; etcd
// answers for its members; halting the servers removes their nodes and, with the last API server,
// the endpoint.
func TestBootNodesJoinACluster(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := NewWorkloads(ctx, logr.Discard())
	require.NoError(t, err)
	defer func() { _ = w.Close() }()

	cc := clusterCerts(t)
	ca, etcdCA := cc.GetByPurpose(secret.ClusterCA).KeyPair, cc.GetByPurpose(secret.EtcdCA).KeyPair
	ep := freeEndpoint(t, "127.24.4.31")
	node := func(role Role, name string) *Node {
		n := &Node{Role: role, Name: name, ProviderID: "openstack:///id-" + name, Endpoint: ep, Token: "abcdef.0123456789abcdef",
			Labels: map[string]string{"magnum.openstack.org/nodegroup": "default-worker"}}
		if role != RoleJoinWorker {
			n.CA, n.EtcdCA = KeyPair{Cert: ca.Cert, Key: ca.Key}, KeyPair{Cert: etcdCA.Cert, Key: etcdCA.Key}
			n.Labels = nil
		}
		if role == RoleInit {
			n.KubernetesVersion = "v1.33.1"
		}
		return n
	}

	short, stop := context.WithTimeout(ctx, 2*time.Second)
	err = w.Boot(short, "srv-w0", node(RoleJoinWorker, "w0"))
	stop()
	require.ErrorIs(t, err, ErrNoCluster, "nothing serves the endpoint yet")

	require.NoError(t, w.Boot(ctx, "srv-cp0", node(RoleInit, "cp0")))
	c, err := w.Client(ep)
	require.NoError(t, err)

	short, stop = context.WithTimeout(ctx, 2*time.Second)
	err = w.Boot(short, "srv-w0", node(RoleJoinWorker, "w0"))
	stop()
	require.ErrorIs(t, err, ErrNoCluster, "the API does not know the token yet")
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-abcdef"},
		Data: map[string][]byte{"token-id": []byte("abcdef"), "token-secret": []byte("wrong")}}))
	short, stop = context.WithTimeout(ctx, 2*time.Second)
	err = w.Boot(short, "srv-w0", node(RoleJoinWorker, "w0"))
	stop()
	require.ErrorIs(t, err, ErrNoCluster, "a token with another secret is refused")
	token := &corev1.Secret{}
	require.NoError(t, c.Get(ctx, ctrlclient.ObjectKey{Namespace: "kube-system", Name: "bootstrap-token-abcdef"}, token))
	token.Data["token-secret"] = []byte("0123456789abcdef")
	require.NoError(t, c.Update(ctx, token))
	require.NoError(t, w.Boot(ctx, "srv-w0", node(RoleJoinWorker, "w0")))
	require.NoError(t, w.Boot(ctx, "srv-cp1", node(RoleJoinControlPlane, "cp1")))

	// What CAPI reads, through the API over TLS verified against the cluster's CA.
	cfg := &rest.Config{Host: "https://" + ep, Timeout: 10 * time.Second, TLSClientConfig: rest.TLSClientConfig{CAData: ca.Cert}}
	scheme := runtime.NewScheme()
	require.NoError(t, corev1.AddToScheme(scheme))
	require.NoError(t, storagev1.AddToScheme(scheme))
	require.NoError(t, apiregistrationv1.AddToScheme(scheme))
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	api, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: scheme})
	require.NoError(t, err)
	nodes := &corev1.NodeList{}
	require.NoError(t, api.List(ctx, nodes))
	byName := map[string]corev1.Node{}
	for _, n := range nodes.Items {
		byName[n.Name] = n
	}
	require.Len(t, byName, 3)
	assert.Equal(t, "openstack:///id-w0", byName["w0"].Spec.ProviderID)
	assert.Equal(t, "default-worker", byName["w0"].Labels["magnum.openstack.org/nodegroup"])
	assert.Empty(t, byName["w0"].Spec.Taints)
	assert.Equal(t, "v1.33.1", byName["w0"].Status.NodeInfo.KubeletVersion)
	assert.Contains(t, byName["cp1"].Labels, "node-role.kubernetes.io/control-plane")
	assert.Equal(t, "node-role.kubernetes.io/control-plane", byName["cp1"].Spec.Taints[0].Key)
	pods := &corev1.PodList{}
	require.NoError(t, api.List(ctx, pods, ctrlclient.InNamespace("kube-system")))
	var podNames []string
	for _, p := range pods.Items {
		podNames = append(podNames, p.Name)
	}
	assert.ElementsMatch(t, []string{"etcd-cp0", "kube-apiserver-cp0", "kube-scheduler-cp0", "kube-controller-manager-cp0",
		"etcd-cp1", "kube-apiserver-cp1", "kube-scheduler-cp1", "kube-controller-manager-cp1"}, podNames)
	require.NoError(t, api.Get(ctx, ctrlclient.ObjectKey{Namespace: "kube-system", Name: "kubeadm-config"}, &corev1.ConfigMap{}))

	// etcd, as the kubeadm control plane provider reaches it: TLS with the member's name, the
	// certificate checked against the etcd CA.
	members := etcdMembers(ctx, t, ep, "cp1", etcdCA.Cert)
	assert.ElementsMatch(t, []string{"cp0", "cp1"}, members)

	// Kinds of the add-ons the in-memory API serves, and those it lacks (served by the simulator).
	require.NoError(t, api.Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "cinder.csi.openstack.org"}}))
	require.NoError(t, api.Create(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "ippools.crd.projectcalico.org"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "crd.projectcalico.org", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "ippools", Kind: "IPPool"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}}}}))
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi-cinder"}, Provisioner: "cinder.csi.openstack.org"}
	require.NoError(t, api.Create(ctx, sc))
	require.Error(t, api.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi-cinder"}, Provisioner: "x"}))
	patched := sc.DeepCopy()
	patched.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	require.NoError(t, api.Patch(ctx, patched, ctrlclient.MergeFrom(sc)))
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("storage.k8s.io/v1")
	got.SetKind("StorageClass")
	require.NoError(t, api.Get(ctx, ctrlclient.ObjectKey{Name: "csi-cinder"}, got))
	assert.Equal(t, "true", got.GetAnnotations()["storageclass.kubernetes.io/is-default-class"])
	assert.Equal(t, "cinder.csi.openstack.org", got.Object["provisioner"])
	require.NoError(t, api.Create(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1", GroupPriorityMinimum: 100, VersionPriority: 100}}))
	services := &apiregistrationv1.APIServiceList{}
	require.NoError(t, api.List(ctx, services))
	require.Len(t, services.Items, 1)
	require.NoError(t, api.Delete(ctx, &services.Items[0]))

	require.NoError(t, w.Halt(ctx, "srv-w0"))
	require.NoError(t, w.Halt(ctx, "srv-cp0"))
	require.NoError(t, api.List(ctx, nodes))
	require.Len(t, nodes.Items, 1, "the halted servers' nodes are gone")
	assert.Equal(t, "cp1", nodes.Items[0].Name)
	require.NoError(t, w.Halt(ctx, "srv-cp1"))
	_, err = w.Client(ep)
	require.Error(t, err, "with the last API server gone the endpoint stops")
}

// etcdMembers lists the etcd members through endpoint as member node answers, TLS checked against
// the etcd CA (as CAPI does: the member's certificate is for its own name, not for the endpoint).
func etcdMembers(ctx context.Context, t *testing.T, endpoint, node string, etcdCA []byte) []string {
	t.Helper()
	roots := x509.NewCertPool()
	caCert, err := certs.DecodeCertPEM(etcdCA)
	require.NoError(t, err)
	roots.AddCert(caCert)
	tlsCfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, // the chain is checked below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			leaf, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			_, err = leaf.Verify(x509.VerifyOptions{Roots: roots})
			return err
		}}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"etcd-" + node}, TLS: tlsCfg, DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", endpoint)
		})}})
	require.NoError(t, err)
	defer func() { _ = cli.Close() }()
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(callCtx)
	require.NoError(t, err)
	var names []string
	for _, m := range resp.Members {
		names = append(names, m.Name)
	}
	return names
}
