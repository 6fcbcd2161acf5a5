package isolation

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/kubegroup"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/templatestest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tenantview"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// renderedResources are the resources the bridge applies for a cluster of either flavor, as
// group/plural, from the objects internal/templates renders (so a new kind there without a rule in
// deploy/kubernetes/rbac.yaml fails here).
func renderedResources(t *testing.T, namespace string) map[string]authorizationv1.ResourceAttributes {
	t.Helper()
	out := map[string]authorizationv1.ResourceAttributes{}
	for _, in := range []templates.Input{templatestest.BaseInput(templates.FlavorInMemory), templatestest.BaseOpenStackInput()} {
		in.Namespace = namespace
		r, err := templates.Render(in)
		require.NoError(t, err)
		for _, o := range append(append([]*unstructured.Unstructured{}, r.ClassObjects...), r.Cluster) {
			gvk := o.GroupVersionKind()
			plural := strings.ToLower(gvk.Kind)
			if strings.HasSuffix(plural, "s") {
				plural += "es"
			} else {
				plural += "s"
			}
			out[gvk.Group+"/"+plural] = authorizationv1.ResourceAttributes{Namespace: namespace, Group: gvk.Group, Resource: plural}
		}
	}
	require.Len(t, out, 8, "6 kinds per flavor, 4 of them shared")
	return out
}

// TestBridgeRBAC: the local bridge runs as its ServiceAccount, whose RBAC (deploy/kubernetes/rbac.yaml)
// allows what the bridge does and nothing it should not. Asked of the apiserver with the bridge's own
// token (SelfSubjectAccessReview), and cross-checked as the admin (SubjectAccessReview).
func TestBridgeRBAC(t *testing.T) {
	f := setup(t)
	require.Equal(t, bridgeUser, whoAmI(t, f.bridge.Client), "the local bridge must not run as the management cluster's admin")
	ns, _ := f.scratchProject(t, f.bridge)

	type attrs = authorizationv1.ResourceAttributes
	with := func(a attrs, verbs ...string) []attrs {
		var out []attrs
		for _, v := range verbs {
			a.Verb = v
			out = append(out, a)
		}
		return out
	}
	var allowed []attrs
	// Read too: a day-2 apply keeps the live Cluster's rendering, and `rendering plan` compares the
	// live class with the current one (docs/upgrades.md).
	for _, a := range renderedResources(t, ns) {
		allowed = append(allowed, with(a, "get", "create", "patch")...)
	}
	capiGroup := "cluster.x-k8s.io"
	allowed = append(allowed, with(attrs{Resource: "namespaces"}, "list", "create", "patch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: "networking.k8s.io", Resource: "networkpolicies"}, "create", "patch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Resource: "resourcequotas"}, "create", "patch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, "create", "patch")...)
	allowed = append(allowed, with(attrs{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: capi.SecretReaderRole}, "bind")...)
	allowed = append(allowed, with(attrs{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: capi.ProjectViewerRole}, "bind")...)
	allowed = append(allowed, with(attrs{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: capi.ProjectEditorRole}, "bind")...)
	// The tenant API: the tenants' MagnumClusters, reconciled (never created or deleted by the bridge).
	tenantAPIGroup := "coe.magnum.openstack.org"
	allowed = append(allowed, with(attrs{Namespace: ns, Group: tenantAPIGroup, Resource: "magnumclusters"}, "get", "update", "patch")...)
	allowed = append(allowed, with(attrs{Group: tenantAPIGroup, Resource: "magnumclusters"}, "list", "watch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: tenantAPIGroup, Resource: "magnumclusters", Subresource: "status"}, "get", "update", "patch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: tenantAPIGroup, Resource: "magnumclusters", Subresource: "finalizers"}, "update")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Resource: "secrets"}, "get", "create", "patch", "deletecollection")...)
	allowed = append(allowed, with(attrs{Group: capiGroup, Resource: "clusters"}, "list", "watch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: capiGroup, Resource: "clusters"}, "delete")...)
	allowed = append(allowed, with(attrs{Group: capiGroup, Resource: "machinedeployments"}, "list", "watch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: capiGroup, Resource: "machinesets"}, "list")...)
	// Adoption reads another driver's cluster and labels it as the topology's.
	allowed = append(allowed, with(attrs{Namespace: ns, Group: capiGroup, Resource: "machinedeployments"}, "get", "patch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: capiGroup, Resource: "machinesets"}, "patch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: capiGroup, Resource: "machinehealthchecks"}, "get")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: "controlplane.cluster.x-k8s.io", Resource: "kubeadmcontrolplanes"}, "get", "patch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: "infrastructure.cluster.x-k8s.io", Resource: "openstackclusters"}, "get", "patch")...)
	allowed = append(allowed, with(attrs{Group: capiGroup, Resource: "machines"}, "list", "watch")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: capiGroup, Resource: "machines"}, "patch")...)
	// A cluster-autoscaler's ServiceAccount, Role, RoleBinding and Deployment: applied, deleted by
	// label; the Role grants what the bridge does not hold (escalate) and is bound (bind); the
	// Deployments are watched. The admission policies confine all of it (TestBridgeWritesOnlyAutoscalers).
	allowed = append(allowed, with(attrs{Namespace: ns, Resource: "serviceaccounts"}, "create", "patch", "deletecollection")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: "rbac.authorization.k8s.io", Resource: "roles"},
		"create", "patch", "deletecollection", "escalate", "bind")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}, "deletecollection")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: "apps", Resource: "deployments"}, "create", "patch", "deletecollection")...)
	allowed = append(allowed, with(attrs{Group: "apps", Resource: "deployments"}, "list", "watch")...)
	// Start-up checks the admission policies that confine it, by name.
	for _, p := range capi.AdmissionPolicies() {
		allowed = append(allowed, with(attrs{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies", Name: p}, "get")...)
		allowed = append(allowed, with(attrs{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings", Name: p}, "get")...)
	}
	// Leader election and operation claims: Leases, in its own namespace only.
	allowed = append(allowed, with(attrs{Namespace: bridgeNamespace, Group: "coordination.k8s.io", Resource: "leases"}, "get", "list", "create", "update", "delete")...)
	allowed = append(allowed, with(attrs{Namespace: ns, Group: "addons.cluster.x-k8s.io", Resource: "clusterresourcesets"}, "get", "create", "patch", "deletecollection")...)
	allowed = append(allowed, with(attrs{Group: "addons.cluster.x-k8s.io", Resource: "clusterresourcesets"}, "list", "watch")...)
	allowed = append(allowed, with(attrs{Group: "addons.cluster.x-k8s.io", Resource: "clusterresourcesetbindings"}, "list", "watch")...)

	denied := []attrs{
		{Verb: "get", Namespace: "kube-system", Resource: "secrets"},
		{Verb: "get", Namespace: bridgeNamespace, Resource: "secrets"},
		{Verb: "get", Resource: "secrets"},  // cluster-wide
		{Verb: "list", Resource: "secrets"}, // cluster-wide
		{Verb: "list", Namespace: ns, Resource: "secrets"},
		{Verb: "watch", Namespace: ns, Resource: "secrets"},
		{Verb: "get", Namespace: "kube-system", Resource: "configmaps"},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
		{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "cluster-admin"},
		{Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
		{Verb: "impersonate", Resource: "users"},
		{Verb: "impersonate", Resource: "serviceaccounts", Namespace: "kube-system"},
		{Verb: "create", Namespace: ns, Resource: "pods"},
		{Verb: "create", Namespace: ns, Resource: "pods", Subresource: "exec"},
		{Verb: "get", Namespace: ns, Resource: "pods", Subresource: "log"},
		{Verb: "get", Resource: "nodes"},
		{Verb: "patch", Resource: "nodes"},
		{Verb: "delete", Resource: "nodes"},
		{Verb: "create", Namespace: bridgeNamespace, Resource: "serviceaccounts", Subresource: "token"},
		{Verb: "delete", Resource: "namespaces"},
		{Verb: "get", Resource: "namespaces"},
		{Verb: "delete", Namespace: ns, Resource: "secrets"},
		{Verb: "patch", Namespace: ns, Group: capiGroup, Resource: "clusters", Subresource: "status"},
		{Verb: "delete", Namespace: ns, Group: capiGroup, Resource: "machines"},
		{Verb: "delete", Namespace: ns, Group: capiGroup, Resource: "clusterclasses"},
		{Verb: "create", Namespace: ns, Group: "addons.cluster.x-k8s.io", Resource: "clusterresourcesetbindings"},
		{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"},
		{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"},
		{Verb: "delete", Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"},
		{Verb: "patch", Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"},
		{Verb: "delete", Group: "infrastructure.cluster.x-k8s.io", Resource: "openstackclusters", Namespace: ns},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system"},
		{Verb: "delete", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system"},
		{Verb: "list", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns},
		{Verb: "create", Namespace: bridgeNamespace, Resource: "configmaps"},
		{Verb: "get", Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies", Name: "someone-elses"},
		{Verb: "list", Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"},
		// The autoscaler's rights are the autoscaler's: the bridge neither holds them nor can get its token.
		{Verb: "delete", Namespace: ns, Group: capiGroup, Resource: "machinedeployments"},
		{Verb: "update", Namespace: ns, Group: capiGroup, Resource: "machinedeployments", Subresource: "scale"},
		{Verb: "create", Namespace: ns, Resource: "serviceaccounts", Subresource: "token"},
		{Verb: "get", Namespace: ns, Resource: "serviceaccounts"},
		{Verb: "delete", Namespace: ns, Resource: "serviceaccounts"},
		{Verb: "delete", Namespace: ns, Group: "rbac.authorization.k8s.io", Resource: "roles"},
		{Verb: "bind", Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "admin"},
		// Deployments only: no other workload, no scale or status subresource, no pods.
		{Verb: "delete", Namespace: ns, Group: "apps", Resource: "deployments"},
		{Verb: "update", Namespace: ns, Group: "apps", Resource: "deployments"},
		{Verb: "patch", Namespace: ns, Group: "apps", Resource: "deployments", Subresource: "scale"},
		{Verb: "patch", Namespace: ns, Group: "apps", Resource: "deployments", Subresource: "status"},
		{Verb: "create", Namespace: ns, Group: "apps", Resource: "replicasets"},
		{Verb: "create", Namespace: ns, Group: "apps", Resource: "daemonsets"},
		{Verb: "create", Namespace: ns, Group: "apps", Resource: "statefulsets"},
		{Verb: "create", Namespace: ns, Group: "batch", Resource: "jobs"},
		{Verb: "create", Namespace: ns, Group: "batch", Resource: "cronjobs"},
		{Verb: "list", Namespace: ns, Resource: "pods"},
		{Verb: "create", Group: "scheduling.k8s.io", Resource: "priorityclasses"},
		{Verb: "create", Namespace: ns, Group: tenantAPIGroup, Resource: "magnumclusters"},
		{Verb: "delete", Namespace: ns, Group: tenantAPIGroup, Resource: "magnumclusters"},
	}

	for _, a := range allowed {
		require.True(t, can(t, f.bridge.Client, a), "the bridge needs to %s", describe(a))
	}
	for _, a := range denied {
		require.False(t, can(t, f.bridge.Client, a), "the bridge must not %s", describe(a))
	}

	// The same answers for the ServiceAccount when the admin asks: the rules are RBAC's, not the token's.
	sar := func(a attrs) bool {
		r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: bridgeUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + bridgeNamespace, "system:authenticated"},
			ResourceAttributes: &a}}
		require.NoError(t, f.admin.Create(ctxFor(t, 20*time.Second), r))
		return r.Status.Allowed
	}
	require.True(t, sar(attrs{Verb: "get", Namespace: ns, Resource: "secrets"}))
	require.False(t, sar(attrs{Verb: "get", Namespace: "kube-system", Resource: "secrets"}))
	require.False(t, sar(attrs{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}))
}

// TestBridgeWritesOnlyProjectNamespaces: RBAC has to grant the bridge its writes cluster-wide
// (project namespaces do not exist in advance); the admission policies of
// deploy/kubernetes/admission-policy.yaml confine them. Real requests with the bridge's token, as
// server-side dry runs: admission runs, nothing is stored.
func TestBridgeWritesOnlyProjectNamespaces(t *testing.T) {
	f := setup(t)
	ns, project := f.scratchProject(t, f.bridge)
	ctx := ctxFor(t, time.Minute)
	dry := client.DryRunAll

	// Allowed: a Secret in a project namespace.
	require.NoError(t, f.bridge.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}}, dry))

	refused := func(what string, err error, policy string) {
		t.Helper()
		require.Error(t, err, what)
		require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%s: %v", what, err)
		require.Contains(t, err.Error(), policy, what)
	}
	// RBAC would allow these; the policy refuses them.
	refused("a Secret in kube-system", f.bridge.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "kube-system"}}, dry),
		"magnum-capi-bridge-project-namespaces-only")
	refused("a Secret in the bridge's own namespace", f.bridge.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: bridgeNamespace}}, dry),
		"magnum-capi-bridge-project-namespaces-only")
	refused("a ResourceQuota in default", f.bridge.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: {}}}}, dry), "magnum-capi-bridge-project-namespaces-only")

	// Namespaces: only new ones, labelled as the bridge's; kube-system cannot be adopted.
	adopt := &unstructured.Unstructured{}
	adopt.SetAPIVersion("v1")
	adopt.SetKind("Namespace")
	adopt.SetName("kube-system")
	adopt.SetLabels(map[string]string{templates.LabelManagedBy: templates.ManagedByValue, templates.LabelProjectID: "0123"})
	refused("labelling kube-system as a project namespace",
		f.bridge.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(adopt), client.FieldOwner(capi.FieldManager), client.ForceOwnership, dry),
		"magnum-capi-bridge-own-namespaces")
	refused("an unlabelled namespace", f.bridge.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scratchPrefix + testutil.RandomHex(4)}}, dry),
		"magnum-capi-bridge-own-namespaces")

	// RoleBindings: only the Secret reader role, only to itself.
	binding := func(role string, subject rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + testutil.RandomHex(3), Namespace: ns},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: []rbacv1.Subject{subject}}
	}
	self := rbacv1.Subject{Kind: "ServiceAccount", Namespace: bridgeNamespace, Name: "magnum-capi-bridge"}
	require.NoError(t, f.bridge.Create(ctx, binding(capi.SecretReaderRole, self), dry))
	refused("the Secret reader role for someone else",
		f.bridge.Create(ctx, binding(capi.SecretReaderRole, rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "mallory"}), dry),
		"magnum-capi-bridge-binds-only-itself")
	// The tenant view's role: only to the Keystone group of the namespace's own project.
	group := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: "Group", APIGroup: rbacv1.GroupName, Name: name}
	}
	require.NoError(t, f.bridge.Create(ctx, binding(capi.ProjectViewerRole, group(kubegroup.Project(project))), dry))
	refused("the viewer role for another project's group",
		f.bridge.Create(ctx, binding(capi.ProjectViewerRole, group(kubegroup.Project(testutil.RandomHex(16)))), dry),
		"magnum-capi-bridge-binds-only-itself")
	refused("the viewer role for a user",
		f.bridge.Create(ctx, binding(capi.ProjectViewerRole, rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "mallory"}), dry),
		"magnum-capi-bridge-binds-only-itself")
	refused("the viewer role for system:authenticated",
		f.bridge.Create(ctx, binding(capi.ProjectViewerRole, group("system:authenticated")), dry),
		"magnum-capi-bridge-binds-only-itself")
	refused("the Secret reader role for the project's group",
		f.bridge.Create(ctx, binding(capi.SecretReaderRole, group(kubegroup.Project(project))), dry),
		"magnum-capi-bridge-binds-only-itself")
	// The tenant API's role: only to the group of the namespace's own project's members.
	require.NoError(t, f.bridge.Create(ctx, binding(capi.ProjectEditorRole, group(kubegroup.ProjectRole(project, capi.EditorKeystoneRole))), dry))
	refused("the editor role for the project's every token",
		f.bridge.Create(ctx, binding(capi.ProjectEditorRole, group(kubegroup.Project(project))), dry),
		"magnum-capi-bridge-binds-only-itself")
	refused("the editor role for another project's members",
		f.bridge.Create(ctx, binding(capi.ProjectEditorRole, group(kubegroup.ProjectRole(testutil.RandomHex(16), capi.EditorKeystoneRole))), dry),
		"magnum-capi-bridge-binds-only-itself")
	err := f.bridge.Create(ctx, binding("cluster-admin", self), dry)
	require.True(t, apierrors.IsForbidden(err), "binding cluster-admin to itself: %v", err)
	require.Contains(t, err.Error(), "attempting to grant RBAC permissions not currently held")
}

// TestProjectViewerRBAC: with the tenant view on, a project namespace binds magnum-project-viewer to
// the project's Keystone group, which may read the CAPI objects and events there and nothing else:
// no Secrets, no writes, no other namespace, nothing cluster-scoped. Asked of the apiserver as the
// admin (SubjectAccessReview for a user in that group); test/tenantview does it with real Keystone
// tokens through the webhook.
func TestProjectViewerRBAC(t *testing.T) {
	f := setup(t)
	viewerBridge := newClient(t, f.opts.Bridge.Kubeconfig)
	viewerBridge.ProjectViewers = true
	ns, project := f.scratchProject(t, viewerBridge)
	other, _ := f.scratchProject(t, f.bridge)
	var rb rbacv1.RoleBinding
	require.NoError(t, f.admin.Get(ctxFor(t, 20*time.Second), client.ObjectKey{Namespace: ns, Name: capi.ViewerBindingName}, &rb))
	require.Equal(t, capi.ProjectViewerRole, rb.RoleRef.Name)
	require.Equal(t, []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: kubegroup.Project(project)}}, rb.Subjects)

	member := tenantview.UserInfo(keystoneIdentity(project))
	sar := func(a authorizationv1.ResourceAttributes) bool {
		t.Helper()
		r := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: member.Username, Groups: append(member.Groups, "system:authenticated"), ResourceAttributes: &a}}
		require.NoError(t, f.admin.Create(ctxFor(t, 20*time.Second), r))
		return r.Status.Allowed
	}
	type attrs = authorizationv1.ResourceAttributes
	read := []attrs{
		{Group: "cluster.x-k8s.io", Resource: "clusters"}, {Group: "cluster.x-k8s.io", Resource: "machinedeployments"},
		{Group: "cluster.x-k8s.io", Resource: "machinesets"}, {Group: "cluster.x-k8s.io", Resource: "machines"},
		{Group: "controlplane.cluster.x-k8s.io", Resource: "kubeadmcontrolplanes"},
		{Group: "infrastructure.cluster.x-k8s.io", Resource: "devclusters"}, {Group: "infrastructure.cluster.x-k8s.io", Resource: "devmachines"},
		{Group: "infrastructure.cluster.x-k8s.io", Resource: "openstackclusters"}, {Group: "infrastructure.cluster.x-k8s.io", Resource: "openstackmachines"},
		{Resource: "events"}, {Group: "events.k8s.io", Resource: "events"},
		{Group: "coe.magnum.openstack.org", Resource: "magnumclusters"},
	}
	// Poll: the authorizer follows new RoleBindings through a watch.
	require.Eventually(t, func() bool {
		return sar(attrs{Namespace: ns, Verb: "list", Group: "cluster.x-k8s.io", Resource: "clusters"})
	},
		10*time.Second, 100*time.Millisecond)
	for _, a := range read {
		for _, verb := range []string{"get", "list", "watch"} {
			a.Verb, a.Namespace = verb, ns
			require.True(t, sar(a), "%s %s/%s in the project's namespace", verb, a.Group, a.Resource)
			a.Namespace = other
			require.False(t, sar(a), "%s %s/%s in another project's namespace", verb, a.Group, a.Resource)
			a.Namespace = ""
			require.False(t, sar(a), "%s %s/%s cluster-wide", verb, a.Group, a.Resource)
		}
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
			a.Verb, a.Namespace = verb, ns
			require.False(t, sar(a), "%s %s/%s", verb, a.Group, a.Resource)
		}
	}
	for _, a := range []attrs{
		{Namespace: ns, Verb: "get", Resource: "secrets"}, {Namespace: ns, Verb: "list", Resource: "secrets"},
		{Namespace: ns, Verb: "watch", Resource: "secrets"}, {Namespace: ns, Verb: "list", Resource: "configmaps"},
		{Namespace: ns, Verb: "get", Group: "cluster.x-k8s.io", Resource: "clusters", Subresource: "status"},
		{Namespace: ns, Verb: "list", Group: "bootstrap.cluster.x-k8s.io", Resource: "kubeadmconfigs"},
		{Namespace: ns, Verb: "list", Resource: "pods"}, {Namespace: ns, Verb: "create", Resource: "pods"},
		{Verb: "list", Resource: "namespaces"}, {Verb: "get", Resource: "namespaces", Name: ns},
		{Verb: "list", Resource: "nodes"}, {Verb: "list", Group: "cluster.x-k8s.io", Resource: "clusters"},
		{Namespace: ns, Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Verb: "impersonate", Resource: "users"},
	} {
		require.False(t, sar(a), "%+v", a)
	}
}

// keystoneIdentity is a member of the project as the token webhook would see one.
func keystoneIdentity(project string) keystone.Identity {
	return keystone.Identity{UserID: testutil.RandomHex(16), UserName: "viewer", ProjectID: project, Roles: []string{"member", "reader"}}
}
