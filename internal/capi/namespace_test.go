package capi

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
