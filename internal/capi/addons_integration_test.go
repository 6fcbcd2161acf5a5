package capi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

const testWorkloadCloudsYAML = `clouds:
  openstack:
    auth:
      auth_url: https://keystone.example.org/v3
      application_credential_id: workload-credential-id
      application_credential_secret: s3cr3t
    region_name: RegionOne
`

// TestAddonsReachTheWorkloadCluster runs CAPI's ClusterResourceSet against CAPD's in-memory
// workload API server: the add-on set lands in the workload cluster, a later set without
// metrics-server removes it there (the bridge prunes; the CRS re-applies the rest), the kinds the
// in-memory server cannot hold pass a server-side dry run against the management kube-apiserver,
// and deleting the cluster leaves no add-on object in the management cluster.
func TestAddonsReachTheWorkloadCluster(t *testing.T) {
	kc := managementCluster(t)
	cfg, err := RESTConfig(kc)
	require.NoError(t, err)
	scheme, err := NewScheme()
	require.NoError(t, err)
	require.NoError(t, addonsv1.AddToScheme(scheme))
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	c := &Client{Client: direct}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	project := "capitest" + hex.EncodeToString(b)
	ns := templates.NamespaceFor("mcb-", project)
	in := templates.Input{
		Flavor: templates.FlavorInMemory, Namespace: ns, DefaultKubernetesVersion: "v1.36.3",
		Template: templates.Template{UUID: "d7c6cbe4-3a63-447f-88de-1ab09044b177", ImageID: "ubuntu-2404-kube-v1.36.3"},
		Cluster: templates.Cluster{UUID: "ad71db63-28f3-4ac5-8e6e-" + hex.EncodeToString(append(b, 0, 0)), Name: "addons-test", ProjectID: project,
			Labels: map[string]string{}},
		NodeGroups: []templates.NodeGroup{
			{UUID: "11111111-1111-1111-1111-111111111111", Name: "default-master", Role: "master", NodeCount: 1, IsDefault: true},
			{UUID: "22222222-2222-2222-2222-222222222222", Name: "default-worker", Role: "worker", NodeCount: 1, IsDefault: true},
		},
	}
	r, err := templates.Render(in)
	require.NoError(t, err)
	name := r.Cluster.GetName()
	addonInput := func(labels map[string]string) addons.Input {
		return addons.Input{Flavor: in.Flavor, Namespace: ns, ClusterName: name, ClusterUUID: in.Cluster.UUID,
			ProjectID: project, KubernetesVersion: r.Version, PodCIDR: "10.100.0.0/16", Labels: labels,
			Cloud: &addons.Credential{CloudsYAML: []byte(testWorkloadCloudsYAML)}}
	}
	set, err := addons.Render(addonInput(map[string]string{}))
	require.NoError(t, err)

	require.NoError(t, c.EnsureProjectNamespace(ctx, ns, project))
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})

	// What the in-memory server cannot hold is checked by the management kube-apiserver instead.
	require.NotEmpty(t, set.Withheld)
	for _, o := range set.Withheld {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		require.NoError(t, err)
		require.NoError(t, c.DryRunApply(ctx, &unstructured.Unstructured{Object: u}), "server-side dry run of %T", o)
	}

	pki, err := certs.GenerateCluster("addons-test")
	require.NoError(t, err)
	secrets, err := pki.CAPISecrets(name)
	require.NoError(t, err)
	require.NoError(t, c.ApplyClusterSecrets(ctx, ns, in.Cluster.UUID, secrets))
	require.NoError(t, c.Apply(ctx, r.ClassObjects...))
	require.NoError(t, c.Apply(ctx, r.Cluster))
	require.NoError(t, c.ApplyAddons(ctx, name, set, false))

	// The workload cluster, as CAPI's admin kubeconfig reaches it.
	var kcSecret corev1.Secret
	require.Eventually(t, func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-kubeconfig"}, &kcSecret) == nil
	}, 4*time.Minute, time.Second, "CAPI never wrote the workload kubeconfig")
	wcfg, err := clientcmd.RESTConfigFromKubeConfig(kcSecret.Data["value"])
	require.NoError(t, err)
	workload, err := client.New(wcfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	exists := func(ref addons.ObjectRef) bool {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(ref.GroupVersionResource().GroupVersion().String())
		u.SetKind(kindOfResource(ref.Resource))
		return workload.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, u) == nil
	}
	require.Eventually(t, func() bool {
		for _, ref := range set.Inventory {
			if !exists(ref) {
				return false
			}
		}
		return true
	}, 3*time.Minute, time.Second, "the ClusterResourceSet never delivered every add-on object")
	// What the status sync waits for: CAPI's binding says the set is applied.
	require.Eventually(t, func() bool {
		var binding addonsv1.ClusterResourceSetBinding
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &binding) != nil {
			return false
		}
		c := r.Cluster.DeepCopy()
		c.SetAnnotations(map[string]string{addons.AnnotationAddonSet: addons.ResourceSetName(name)})
		var cl clusterv1.Cluster
		if runtime.DefaultUnstructuredConverter.FromUnstructured(c.Object, &cl) != nil {
			return false
		}
		done, _ := addonsApplied(Observation{Cluster: &cl, AddonBinding: &binding})
		return done
	}, time.Minute, time.Second, "the ClusterResourceSetBinding never reported the set applied")
	var cloudConfig corev1.Secret
	require.NoError(t, workload.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: addons.CloudConfigName}, &cloudConfig))
	require.Contains(t, string(cloudConfig.Data["cloud.conf"]), "workload-credential-id")

	// metrics-server switched off: gone from the workload cluster, the rest stays.
	off, err := addons.Render(addonInput(map[string]string{"metrics_server_enabled": "false", "octavia_provider": "ovn"}))
	require.NoError(t, err)
	require.NoError(t, c.ApplyAddons(ctx, name, off, true))
	metrics := addons.ObjectRef{Group: "apps", Version: "v1", Resource: "deployments", Namespace: "kube-system", Name: "metrics-server"}
	require.False(t, exists(metrics), "pruned by the bridge")
	require.Eventually(t, func() bool {
		var s corev1.Secret
		return workload.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: addons.CloudConfigName}, &s) == nil &&
			strings.Contains(string(s.Data["cloud.conf"]), `lb-provider="ovn"`)
	}, 2*time.Minute, time.Second, "the Reconcile strategy never re-applied the changed cloud-config")
	require.False(t, exists(metrics), "the re-applied set does not bring it back")
	for _, ref := range off.Inventory {
		require.True(t, exists(ref), "%s still delivered", ref)
	}
	var crs addonsv1.ClusterResourceSet
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: addons.ResourceSetName(name)}, &crs))
	require.Equal(t, addonsv1.ClusterResourceSetStrategyReconcile, addonsv1.ClusterResourceSetStrategy(crs.Spec.Strategy))

	// Delete: the Cluster, then what the bridge owns; nothing of the add-ons is left.
	_, err = c.DeleteCluster(ctx, ns, name)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		gone, err := c.DeleteCluster(ctx, ns, name)
		return err == nil && gone
	}, 3*time.Minute, time.Second)
	require.NoError(t, c.DeleteAddons(ctx, ns, in.Cluster.UUID))
	require.NoError(t, c.DeleteClusterSecrets(ctx, ns, in.Cluster.UUID))
	require.Eventually(t, func() bool {
		var sets addonsv1.ClusterResourceSetList
		var bindings addonsv1.ClusterResourceSetBindingList
		var secrets corev1.SecretList
		if c.List(ctx, &sets, client.InNamespace(ns)) != nil || c.List(ctx, &bindings, client.InNamespace(ns)) != nil ||
			c.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{templates.LabelClusterUUID: in.Cluster.UUID}) != nil {
			return false
		}
		return len(sets.Items) == 0 && len(bindings.Items) == 0 && len(secrets.Items) == 0
	}, time.Minute, time.Second, "add-on objects left in the management cluster")
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: addons.ResourceSetName(name)}, &crs)
	require.True(t, apierrors.IsNotFound(err), "%v", err)
}

// kindOfResource is the kind of the resources internal/addons renders (for typed-less Gets).
func kindOfResource(resource string) string {
	return map[string]string{
		"namespaces": "Namespace", "serviceaccounts": "ServiceAccount", "configmaps": "ConfigMap", "secrets": "Secret",
		"services": "Service", "clusterroles": "ClusterRole", "clusterrolebindings": "ClusterRoleBinding", "roles": "Role",
		"rolebindings": "RoleBinding", "daemonsets": "DaemonSet", "deployments": "Deployment", "csidrivers": "CSIDriver",
		"customresourcedefinitions": "CustomResourceDefinition",
	}[resource]
}

// TestAddonObjectsPassServerValidation: every object of the OpenStack rendering (calico, cilium and
// flannel in turn) passes a server-side dry run against the management kube-apiserver, which
// validates what CAPD's in-memory workload server only stores. Nothing is written.
func TestAddonObjectsPassServerValidation(t *testing.T) {
	kc := managementCluster(t)
	cfg, err := RESTConfig(kc)
	require.NoError(t, err)
	direct, err := client.New(cfg, client.Options{})
	require.NoError(t, err)
	c := &Client{Client: direct}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, driver := range []string{"calico", "cilium", "flannel"} {
		set, err := addons.Render(addons.Input{Flavor: templates.FlavorOpenStack, Namespace: "mcb-validation", ClusterName: "validation-0a1b2c3d",
			ClusterUUID: "0a1b2c3d-0000-4000-8000-000000000001", ProjectID: "p", KubernetesVersion: "v1.36.3", NetworkDriver: driver,
			PodCIDR: "10.100.0.0/16", Labels: map[string]string{"container_infra_prefix": "registry.example.com/mirror"},
			Cloud: &addons.Credential{CloudsYAML: []byte(testWorkloadCloudsYAML), CACert: []byte("-----BEGIN CERTIFICATE-----\n")}})
		require.NoError(t, err)
		for _, name := range set.Addons {
			for _, o := range set.Objects[name] {
				if ns := namespaceOf(o); ns != "" && ns != "kube-system" {
					continue // a namespace the dry run of its Namespace object does not create
				}
				u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
				require.NoError(t, err)
				require.NoError(t, c.DryRunApply(ctx, &unstructured.Unstructured{Object: u}), "%s: %s", driver, name)
			}
		}
	}
}

func namespaceOf(o runtime.Object) string {
	if m, ok := o.(metav1.Object); ok {
		return m.GetNamespace()
	}
	return ""
}
