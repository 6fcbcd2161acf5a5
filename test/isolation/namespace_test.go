package isolation

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/autoscaler"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/capi"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/kubegroup"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestProjectNamespacesFromTheCLI creates a cluster as each of two tenants (clouds devstack and
// devstack-alt) through the real CLI and magnum-api, then checks what the bridge made for each
// project: its own namespace, a NetworkPolicy that denies every pod all ingress and egress, the
// ResourceQuotas of the bridge's configuration (in force: the quota controller counts the cluster),
// and the RoleBinding that is the bridge's only way to read Secrets there.
//
// The management cluster has no CNI and no kube-proxy (no pods run in it at all), so "a pod of
// project A cannot reach project B" is asserted on the objects a CNI enforces, not with packets: A's
// policy selects every pod of A and allows no egress, B's selects every pod of B and allows no
// ingress, and no other policy in either namespace opens anything. With the default quota (pods=0)
// such a pod cannot even be created, which is checked with a real pod; only a cluster-autoscaler's
// (its PriorityClass) is admitted.
func TestProjectNamespacesFromTheCLI(t *testing.T) {
	f := setup(t)
	type tenant struct{ cloud, project, namespace, cluster string }
	tenants := []*tenant{{cloud: "devstack"}, {cloud: "devstack-alt"}}
	for _, tn := range tenants {
		tn.project = strings.TrimSpace(mustOpenstack(t, tn.cloud, "token", "issue", "-f", "value", "-c", "project_id"))
		require.Regexp(t, `^[0-9a-f]{32}$`, tn.project)
		tn.namespace = templates.NamespaceFor(f.opts.Bridge.NamespacePrefix, tn.project)
		tmpl := "iso-" + testutil.RandomHex(3)
		mustOpenstack(t, tn.cloud, "coe", "cluster", "template", "create", tmpl, "--coe", "kubernetes",
			"--image", "ubuntu-2404-kube-v1.36.3", "--external-network", "public", "--flavor", "m1.small",
			"--master-flavor", "m1.medium", "--keypair", "default")
		t.Cleanup(func() { _, _ = openstack(t, tn.cloud, "coe", "cluster", "template", "delete", tmpl) })
		out := mustOpenstack(t, tn.cloud, "coe", "cluster", "create", "iso-"+testutil.RandomHex(3), "--cluster-template", tmpl,
			"--master-count", "1", "--node-count", "1")
		for _, w := range strings.Fields(out) {
			if len(w) == 36 && strings.Count(w, "-") == 4 {
				tn.cluster = w
			}
		}
		require.NotEmpty(t, tn.cluster, out)
	}
	// Registered after the templates' cleanups, so it runs before them; both deletes run at once.
	t.Cleanup(func() {
		for _, tn := range tenants {
			if tn.cluster != "" {
				_, _ = openstack(t, tn.cloud, "coe", "cluster", "delete", tn.cluster)
			}
		}
		for _, tn := range tenants {
			if tn.cluster != "" {
				waitClusterGone(t, tn.cloud, tn.cluster)
			}
		}
	})
	require.NotEqual(t, tenants[0].namespace, tenants[1].namespace)

	for _, tn := range tenants {
		ctx := ctxFor(t, 2*time.Minute)
		// The Cluster is applied after the namespace is ensured, in the same handler: once it exists,
		// the namespace's objects are those of this bridge's configuration.
		testutil.Eventually(t, time.Minute, "the CAPI Cluster of "+tn.cluster, func() error {
			var l clusterv1.ClusterList
			if err := f.admin.List(ctx, &l, client.InNamespace(tn.namespace),
				client.MatchingLabels{templates.LabelClusterUUID: tn.cluster}); err != nil {
				return err
			}
			if len(l.Items) != 1 {
				return fmt.Errorf("%d clusters", len(l.Items))
			}
			return nil
		})

		var ns corev1.Namespace
		require.NoError(t, f.admin.Get(ctx, client.ObjectKey{Name: tn.namespace}, &ns))
		require.Equal(t, tn.project, ns.Labels[templates.LabelProjectID])
		require.Equal(t, templates.ManagedByValue, ns.Labels[templates.LabelManagedBy])

		requireDefaultDeny(t, f, tn.namespace)
		requireQuota(t, f, tn.namespace, f.opts.Bridge.NamespaceQuota)
		requireSecretReaderBinding(t, f, tn.namespace)
		requireViewerBinding(t, f, tn.namespace, tn.project)

		// The quota is in force: its controller has counted this project's objects.
		testutil.Eventually(t, time.Minute, "quota usage in "+tn.namespace, func() error {
			var q corev1.ResourceQuota
			if err := f.admin.Get(ctx, client.ObjectKey{Namespace: tn.namespace, Name: capi.ResourceQuotaName}, &q); err != nil {
				return err
			}
			if !sameResources(q.Status.Hard, q.Spec.Hard) {
				return fmt.Errorf("status.hard %v, spec.hard %v", q.Status.Hard, q.Spec.Hard)
			}
			if _, limited := q.Spec.Hard["count/clusters.cluster.x-k8s.io"]; limited {
				used := q.Status.Used["count/clusters.cluster.x-k8s.io"]
				if used.Value() < 1 {
					return fmt.Errorf("count/clusters used %s", used.String())
				}
			}
			return nil
		})
		if pods, ok := f.opts.Bridge.NamespaceQuota[corev1.ResourcePods]; ok && pods.IsZero() {
			requireAutoscalerPods(t, f, tn.namespace)
		}
	}
}

func waitClusterGone(t *testing.T, cloud, id string) {
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := openstack(t, cloud, "coe", "cluster", "show", id); err != nil && strings.Contains(err.Error(), "could not be found") {
			return
		}
		time.Sleep(3 * time.Second)
	}
	t.Errorf("cluster %s (%s) not deleted within 4 minutes", id, cloud)
}

// requireDefaultDeny: the namespace's NetworkPolicies are the default deny, which selects every
// pod and allows nothing in either direction, and the cluster-autoscalers' egress to API servers
// and DNS; no other policy may open the namespace.
func requireDefaultDeny(t *testing.T, f *fixture, namespace string) {
	t.Helper()
	var l networkingv1.NetworkPolicyList
	require.NoError(t, f.admin.List(ctxFor(t, 20*time.Second), &l, client.InNamespace(namespace)))
	byName := map[string]networkingv1.NetworkPolicySpec{}
	for _, np := range l.Items {
		byName[np.Name] = np.Spec
	}
	require.Len(t, byName, 2, "no other policy may open the namespace")
	require.Equal(t, networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
	}, byName[capi.NetworkPolicyName])
	egress, ok := byName[capi.AutoscalerEgressPolicyName]
	require.True(t, ok, "the autoscalers' egress policy")
	require.Equal(t, map[string]string{"app.kubernetes.io/component": "cluster-autoscaler"}, egress.PodSelector.MatchLabels)
	require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, egress.PolicyTypes, "no ingress to it")
	require.Len(t, egress.Egress, 1)
	require.Empty(t, egress.Egress[0].To, "API servers anywhere (the workload clusters' load balancers)")
	var ports []string
	for _, p := range egress.Egress[0].Ports {
		ports = append(ports, string(*p.Protocol)+"/"+p.Port.String())
	}
	require.ElementsMatch(t, []string{"TCP/443", "TCP/6443", "UDP/53", "TCP/53"}, ports)
}

// requireQuota: the namespace's ResourceQuotas limit exactly what want lists: the main one all but
// pods, magnum-project-pods the Pods of every PriorityClass but the autoscalers' (want's pods entry),
// magnum-cluster-autoscalers the autoscalers' Pods (want's count/clusters, else 50).
func requireQuota(t *testing.T, f *fixture, namespace string, want corev1.ResourceList) {
	t.Helper()
	var l corev1.ResourceQuotaList
	require.NoError(t, f.admin.List(ctxFor(t, 20*time.Second), &l, client.InNamespace(namespace)))
	require.Len(t, l.Items, 3)
	byName := map[string]corev1.ResourceQuota{}
	for _, q := range l.Items {
		byName[q.Name] = q
		require.Empty(t, q.Spec.Scopes, q.Name)
	}
	main, pods := corev1.ResourceList{}, corev1.ResourceList{}
	for k, v := range want {
		if k == corev1.ResourcePods {
			pods[k] = v
		} else {
			main[k] = v
		}
	}
	autoscalers := corev1.ResourceList{corev1.ResourcePods: resource.MustParse(fmt.Sprint(capi.AutoscalerPodsDefault))}
	if n, ok := want["count/clusters.cluster.x-k8s.io"]; ok {
		autoscalers[corev1.ResourcePods] = n
	}
	class := func(op corev1.ScopeSelectorOperator) *corev1.ScopeSelector {
		return &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
			ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: op, Values: []string{autoscaler.PriorityClass}}}}
	}
	for _, c := range []struct {
		name  string
		scope *corev1.ScopeSelector
		hard  corev1.ResourceList
	}{
		{capi.ResourceQuotaName, nil, main},
		{capi.PodsQuotaName, class(corev1.ScopeSelectorOpNotIn), pods},
		{capi.AutoscalerQuotaName, class(corev1.ScopeSelectorOpIn), autoscalers},
	} {
		q, ok := byName[c.name]
		require.True(t, ok, "no ResourceQuota %s in %s", c.name, namespace)
		require.Equal(t, c.scope, q.Spec.ScopeSelector, c.name)
		require.True(t, sameResources(c.hard, q.Spec.Hard), "%s: spec.hard %v, want %v", c.name, names(q.Spec.Hard), names(c.hard))
	}
}

func requireSecretReaderBinding(t *testing.T, f *fixture, namespace string) {
	t.Helper()
	var rb rbacv1.RoleBinding
	require.NoError(t, f.admin.Get(ctxFor(t, 20*time.Second), client.ObjectKey{Namespace: namespace, Name: capi.RoleBindingName}, &rb))
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: capi.SecretReaderRole}, rb.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: bridgeNamespace, Name: "magnum-capi-bridge"}}, rb.Subjects)
}

// requireViewerBinding: with [bridge] tenant_view the project's Keystone group may read the namespace
// (docs/tenant-view.md); without it there is no such binding.
func requireViewerBinding(t *testing.T, f *fixture, namespace, project string) {
	t.Helper()
	var rb rbacv1.RoleBinding
	err := f.admin.Get(ctxFor(t, 20*time.Second), client.ObjectKey{Namespace: namespace, Name: capi.ViewerBindingName}, &rb)
	if f.opts.Bridge.TenantView == nil {
		require.True(t, apierrors.IsNotFound(err), "tenant view off, yet %s has %s: %v", namespace, capi.ViewerBindingName, err)
		return
	}
	require.NoError(t, err)
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: capi.ProjectViewerRole}, rb.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: kubegroup.Project(project)}}, rb.Subjects)
}

// requireNoPods: a pod cannot be created in the namespace (pods=0), unless it is a cluster-autoscaler's
// (requireAutoscalerPods). Run as the admin, who is not bound by RBAC: only the quota stands in the way.
func requireNoPods(t *testing.T, f *fixture, namespace string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "iso-probe", Namespace: namespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	err := f.admin.Create(ctxFor(t, 20*time.Second), pod)
	if err == nil {
		_ = f.admin.Delete(ctxFor(t, 20*time.Second), pod)
		t.Fatalf("a pod was created in project namespace %s", namespace)
	}
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.Contains(t, err.Error(), "exceeded quota: "+capi.PodsQuotaName)
}

// requireAutoscalerPods: once the quota controller has computed the scoped quotas, a pod of another
// PriorityClass is refused and a cluster-autoscaler's (priorityClassName magnum-cluster-autoscaler)
// is admitted (a server-side dry run as the admin: the quota is checked, nothing is stored).
func requireAutoscalerPods(t *testing.T, f *fixture, namespace string) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	testutil.Eventually(t, time.Minute, "the quota controller to compute the Pod quotas of "+namespace, func() error {
		for _, name := range []string{capi.PodsQuotaName, capi.AutoscalerQuotaName} {
			var q corev1.ResourceQuota
			if err := f.admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &q); err != nil {
				return err
			}
			if !sameResources(q.Status.Hard, q.Spec.Hard) {
				return fmt.Errorf("%s: status.hard %v, spec.hard %v", name, names(q.Status.Hard), names(q.Spec.Hard))
			}
		}
		return nil
	})
	requireNoPods(t, f, namespace)
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "iso-probe", Namespace: namespace},
		Spec: corev1.PodSpec{PriorityClassName: "system-cluster-critical", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	err := f.admin.Create(ctx, other, client.DryRunAll)
	require.True(t, apierrors.IsForbidden(err), "a pod of another PriorityClass: %v", err)
	require.Contains(t, err.Error(), "exceeded quota: "+capi.PodsQuotaName)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "iso-autoscaler", Namespace: namespace},
		Spec: corev1.PodSpec{PriorityClassName: autoscaler.PriorityClass, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	require.NoError(t, f.admin.Create(ctx, pod, client.DryRunAll), "a cluster-autoscaler's pod (is deploy/kubernetes/priority-class.yaml applied?)")
}

func sameResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func names(l corev1.ResourceList) []string {
	var out []string
	for k, v := range l {
		out = append(out, string(k)+"="+v.String())
	}
	sort.Strings(out)
	return out
}

// TestQuotaFollowsConfigurationAndIsEnforced ensures a project namespace as the bridge's own
// identity with one quota, then with a changed one (a limit changed, one dropped): the namespace ends
// up with exactly the new one, ensuring it again changes nothing, and the apiserver enforces it.
func TestQuotaFollowsConfigurationAndIsEnforced(t *testing.T) {
	f := setup(t)
	ctx := ctxFor(t, 3*time.Minute)
	first, err := capi.ParseNamespaceQuota("secrets=2, count/clusters.cluster.x-k8s.io=1, pods=0")
	require.NoError(t, err)
	bridge := &capi.Client{Client: f.bridge.Client, NamespaceQuota: first}
	ns, project := f.scratchProject(t, bridge)
	requireQuota(t, f, ns, first)
	requireDefaultDeny(t, f, ns)
	requireSecretReaderBinding(t, f, ns)

	// A namespace of an older bridge: one quota, with the pods entry. Ensured again, the entry moves
	// to magnum-project-pods (the same field manager: the apply drops it from the main quota).
	old := &corev1.ResourceQuota{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: capi.ResourceQuotaName, Namespace: ns, Labels: map[string]string{templates.LabelManagedBy: templates.ManagedByValue}},
		Spec:       corev1.ResourceQuotaSpec{Hard: first}}
	require.NoError(t, f.bridge.Apply(ctx, asUnstructured(t, old)))
	var q corev1.ResourceQuota
	require.NoError(t, f.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: capi.ResourceQuotaName}, &q))
	require.Contains(t, q.Spec.Hard, corev1.ResourcePods)

	second, err := capi.ParseNamespaceQuota("secrets=3, pods=0")
	require.NoError(t, err)
	bridge = &capi.Client{Client: f.bridge.Client, NamespaceQuota: second}
	require.NoError(t, bridge.EnsureProjectNamespace(ctx, ns, project))
	requireQuota(t, f, ns, second)

	// Idempotent: a third ensure with the same quota changes nothing. (The quota's resourceVersion
	// moves with its status, so its spec is compared through the bridge's managed-fields entry.)
	snapshot := func() []string {
		var q corev1.ResourceQuota
		var np networkingv1.NetworkPolicy
		var rb rbacv1.RoleBinding
		var n corev1.Namespace
		require.NoError(t, f.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: capi.ResourceQuotaName}, &q))
		require.NoError(t, f.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: capi.NetworkPolicyName}, &np))
		require.NoError(t, f.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: capi.RoleBindingName}, &rb))
		require.NoError(t, f.admin.Get(ctx, client.ObjectKey{Name: ns}, &n))
		var applied string
		for _, m := range q.ManagedFields {
			if m.Manager == capi.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply {
				applied = m.Time.String() + m.FieldsV1.GetRawString()
			}
		}
		require.NotEmpty(t, applied)
		return []string{applied, np.ResourceVersion, rb.ResourceVersion, n.ResourceVersion}
	}
	before := snapshot()
	time.Sleep(1100 * time.Millisecond) // managed-fields times have a resolution of one second
	// A new client (a restarted bridge): the same one skips a namespace it ensured moments ago.
	bridge = &capi.Client{Client: f.bridge.Client, NamespaceQuota: second}
	require.NoError(t, bridge.EnsureProjectNamespace(ctx, ns, project))
	require.Equal(t, before, snapshot())

	// Enforced: once the quota controller has picked up the new limits, a fourth Secret is refused.
	testutil.Eventually(t, time.Minute, "the quota controller to count "+ns, func() error {
		var q corev1.ResourceQuota
		if err := f.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: capi.ResourceQuotaName}, &q); err != nil {
			return err
		}
		if !sameResources(q.Status.Hard, q.Spec.Hard) || len(q.Status.Hard) != 1 {
			return fmt.Errorf("status.hard %v", names(q.Status.Hard))
		}
		return nil
	})
	secret := func(i int) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: ns}}
	}
	for i := 1; i <= 3; i++ {
		require.NoError(t, f.admin.Create(ctx, secret(i)))
	}
	err = f.admin.Create(ctx, secret(4))
	require.True(t, apierrors.IsForbidden(err), "a fourth Secret: %v", err)
	require.Contains(t, err.Error(), "exceeded quota: "+capi.ResourceQuotaName)
	requireAutoscalerPods(t, f, ns)
}
