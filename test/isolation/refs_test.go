package isolation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/templatestest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// renderInMemory renders a one-node in-memory cluster into namespace.
func renderInMemory(t *testing.T, namespace, project string) *templates.Rendered {
	t.Helper()
	in := templatestest.BaseInput(templates.FlavorInMemory)
	in.Namespace = namespace
	in.Cluster.ProjectID = project
	in.Cluster.UUID = "bd71db63-28f3-4ac5-8e6e-" + testutil.RandomHex(6)
	in.NodeGroups[1].NodeCount = 1
	r, err := templates.Render(in)
	require.NoError(t, err)
	// Without the bridge's labels: the running bridge's watch leaves a cluster no Magnum row knows alone.
	labels := r.Cluster.GetLabels()
	delete(labels, templates.LabelManagedBy)
	delete(labels, templates.LabelClusterUUID)
	r.Cluster.SetLabels(labels)
	return r
}

func applyAsAdmin(t *testing.T, f *fixture, objs ...*unstructured.Unstructured) {
	t.Helper()
	require.NoError(t, f.admin.Apply(ctxFor(t, time.Minute), objs...))
}

// TestCrossNamespaceReferencesAreRefused: a Cluster in project A's namespace cannot be made to use
// what lives in project B's, with the real apiserver, Cluster API webhooks and admission policies.
func TestCrossNamespaceReferencesAreRefused(t *testing.T) {
	f := setup(t)
	ctx := ctxFor(t, 2*time.Minute)
	nsA, projectA := f.scratchProject(t, f.admin)
	nsB, projectB := f.scratchProject(t, f.admin)
	rA, rB := renderInMemory(t, nsA, projectA), renderInMemory(t, nsB, projectB)
	applyAsAdmin(t, f, rA.ClassObjects...)
	applyAsAdmin(t, f, rB.ClassObjects...)
	dry := client.DryRunAll
	ssa := []client.ApplyOption{client.FieldOwner("isolation-test"), client.ForceOwnership, dry}

	// Control: A's cluster with A's class is accepted (so the refusals below are about B).
	require.NoError(t, f.admin.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(rA.Cluster.DeepCopy()), ssa...))

	// 1. ClusterClass of B. Cluster API itself allows spec.topology.classRef.namespace; the policy
	// magnum-project-clusters-use-own-classes refuses it in project namespaces, for anyone.
	c := rA.Cluster.DeepCopy()
	require.NoError(t, unstructured.SetNestedField(c.Object, rB.ClassName, "spec", "topology", "classRef", "name"))
	require.NoError(t, unstructured.SetNestedField(c.Object, nsB, "spec", "topology", "classRef", "namespace"))
	err := f.admin.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(c), ssa...)
	require.Error(t, err, "a Cluster in %s using the ClusterClass of %s", nsA, nsB)
	require.Contains(t, err.Error(), "magnum-project-clusters-use-own-classes")

	// 2. Infrastructure/control-plane objects of B, in the served storage version: its references
	// have no namespace field at all, so the apiserver refuses one.
	for _, field := range []string{"infrastructureRef", "controlPlaneRef"} {
		c = rA.Cluster.DeepCopy()
		require.NoError(t, unstructured.SetNestedMap(c.Object, map[string]any{
			"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevCluster", "name": "b-infra", "namespace": nsB}, "spec", field))
		err = f.admin.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(c), ssa...)
		require.Error(t, err, "spec.%s pointing into %s", field, nsB)
		require.Contains(t, err.Error(), ".spec."+field+".namespace: field not declared in schema")
	}

	// 3. The same through the older v1beta1 API, whose ObjectReferences do carry a namespace: the
	// conversion to v1beta2 drops it, so the reference resolves in A's namespace (or is refused).
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	require.NoError(t, f.admin.Get(ctx, client.ObjectKey{Name: "clusters.cluster.x-k8s.io"}, crd))
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	v1beta1Served := false
	for _, v := range versions {
		m, _ := v.(map[string]any)
		v1beta1Served = v1beta1Served || (m["name"] == "v1beta1" && m["served"] == true)
	}
	old := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
		"metadata": map[string]any{"name": "cross-" + testutil.RandomHex(3), "namespace": nsA},
		"spec": map[string]any{
			"infrastructureRef": map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevCluster", "name": "b-infra", "namespace": nsB},
			"controlPlaneRef": map[string]any{"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
				"name": "b-cp", "namespace": nsB},
		},
	}}
	err = f.admin.Create(ctx, old, dry)
	if !v1beta1Served {
		require.Error(t, err, "v1beta1 is not served: the request must fail")
	} else if err == nil {
		for _, field := range []string{"infrastructureRef", "controlPlaneRef"} {
			got, _, _ := unstructured.NestedString(old.Object, "spec", field, "namespace")
			require.Equal(t, nsA, got, "v1beta1 spec.%s.namespace after the round trip through v1beta2", field)
		}
		t.Logf("v1beta1 Cluster with references into %s accepted with the references moved to %s", nsB, nsA)
	} else {
		t.Logf("v1beta1 Cluster with references into %s refused: %v", nsB, err)
	}

	// 4. Secrets of B. CAPI finds a cluster's certificate Secrets by name in the cluster's own
	// namespace and nothing can name another: B holds CA Secrets for the cluster name A uses, A holds
	// none, and A's cluster must end up with a CA of its own while B's Secrets stay untouched.
	pkiB, err := certs.GenerateCluster("cross")
	require.NoError(t, err)
	secretsB, err := pkiB.CAPISecrets(rA.Cluster.GetName())
	require.NoError(t, err)
	require.NoError(t, f.admin.ApplyClusterSecrets(ctx, nsB, "cross-namespace-test", secretsB))
	var caB corev1.Secret
	require.NoError(t, f.admin.Get(ctx, client.ObjectKey{Namespace: nsB, Name: rA.Cluster.GetName() + "-ca"}, &caB))
	applyAsAdmin(t, f, rA.Cluster)
	t.Cleanup(func() {
		cl := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: rA.Cluster.GetName()}}
		_ = f.admin.Delete(ctxFor(t, time.Minute), cl)
		testutil.Eventually(t, 2*time.Minute, "cluster "+nsA+"/"+cl.Name+" deleted", func() error {
			if err := f.admin.Get(ctxFor(t, 20*time.Second), client.ObjectKeyFromObject(cl), cl); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	})
	var caA corev1.Secret
	testutil.Eventually(t, 90*time.Second, "Cluster API to make a CA for "+nsA+"/"+rA.Cluster.GetName(), func() error {
		return f.admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: rA.Cluster.GetName() + "-ca"}, &caA)
	})
	require.NotEqual(t, string(caB.Data["tls.crt"]), string(caA.Data["tls.crt"]), "A's cluster must not use the CA in %s", nsB)
	var after corev1.Secret
	require.NoError(t, f.admin.Get(ctx, client.ObjectKeyFromObject(&caB), &after))
	require.Equal(t, caB.ResourceVersion, after.ResourceVersion, "B's CA Secret was changed")
	require.Empty(t, after.OwnerReferences, "B's CA Secret was adopted")
}

// TestRenderedObjectsStayInTheirNamespace walks every object the bridge renders for a cluster, for
// both flavors and every input of the golden matrices: each is namespaced in the project's
// namespace, and no field anywhere else names a namespace (so nothing can point into another).
func TestRenderedObjectsStayInTheirNamespace(t *testing.T) {
	inputs := templatestest.OpenStackMatrix()
	base := templatestest.BaseInput(templates.FlavorInMemory)
	inputs["inmemory-default"] = base
	healing := templatestest.BaseInput(templates.FlavorInMemory)
	healing.Cluster.Labels = map[string]string{"auto_healing_enabled": "true", "auto_scaling_enabled": "true", "max_node_count": "5"}
	healing.NodeGroups = append(healing.NodeGroups, templates.NodeGroup{UUID: "33333333-3333-3333-3333-333333333333",
		Name: "extra", Role: "worker", NodeCount: 1})
	inputs["inmemory-healing-autoscaling-extra-group"] = healing
	walked := 0
	for _, name := range templatestest.SortedNames(inputs) {
		in := inputs[name]
		in.Namespace = templates.NamespaceFor("magnum-", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
		r, err := templates.Render(in)
		require.NoError(t, err, name)
		for _, o := range append(append([]*unstructured.Unstructured{}, r.ClassObjects...), r.Cluster) {
			where := name + ": " + o.GetKind() + " " + o.GetName()
			require.Equal(t, in.Namespace, o.GetNamespace(), where)
			walkNamespaces(t, where, "", o.Object, func(path string, v any) {
				require.Equal(t, ".metadata.namespace", path, "%s: a namespace field outside metadata", where)
				require.Equal(t, in.Namespace, v, where)
			})
			walked++
		}
	}
	require.Greater(t, walked, 2*len(inputs), "class objects and clusters of every input")
}

// walkNamespaces calls found for every map key that names a namespace (namespace, classNamespace, …).
func walkNamespaces(t *testing.T, where, path string, v any, found func(path string, v any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			p := path + "." + k
			if strings.Contains(strings.ToLower(k), "namespace") {
				found(p, child)
			}
			walkNamespaces(t, where, p, child, found)
		}
	case []any:
		for i, child := range x {
			walkNamespaces(t, where, fmt.Sprintf("%s[%d]", path, i), child, found)
		}
	}
}
