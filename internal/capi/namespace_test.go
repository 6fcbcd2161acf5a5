package capi

import (
	"testing"

	"github.com/stretchr/testify/require"
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
