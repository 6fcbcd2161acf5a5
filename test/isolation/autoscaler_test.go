package isolation

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// The admission policies of the cluster-autoscaler (deploy/kubernetes/admission-policy.yaml).
const (
	rolesPolicy       = "magnum-capi-bridge-autoscaler-roles"
	deploymentsPolicy = "magnum-capi-bridge-autoscaler-deployments"
	bindsPolicy       = "magnum-capi-bridge-binds-only-itself"
)

func asUnstructured(t *testing.T, o runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	delete(u.Object, "status")
	return u
}

// renderAutoscaler is what the bridge applies for an autoscaled cluster of the scratch project.
func renderAutoscaler(t *testing.T, namespace, project, cluster string) *autoscaler.Objects {
	t.Helper()
	o, err := autoscaler.Render(autoscaler.Input{Namespace: namespace, Cluster: cluster, ClusterUUID: "00000000-0000-4000-8000-" + testutil.RandomHex(6),
		ProjectID: project, KubernetesVersion: "v1.36.3", MachineDeployments: []string{cluster + "-default-worker-q9z8m"},
		Settings: autoscaler.DefaultSettings})
	require.NoError(t, err)
	return o
}

// TestBridgeWritesOnlyAutoscalers: the bridge may write a cluster-autoscaler's ServiceAccount, Role,
// RoleBinding and Deployment as internal/autoscaler renders them (server-side apply with its own
// token), and the admission policies refuse it any other Role, binding or Deployment, although RBAC
// grants it escalate and bind on roles and Deployment writes cluster-wide. Then the autoscaler's own
// token may annotate a Machine of its cluster and no other, and change no Machine's spec.
func TestBridgeWritesOnlyAutoscalers(t *testing.T) {
	f := setup(t)
	ns, project := f.scratchProject(t, f.bridge)
	ctx := ctxFor(t, 3*time.Minute)
	cluster, other := "as-"+testutil.RandomHex(4), "as-"+testutil.RandomHex(4)
	o := renderAutoscaler(t, ns, project, cluster)
	name := autoscaler.Name(cluster)

	// Allowed: the four objects, for real (the Machines below need the binding in force).
	require.NoError(t, f.bridge.Apply(ctx, asUnstructured(t, o.ServiceAccount), asUnstructured(t, o.Role),
		asUnstructured(t, o.RoleBinding), asUnstructured(t, o.Deployment)))

	refused := func(what string, obj runtime.Object, policy, message string) {
		t.Helper()
		err := f.bridge.DryRunApply(ctx, asUnstructured(t, obj))
		require.Error(t, err, what)
		require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%s: %v", what, err)
		require.Contains(t, err.Error(), policy, what)
		require.Contains(t, err.Error(), message, what)
	}

	// Roles: an autoscaler's only.
	role := func(mutate func(*rbacv1.Role)) *rbacv1.Role {
		r := o.Role.DeepCopy()
		mutate(r)
		return r
	}
	mdWrite := func(names ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machinedeployments", "machinedeployments/scale"},
			Verbs: []string{"get", "update", "patch"}, ResourceNames: names}
	}
	refused("a Role granting secrets", role(func(r *rbacv1.Role) {
		r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	}), rolesPolicy, "may only get, list and watch")
	refused("a Role granting configmaps in a CAPI group's name", role(func(r *rbacv1.Role) {
		r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{"", "cluster.x-k8s.io"}, Resources: []string{"configmaps"}, Verbs: []string{"list"}})
	}), rolesPolicy, "may only get, list and watch")
	refused("a Role with MachineDeployment writes without resourceNames", role(func(r *rbacv1.Role) {
		r.Rules = append(r.Rules, mdWrite())
	}), rolesPolicy, "each starting with "+cluster+"-")
	refused("a Role with another cluster's MachineDeployments", role(func(r *rbacv1.Role) {
		r.Rules = append(r.Rules, mdWrite(cluster+"-default-worker-q9z8m", other+"-default-worker-abcde"))
	}), rolesPolicy, "each starting with "+cluster+"-")
	refused("a Role with a wildcard", role(func(r *rbacv1.Role) {
		r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get"}})
	}), rolesPolicy, "no wildcard")
	refused("a Role deleting machines", role(func(r *rbacv1.Role) {
		r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machines"}, Verbs: []string{"delete"}})
	}), rolesPolicy, "update and patch machines")
	refused("a Role of another name", role(func(r *rbacv1.Role) { r.Name = "probe" }), rolesPolicy, "not probe")
	// (A Role with nonResourceURLs is refused by the apiserver's own validation, before the policy.)

	// No token Secret of the autoscaler's ServiceAccount (nor any other): the legacy token controller
	// would fill it in for the bridge to read.
	token := &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-token", Namespace: ns, Annotations: map[string]string{corev1.ServiceAccountNameKey: name}},
		Type:       corev1.SecretTypeServiceAccountToken}
	refused("a token Secret of the autoscaler's ServiceAccount", token, "magnum-capi-bridge-project-namespaces-only",
		"may not write Secrets of type kubernetes.io/service-account-token")

	// RoleBindings: the autoscaler's Role, to its own ServiceAccount only.
	binding := func(mutate func(*rbacv1.RoleBinding)) *rbacv1.RoleBinding {
		b := o.RoleBinding.DeepCopy()
		mutate(b)
		return b
	}
	const bindsMessage = "a Role <cluster>-autoscaler, in a RoleBinding of the same name"
	refused("the autoscaler's Role for another ServiceAccount", binding(func(b *rbacv1.RoleBinding) { b.Subjects[0].Name = "default" }),
		bindsPolicy, bindsMessage)
	refused("the autoscaler's Role for its name in another namespace", binding(func(b *rbacv1.RoleBinding) { b.Subjects[0].Namespace = "kube-system" }),
		bindsPolicy, bindsMessage)
	refused("the autoscaler's Role for the bridge too", binding(func(b *rbacv1.RoleBinding) {
		b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Namespace: bridgeNamespace, Name: "magnum-capi-bridge"})
	}), bindsPolicy, bindsMessage)
	// (A new binding: the roleRef of an existing one is immutable.)
	refused("another cluster's autoscaler Role", binding(func(b *rbacv1.RoleBinding) {
		b.Name, b.RoleRef.Name, b.Subjects[0].Name = "probe-autoscaler", autoscaler.Name(other), "probe-autoscaler"
	}), bindsPolicy, bindsMessage)
	refused("a Role not an autoscaler's", binding(func(b *rbacv1.RoleBinding) {
		b.Name, b.RoleRef.Name, b.Subjects[0].Name = "probe", "probe", "probe"
	}), bindsPolicy, bindsMessage)

	// Deployments: the autoscaler's image, ServiceAccount, PriorityClass and kubeconfig Secret only.
	deployment := func(mutate func(*corev1.PodSpec)) *appsv1.Deployment {
		d := o.Deployment.DeepCopy()
		mutate(&d.Spec.Template.Spec)
		return d
	}
	refused("a Deployment mounting another Secret", deployment(func(p *corev1.PodSpec) {
		p.Volumes[0].Secret.SecretName = cluster + "-ca"
	}), deploymentsPolicy, "its only volume may be the Secret "+cluster+"-kubeconfig")
	refused("a Deployment mounting another cluster's kubeconfig", deployment(func(p *corev1.PodSpec) {
		p.Volumes[0].Secret.SecretName = autoscaler.KubeconfigSecret(other)
	}), deploymentsPolicy, "its only volume may be the Secret "+cluster+"-kubeconfig")
	refused("a Deployment with a hostPath", deployment(func(p *corev1.PodSpec) {
		p.Volumes = append(p.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	}), deploymentsPolicy, "its only volume may be")
	refused("a Deployment with another serviceAccountName", deployment(func(p *corev1.PodSpec) { p.ServiceAccountName = "default" }),
		deploymentsPolicy, "its pods must run as the ServiceAccount "+name)
	refused("a Deployment with another image", deployment(func(p *corev1.PodSpec) { p.Containers[0].Image = "docker.io/library/busybox:1" }),
		deploymentsPolicy, "the image <repository>/cluster-autoscaler:<tag>")
	refused("a Deployment with a second container", deployment(func(p *corev1.PodSpec) {
		p.Containers = append(p.Containers, p.Containers[0])
		p.Containers[1].Name = "second"
	}), deploymentsPolicy, "exactly one container")
	refused("a Deployment with an init container", deployment(func(p *corev1.PodSpec) {
		p.InitContainers = []corev1.Container{{Name: "init", Image: p.Containers[0].Image}}
	}), deploymentsPolicy, "no init or ephemeral containers")
	refused("a Deployment of another PriorityClass", deployment(func(p *corev1.PodSpec) { p.PriorityClassName = "system-cluster-critical" }),
		deploymentsPolicy, "priorityClassName magnum-cluster-autoscaler")
	refused("a privileged Deployment", deployment(func(p *corev1.PodSpec) {
		p.Containers[0].SecurityContext.Privileged = ptr.To(true)
		p.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
	}), deploymentsPolicy, "neither privileged nor allowPrivilegeEscalation")
	refused("a Deployment on the host's network", deployment(func(p *corev1.PodSpec) { p.HostNetwork = true }),
		deploymentsPolicy, "no hostNetwork")
	refused("a Deployment of another name", func() *appsv1.Deployment {
		d := o.Deployment.DeepCopy()
		d.Name = "probe"
		return d
	}(), deploymentsPolicy, "not probe")

	// The autoscaler's token: its Machines, annotated, and no other cluster's.
	own, foreign := f.machine(t, ns, cluster), f.machine(t, ns, other)
	auto := f.serviceAccountClient(t, ns, name)
	// The authorizer follows new RoleBindings through a watch.
	testutil.Eventually(t, 30*time.Second, "the autoscaler's RoleBinding in force", func() error {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "patch", Group: "cluster.x-k8s.io", Resource: "machines"}}}
		if err := auto.Create(ctx, r); err != nil {
			return err
		}
		if !r.Status.Allowed {
			return errors.New("not yet allowed to patch machines")
		}
		return nil
	})
	annotate := func(m string) error {
		patch := []byte(`{"metadata":{"annotations":{"` + clusterv1.DeleteMachineAnnotation + `":"yes"}}}`)
		return auto.Patch(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m}}, client.RawPatch(types.MergePatchType, patch))
	}
	require.NoError(t, annotate(own), "the autoscaler annotates a Machine of its own cluster")
	var m clusterv1.Machine
	require.NoError(t, f.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: own}, &m))
	require.Equal(t, "yes", m.Annotations[clusterv1.DeleteMachineAnnotation])

	const policy = "magnum-cluster-autoscaler-own-cluster"
	err := annotate(foreign)
	require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "another cluster's Machine: %v", err)
	require.Contains(t, err.Error(), policy)
	require.Contains(t, err.Error(), name+" may only change the Machines of its own cluster, not "+foreign)
	err = auto.Patch(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: own}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"minReadySeconds":7}}`)))
	require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "its own Machine's spec: %v", err)
	require.Contains(t, err.Error(), "may only annotate Machine "+own)
	err = auto.Patch(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: foreign}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+clusterv1.ClusterNameLabel+`":"`+cluster+`"}}}`)))
	require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "relabelling another cluster's Machine as its own: %v", err)
	require.Contains(t, err.Error(), policy)
	// RBAC, not the policy, keeps it from everything else.
	for _, a := range []authorizationv1.ResourceAttributes{
		{Namespace: ns, Verb: "get", Resource: "secrets", Name: autoscaler.KubeconfigSecret(cluster)},
		{Namespace: ns, Verb: "patch", Group: "cluster.x-k8s.io", Resource: "machinedeployments", Name: other + "-default-worker-abcde"},
		{Namespace: ns, Verb: "delete", Group: "cluster.x-k8s.io", Resource: "machines"},
		{Namespace: ns, Verb: "patch", Group: "cluster.x-k8s.io", Resource: "clusters"},
		{Verb: "list", Group: "cluster.x-k8s.io", Resource: "machines"},
	} {
		require.False(t, can(t, auto, a), "the autoscaler must not %s", describe(a))
	}
	require.True(t, can(t, auto, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Group: "cluster.x-k8s.io",
		Resource: "machinedeployments", Subresource: "scale", Name: cluster + "-default-worker-q9z8m"}))

	// Deleted with its cluster, by label.
	sel := client.MatchingLabels{templates.LabelClusterUUID: o.Deployment.Labels[templates.LabelClusterUUID], "app.kubernetes.io/component": autoscaler.Component}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &rbacv1.RoleBinding{}, &rbacv1.Role{}, &corev1.ServiceAccount{}} {
		require.NoError(t, f.bridge.DeleteAllOf(ctx, obj, client.InNamespace(ns), sel), "deletecollection %T", obj)
	}
	var sas corev1.ServiceAccountList
	require.NoError(t, f.admin.List(ctx, &sas, client.InNamespace(ns), sel))
	require.Empty(t, sas.Items)
}

// machine creates, as the admin, a Machine of the Cluster API cluster named cluster (which need not
// exist) in namespace; CAPI's webhook labels it with the cluster's name.
func (f *fixture) machine(t *testing.T, namespace, cluster string) string {
	t.Helper()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cluster + "-md-" + testutil.RandomHex(3)},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(cluster + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DevMachine", Name: cluster}}}
	require.NoError(t, f.admin.Create(ctxFor(t, 30*time.Second), m))
	require.Equal(t, cluster, m.Labels[clusterv1.ClusterNameLabel])
	return m.Name
}

// serviceAccountClient is a client with a token of the ServiceAccount (TokenRequest as the admin).
func (f *fixture) serviceAccountClient(t *testing.T, namespace, name string) client.Client {
	t.Helper()
	cfg, err := capi.RESTConfig(adminKubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctxFor(t, 20*time.Second), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sa := rest.AnonymousClientConfig(cfg)
	sa.BearerToken = tr.Status.Token
	scheme, err := capi.NewScheme()
	require.NoError(t, err)
	c, err := client.New(sa, client.Options{Scheme: scheme})
	require.NoError(t, err)
	require.Equal(t, "system:serviceaccount:"+namespace+":"+name, whoAmI(t, c))
	return c
}
