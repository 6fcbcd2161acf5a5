package capi

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestDefaultNamespaceQuotaParses(t *testing.T) {
	q, err := ParseNamespaceQuota(DefaultNamespaceQuota)
	require.NoError(t, err)
	require.Len(t, q, 9)
	pods := q["pods"]
	require.True(t, pods.IsZero(), "nothing runs in a project namespace")
	machines := q["count/machines.cluster.x-k8s.io"]
	require.Zero(t, machines.Cmp(resource.MustParse("2000")))
}

func TestSubjectFor(t *testing.T) {
	require.Equal(t, rbacv1.Subject{Kind: "ServiceAccount", Namespace: "magnum-capi-bridge", Name: "magnum-capi-bridge"},
		SubjectFor("system:serviceaccount:magnum-capi-bridge:magnum-capi-bridge"))
	require.Equal(t, rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "magnum-capi-bridge-admin"},
		SubjectFor("magnum-capi-bridge-admin"))
	require.Equal(t, "User", SubjectFor("system:serviceaccount:broken").Kind)
}

func TestDefaultDenyPolicyDeniesBothDirections(t *testing.T) {
	p := defaultDenyPolicy("magnum-p")
	require.Empty(t, p.Spec.PodSelector.MatchLabels)
	require.Empty(t, p.Spec.PodSelector.MatchExpressions)
	require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, p.Spec.PolicyTypes)
	require.Nil(t, p.Spec.Ingress)
	require.Nil(t, p.Spec.Egress)
	u, err := toApply(p)
	require.NoError(t, err)
	_, hasStatus := u.Object["status"]
	require.False(t, hasStatus)
	require.Equal(t, "magnum-p", u.GetNamespace())
}

func TestViewerBinding(t *testing.T) {
	rb := viewerBinding("magnum-p1", "p1")
	require.Equal(t, ViewerBindingName, rb.Name)
	require.Equal(t, "magnum-p1", rb.Namespace)
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ProjectViewerRole}, rb.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "keystone:project:p1"}}, rb.Subjects)
}

func TestEditorBinding(t *testing.T) {
	rb := editorBinding("magnum-p1", "p1")
	require.Equal(t, EditorBindingName, rb.Name)
	require.Equal(t, "magnum-project-cluster-editors", rb.Name)
	require.Equal(t, "magnum-p1", rb.Namespace)
	require.Equal(t, "magnum-capi-bridge", rb.Labels["app.kubernetes.io/managed-by"])
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "magnum-project-cluster-editor"}, rb.RoleRef)
	// The members only: a reader's token reads (viewer binding) but writes nothing.
	require.Equal(t, []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "keystone:project:p1:role:member"}}, rb.Subjects)
}

// EnsureProjectNamespace applies the viewer binding with ProjectViewers and the editor binding with
// ProjectEditors, and neither without.
func TestEnsureProjectNamespaceTenantBindings(t *testing.T) {
	for _, c := range []struct {
		viewers, editors bool
		want, notWant    []string
	}{
		{false, false, nil, []string{ViewerBindingName, EditorBindingName}},
		{true, false, []string{ViewerBindingName}, []string{EditorBindingName}},
		{true, true, []string{ViewerBindingName, EditorBindingName}, nil},
	} {
		var mu sync.Mutex
		applied := map[string]*unstructured.Unstructured{}
		cl := &Client{ProjectViewers: c.viewers, ProjectEditors: c.editors,
			Client: fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Apply: func(_ context.Context, _ client.WithWatch, ac runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
					// ApplyConfigurationFromUnstructured: the Unstructured inside.
					obj := &unstructured.Unstructured{Object: ac.(runtime.Unstructured).UnstructuredContent()}
					mu.Lock()
					defer mu.Unlock()
					applied[obj.GetKind()+"/"+obj.GetName()] = obj.DeepCopy()
					return nil
				},
				Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
					switch r := obj.(type) {
					case *authenticationv1.SelfSubjectReview:
						r.Status.UserInfo.Username = "system:serviceaccount:magnum-capi-bridge:magnum-capi-bridge"
					case *authorizationv1.SelfSubjectAccessReview:
						r.Status.Allowed = true
					default:
						return fmt.Errorf("unexpected create of %T", obj)
					}
					return nil
				},
			}).Build()}
		require.NoError(t, cl.EnsureProjectNamespace(context.Background(), "magnum-p1", "p1"))
		require.Contains(t, applied, "Namespace/magnum-p1")
		require.Contains(t, applied, "RoleBinding/"+RoleBindingName)
		for _, name := range c.want {
			rb := applied["RoleBinding/"+name]
			require.NotNil(t, rb, "viewers %v, editors %v: %s", c.viewers, c.editors, name)
			require.Equal(t, "magnum-p1", rb.GetNamespace())
		}
		for _, name := range c.notWant {
			require.NotContains(t, applied, "RoleBinding/"+name, "viewers %v, editors %v", c.viewers, c.editors)
		}
		if c.editors {
			subjects, _, _ := unstructured.NestedSlice(applied["RoleBinding/"+EditorBindingName].Object, "subjects")
			require.Equal(t, []any{map[string]any{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "keystone:project:p1:role:member"}}, subjects)
			role, _, _ := unstructured.NestedString(applied["RoleBinding/"+EditorBindingName].Object, "roleRef", "name")
			require.Equal(t, ProjectEditorRole, role)
		}
	}
}

// The pods entry moves to a quota of every PriorityClass but the autoscalers'; their own quota admits
// as many as the project may have clusters; the main quota keeps the rest.
func TestResourceQuotas(t *testing.T) {
	q, err := ParseNamespaceQuota(DefaultNamespaceQuota)
	require.NoError(t, err)
	qs := resourceQuotas("magnum-p", q)
	require.Len(t, qs, 3)
	byName := map[string]*corev1.ResourceQuota{}
	for _, rq := range qs {
		require.Equal(t, "magnum-p", rq.Namespace)
		byName[rq.Name] = rq
	}
	main, pods, autoscalers := byName[ResourceQuotaName], byName[PodsQuotaName], byName[AutoscalerQuotaName]
	require.NotNil(t, main)
	require.NotNil(t, pods)
	require.NotNil(t, autoscalers)

	require.Len(t, main.Spec.Hard, 8)
	require.NotContains(t, main.Spec.Hard, corev1.ResourcePods)
	require.Nil(t, main.Spec.ScopeSelector)
	require.Equal(t, q[corev1.ResourceSecrets], main.Spec.Hard[corev1.ResourceSecrets])

	class := func(op corev1.ScopeSelectorOperator) *corev1.ScopeSelector {
		return &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
			ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: op, Values: []string{"magnum-cluster-autoscaler"}}}}
	}
	require.Equal(t, class(corev1.ScopeSelectorOpNotIn), pods.Spec.ScopeSelector)
	require.Len(t, pods.Spec.Hard, 1)
	zero := pods.Spec.Hard[corev1.ResourcePods]
	require.True(t, zero.IsZero())

	require.Equal(t, class(corev1.ScopeSelectorOpIn), autoscalers.Spec.ScopeSelector)
	require.Len(t, autoscalers.Spec.Hard, 1)
	n := autoscalers.Spec.Hard[corev1.ResourcePods]
	require.EqualValues(t, 50, n.Value(), "count/clusters.cluster.x-k8s.io")

	// Another clusters limit, no pods entry: Pods of other classes are not limited; no clusters
	// limit: the autoscalers' default.
	q, err = ParseNamespaceQuota("count/clusters.cluster.x-k8s.io=7, secrets=10")
	require.NoError(t, err)
	qs = resourceQuotas("magnum-p", q)
	require.Len(t, qs[0].Spec.Hard, 2)
	require.Empty(t, qs[1].Spec.Hard)
	n = qs[2].Spec.Hard[corev1.ResourcePods]
	require.EqualValues(t, 7, n.Value())
	q, err = ParseNamespaceQuota("pods=3")
	require.NoError(t, err)
	qs = resourceQuotas("magnum-p", q)
	require.Empty(t, qs[0].Spec.Hard)
	n = qs[1].Spec.Hard[corev1.ResourcePods]
	require.EqualValues(t, 3, n.Value())
	n = qs[2].Spec.Hard[corev1.ResourcePods]
	require.EqualValues(t, AutoscalerPodsDefault, n.Value())

	// Applied as it is: no status, no creation timestamp.
	u, err := toApply(qs[2])
	require.NoError(t, err)
	require.NotContains(t, u.Object, "status")
}
