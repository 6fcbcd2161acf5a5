package boot

// What kubeadm and the kubelet leave in a cluster when a node boots, as CAPD's in-memory backend
// simulates it (cluster-api test/infrastructure/docker/internal/controllers/backends/inmemory,
// Apache-2.0): enough for CAPI's controllers to find the Node by its provider ID, for the kubeadm
// control plane provider to see the static pods and the etcd members, and for CABPK to join nodes.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	"sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime/client"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// JoinTimeout is how long a joining node waits for its cluster's API and its bootstrap token, as
// kubeadm's discovery does before it gives up.
const JoinTimeout = 5 * time.Minute

// booted is a server that became a node.
type booted struct {
	endpoint     string
	name         string
	controlPlane bool
}

// ErrNoCluster: a joining node found no cluster at its endpoint, or its token was not accepted.
var ErrNoCluster = errors.New("no cluster accepted the node")

// Boot makes of server serverID the node its user data describes: kubeadm init starts the cluster's
// API at the node's endpoint; a join waits (up to JoinTimeout, or ctx) until that API answers and
// knows the node's bootstrap token, then registers the node — a control-plane join also adds an
// etcd member and the control-plane pods.
func (w *Workloads) Boot(ctx context.Context, serverID string, n *Node) error {
	if n.Role == RoleInit {
		if err := w.serveCluster(ctx, n); err != nil {
			return err
		}
	} else if err := w.awaitJoin(ctx, n); err != nil {
		return err
	}
	c, err := w.Client(n.Endpoint)
	if err != nil {
		return err
	}
	controlPlane, version := n.Role != RoleJoinWorker, cmp.Or(n.KubeletVersion, w.version(n.Endpoint))
	if err := createAll(ctx, c, nodeObject(n, controlPlane, version)); err != nil {
		return err
	}
	if controlPlane {
		etcd, err := etcdMemberPod(ctx, c, n.Name)
		if err != nil {
			return err
		}
		objs := append([]ctrlclient.Object{etcd}, controlPlanePods(n.Name)...)
		if n.Role == RoleInit {
			objs = append(objs, clusterObjects(version)...)
		}
		if err := createAll(ctx, c, objs...); err != nil {
			return err
		}
	}
	w.mu.Lock()
	w.nodes[serverID] = booted{endpoint: n.Endpoint, name: n.Name, controlPlane: controlPlane}
	w.mu.Unlock()
	if err := ctx.Err(); err != nil { // the server was deleted while it booted
		return errors.Join(err, w.Halt(context.WithoutCancel(ctx), serverID))
	}
	return nil
}

// Halt is the server's deletion: its node and static pods go; the cluster's API stops answering at
// its endpoint once no API server pod is left.
func (w *Workloads) Halt(ctx context.Context, serverID string) error {
	w.mu.Lock()
	b, ok := w.nodes[serverID]
	delete(w.nodes, serverID)
	w.mu.Unlock()
	if !ok {
		return nil
	}
	c, err := w.Client(b.endpoint)
	if err != nil {
		return nil // the cluster already stopped
	}
	objs := []ctrlclient.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: b.name}}}
	if b.controlPlane {
		objs = append(objs, controlPlanePods(b.name)...)
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "etcd-" + b.name}})
	}
	for _, o := range objs {
		if err := c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, ctrlclient.InNamespace(metav1.NamespaceSystem),
		ctrlclient.MatchingLabels{"component": "kube-apiserver"}); err != nil {
		return err
	}
	if len(pods.Items) == 0 {
		w.Stop(b.endpoint)
	}
	return nil
}

// serveCluster starts the API of the cluster n initialises.
func (w *Workloads) serveCluster(ctx context.Context, n *Node) error {
	if len(n.CA.Cert) == 0 || len(n.EtcdCA.Cert) == 0 {
		return errors.New("kubeadm init without the cluster's CA or etcd CA in the user data")
	}
	if err := w.Serve(n.Endpoint, n.CA); err != nil {
		return err
	}
	etcdCert, err := servingCertificate(n.EtcdCA, "etcd", nil)
	if err != nil {
		return fmt.Errorf("etcd serving certificate: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wl := w.clusters[n.Endpoint]
	wl.etcdCert, wl.version = etcdCert, n.KubernetesVersion
	c := w.mgr.GetResourceGroup(n.Endpoint).GetClient()
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespacePublic, metav1.NamespaceSystem} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// awaitJoin waits until the node's cluster answers and holds the node's bootstrap token
// (kube-system/bootstrap-token-<id> with the token's secret), as kubeadm join's discovery does.
func (w *Workloads) awaitJoin(ctx context.Context, n *Node) error {
	id, tokenSecret, ok := strings.Cut(n.Token, ".")
	if !ok {
		return fmt.Errorf("%w: the bootstrap token is not <id>.<secret>", ErrNoCluster)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, JoinTimeout, true, func(ctx context.Context) (bool, error) {
		c, err := w.Client(n.Endpoint)
		if err != nil {
			return false, nil
		}
		s := &corev1.Secret{}
		if err := c.Get(ctx, ctrlclient.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "bootstrap-token-" + id}, s); err != nil {
			return false, nil
		}
		return string(s.Data["token-secret"]) == tokenSecret, nil
	})
	if err != nil {
		return fmt.Errorf("%w at %s within %s: %v", ErrNoCluster, n.Endpoint, JoinTimeout, err)
	}
	return nil
}

func (w *Workloads) version(endpoint string) string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if wl, ok := w.clusters[endpoint]; ok {
		return wl.version
	}
	return ""
}

func createAll(ctx context.Context, c client.Client, objs ...ctrlclient.Object) error {
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// nodeObject is the Node the kubelet registers: Ready, with the user data's labels and taints and,
// on a control-plane node, kubeadm's role label and (unless the user data chose taints) its taint.
func nodeObject(n *Node, controlPlane bool, version string) *corev1.Node {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{}},
		Spec:       corev1.NodeSpec{ProviderID: n.ProviderID},
		Status: corev1.NodeStatus{
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: version},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: metav1.Now()},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastTransitionTime: metav1.Now()},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastTransitionTime: metav1.Now()},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastTransitionTime: metav1.Now()},
			},
		},
	}
	for k, v := range n.Labels {
		node.Labels[k] = v
	}
	for _, t := range n.Taints {
		node.Spec.Taints = append(node.Spec.Taints, parseTaint(t))
	}
	if controlPlane {
		node.Labels["node-role.kubernetes.io/control-plane"] = ""
		if len(n.Taints) == 0 {
			node.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		}
	}
	return node
}

// parseTaint reads the kubelet's key[=value]:effect.
func parseTaint(s string) corev1.Taint {
	kv, effect, _ := strings.Cut(s, ":")
	k, v, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}
}

// etcdMemberPod is the node's etcd static pod; its annotations make it a member of the cluster's
// etcd for CAPI's in-memory etcd server (the first member leads).
func etcdMemberPod(ctx context.Context, c client.Client, node string) (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, ctrlclient.InNamespace(metav1.NamespaceSystem),
		ctrlclient.MatchingLabels{"component": "etcd", "tier": "control-plane"}); err != nil {
		return nil, err
	}
	clusterID, members := "", map[string]bool{}
	for _, p := range pods.Items {
		if _, removed := p.Annotations[cloudv1.EtcdMemberRemoved]; removed {
			continue
		}
		clusterID = p.Annotations[cloudv1.EtcdClusterIDAnnotationName]
		members[p.Annotations[cloudv1.EtcdMemberIDAnnotationName]] = true
	}
	annotations := map[string]string{}
	if clusterID == "" {
		clusterID = strconv.FormatUint(uint64(rand.Uint32()|1), 10)
		annotations[cloudv1.EtcdLeaderFromAnnotationName] = time.Now().Format(time.RFC3339)
	}
	memberID := ""
	for memberID == "" || members[memberID] {
		memberID = strconv.FormatUint(uint64(rand.Uint32()|1), 10)
	}
	annotations[cloudv1.EtcdClusterIDAnnotationName] = clusterID
	annotations[cloudv1.EtcdMemberIDAnnotationName] = memberID
	pod := staticPod("etcd", node)
	pod.Annotations = annotations
	return pod, nil
}

// staticPod is a running control-plane pod kubeadm's manifests start on the node.
func staticPod(component, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: component + "-" + node,
			Labels: map[string]string{"component": component, "tier": "control-plane"}},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func controlPlanePods(node string) []ctrlclient.Object {
	return []ctrlclient.Object{staticPod("kube-apiserver", node), staticPod("kube-scheduler", node),
		staticPod("kube-controller-manager", node)}
}

// clusterObjects are what kubeadm init adds once: the kubeadm-config ConfigMap (its presence tells
// the kubeadm control plane provider the cluster is initialised; the configuration is left empty as
// CAPD does, so that no CoreDNS migration is attempted against the simulated Corefile), the
// bootstrappers' node RBAC, kube-proxy and CoreDNS.
func clusterObjects(version string) []ctrlclient.Object {
	tag := version
	if tag != "" && !strings.HasPrefix(tag, "v") {
		tag = "v" + tag
	}
	return []ctrlclient.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "kubeadm-config"},
			Data: map[string]string{"ClusterConfiguration": ""}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeadm:get-nodes"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:bootstrappers:kubeadm:default-node-token"}}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "kube-proxy",
			Labels: map[string]string{"component": "kube-proxy"}},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:" + strings.ReplaceAll(tag, "+", "_")}}}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "coredns"},
			Data: map[string]string{"Corefile": "ANG"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "coredns"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "coredns", Image: "registry.k8s.io/coredns/coredns:v1.10.1"}}}}}},
	}
}
