package addons

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const testCloudsYAML = `clouds:
  openstack:
    auth:
      application_credential_id: 0f3c9a6b2d8e4f1a9c7b5d3e1f2a4b6c
      application_credential_secret: -L0ng_secret-with:yaml*special#chars"
      auth_url: https://keystone.example.org:5000/v3
    auth_type: v3applicationcredential
    identity_api_version: 3
    interface: public
    region_name: RegionOne
`

func input(mod ...func(*Input)) Input {
	in := Input{
		Flavor: templates.FlavorOpenStack, Namespace: "magnum-p1", ClusterName: "demo-0a1b2c3d",
		ClusterUUID: "0a1b2c3d-0000-4000-8000-000000000001", ProjectID: "p1", KubernetesVersion: "v1.35.4",
		PodCIDR: "10.100.0.0/16", Labels: map[string]string{},
		Cloud: &Credential{CloudsYAML: []byte(testCloudsYAML), CACert: []byte("-----BEGIN CERTIFICATE-----\n")},
	}
	for _, m := range mod {
		m(&in)
	}
	return in
}

func withLabels(kv ...string) func(*Input) {
	return func(in *Input) {
		for i := 0; i < len(kv); i += 2 {
			in.Labels[kv[i]] = kv[i+1]
		}
	}
}

// delivered decodes the resource-set Secret back into objects, per add-on key.
func delivered(t *testing.T, set *Set) map[string][]*unstructured.Unstructured {
	t.Helper()
	data, _, err := unstructured.NestedMap(set.Secret.Object, "data")
	require.NoError(t, err)
	out := map[string][]*unstructured.Unstructured{}
	for key, raw := range data {
		var b []byte
		require.NoError(t, json.Unmarshal([]byte(`"`+raw.(string)+`"`), &b)) // base64 as the converter wrote it
		for _, doc := range strings.Split(string(b), "---\n") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			u := &unstructured.Unstructured{}
			require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
			out[strings.TrimSuffix(key, ".yaml")] = append(out[strings.TrimSuffix(key, ".yaml")], u)
		}
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func TestAddonsChosenByLabels(t *testing.T) {
	all := []string{CNI, CloudConfig, CloudController, CinderCSI, KeystoneAuth, MetricsServer}
	for _, tc := range []struct {
		name   string
		in     Input
		addons []string
		cni    string // kind/name of the CNI's DaemonSet
	}{
		{"defaults: calico and everything", input(), all, "kube-system/calico-node"},
		{"cilium", input(func(in *Input) { in.NetworkDriver = "cilium" }), all, "kube-system/cilium"},
		{"flannel", input(func(in *Input) { in.NetworkDriver = "flannel" }), all, "kube-flannel/kube-flannel-ds"},
		{"metrics-server off", input(withLabels("metrics_server_enabled", "false")),
			[]string{CNI, CloudConfig, CloudController, CinderCSI, KeystoneAuth}, "kube-system/calico-node"},
		{"cloud provider, cinder and keystone-auth off", input(withLabels("cloud_provider_enabled", "false", "cinder_csi_enabled", "false", "keystone_auth_enabled", "false")),
			[]string{CNI, CloudConfig, MetricsServer}, "kube-system/calico-node"},
		{"no workload credential: nothing that calls OpenStack", input(func(in *Input) { in.Cloud = nil }),
			[]string{CNI, MetricsServer}, "kube-system/calico-node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := Render(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.addons, set.Addons)
			got := delivered(t, set)
			require.Len(t, got, len(tc.addons), "one Secret key per add-on")
			var ds []string
			for _, o := range got[CNI] {
				if o.GetKind() == "DaemonSet" {
					ds = append(ds, o.GetNamespace()+"/"+o.GetName())
				}
			}
			require.Equal(t, []string{tc.cni}, ds)
			b, _ := json.Marshal(got[CNI])
			require.Contains(t, string(b), tc.in.PodCIDR, "the CNI is configured with the Cluster's pod network")
		})
	}
}

func TestUnknownNetworkDriverIsRefused(t *testing.T) {
	_, err := Render(input(func(in *Input) { in.NetworkDriver = "docker" }))
	require.ErrorContains(t, err, `network_driver "docker"`)
}

func TestResourceSetReconcilesOnePerCluster(t *testing.T) {
	in := input()
	set, err := Render(in)
	require.NoError(t, err)
	crs := set.ResourceSet
	require.Equal(t, "addons.cluster.x-k8s.io/v1beta2", crs.GetAPIVersion())
	require.Equal(t, "demo-0a1b2c3d-addons", crs.GetName())
	require.Equal(t, "magnum-p1", crs.GetNamespace())
	strategy, _, _ := unstructured.NestedString(crs.Object, "spec", "strategy")
	require.Equal(t, "Reconcile", strategy)
	sel, _, _ := unstructured.NestedStringMap(crs.Object, "spec", "clusterSelector", "matchLabels")
	require.Equal(t, map[string]string{templates.LabelClusterUUID: in.ClusterUUID}, sel)
	require.Equal(t, SecretType, set.Secret.Object["type"])
	require.Equal(t, in.ClusterUUID, set.Secret.GetLabels()[templates.LabelClusterUUID], "the cluster's Secrets are deleted by this label")

	var inv []ObjectRef
	require.NoError(t, json.Unmarshal([]byte(crs.GetAnnotations()[AnnotationInventory]), &inv))
	require.Equal(t, set.Inventory, inv)
	var want []string
	for _, objs := range delivered(t, set) {
		for _, o := range objs {
			want = append(want, o.GetName())
		}
	}
	var got []string
	for _, r := range inv {
		got = append(got, r.Name)
	}
	require.ElementsMatch(t, want, got, "the inventory lists exactly what is delivered")
	require.Contains(t, got, "cloud-config")
}

func TestCloudConfigCarriesTheWorkloadCredential(t *testing.T) {
	set, err := Render(input(withLabels("octavia_provider", "ovn")))
	require.NoError(t, err)
	sec := find(delivered(t, set)[CloudConfig], "Secret", CloudConfigName)
	require.NotNil(t, sec)
	require.Equal(t, "kube-system", sec.GetNamespace())
	data, _, _ := unstructured.NestedStringMap(sec.Object, "data")
	var conf []byte
	require.NoError(t, json.Unmarshal([]byte(`"`+data["cloud.conf"]+`"`), &conf))
	require.Contains(t, string(conf), `application-credential-id="0f3c9a6b2d8e4f1a9c7b5d3e1f2a4b6c"`)
	require.Contains(t, string(conf), `application-credential-secret="-L0ng_secret-with:yaml*special#chars\""`, "gcfg quoting")
	require.Contains(t, string(conf), `auth-url="https://keystone.example.org:5000/v3"`)
	require.Contains(t, string(conf), `region="RegionOne"`)
	require.Contains(t, string(conf), `ca-file="/etc/config/ca.crt"`)
	require.Contains(t, string(conf), `lb-provider="ovn"`)
	require.Contains(t, data, "ca.crt")
}

func TestBadCredentialNeverQuotesIt(t *testing.T) {
	_, err := Render(input(func(in *Input) {
		in.Cloud.CloudsYAML = []byte("clouds: {a: {auth: {application_credential_secret: s3cr3t}}, b: {}}")
	}))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cr3t")
	_, err = Render(input(func(in *Input) { in.Cloud.CloudsYAML = []byte("s3cr3t: [") }))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cr3t")
}

func TestCloudProviderFollowsTheKubernetesMinor(t *testing.T) {
	ccmImage := func(in Input) string {
		set, err := Render(in)
		require.NoError(t, err)
		ds := set.Objects[CloudController][len(set.Objects[CloudController])-1].(*appsv1.DaemonSet)
		return ds.Spec.Template.Spec.Containers[0].Image
	}
	require.Equal(t, "registry.k8s.io/provider-os/openstack-cloud-controller-manager:v1.35.0", ccmImage(input()))
	require.Equal(t, "registry.k8s.io/provider-os/openstack-cloud-controller-manager:v1.36.0",
		ccmImage(input(func(in *Input) { in.KubernetesVersion = "v1.36.3" })))
	require.Equal(t, "registry.k8s.io/provider-os/openstack-cloud-controller-manager:v1.36.0",
		ccmImage(input(func(in *Input) { in.KubernetesVersion = "v1.39.0" })), "newer than the table: the newest release")
	require.Equal(t, "registry.k8s.io/provider-os/openstack-cloud-controller-manager:v1.33.2",
		ccmImage(input(withLabels("cloud_provider_tag", "v1.33.2"))))
	_, err := Render(input(func(in *Input) { in.KubernetesVersion = "v1.25.0" }))
	require.ErrorContains(t, err, "cloud_provider_tag")
}

func TestTagLabelsPinComponents(t *testing.T) {
	set, err := Render(input(withLabels("calico_tag", "v3.30.0", "cinder_csi_plugin_tag", "v1.34.9", "csi_attacher_tag", "v9.9.9")))
	require.NoError(t, err)
	require.Contains(t, set.Images, "quay.io/calico/node:v3.30.0")
	require.Contains(t, set.Images, "registry.k8s.io/provider-os/cinder-csi-plugin:v1.34.9")
	require.Contains(t, set.Images, "registry.k8s.io/sig-storage/csi-attacher:v9.9.9")
}

func TestContainerInfraPrefixCoversEveryImage(t *testing.T) {
	for _, driver := range []string{"calico", "cilium", "flannel"} {
		set, err := Render(input(withLabels("container_infra_prefix", "registry.example.com:5000/mirror/"),
			func(in *Input) { in.NetworkDriver = driver }))
		require.NoError(t, err)
		require.NotEmpty(t, set.Images)
		for _, img := range set.Images {
			require.True(t, strings.HasPrefix(img, "registry.example.com:5000/mirror/"), "%s: %s", driver, img)
			require.Equal(t, 2, strings.Count(img, "/"), "prefix + image name: %s", img)
		}
	}
}

func TestDefaultStorageClass(t *testing.T) {
	set, err := Render(input())
	require.NoError(t, err)
	var sc *storagev1.StorageClass
	for _, o := range set.Objects[CinderCSI] {
		if s, ok := o.(*storagev1.StorageClass); ok {
			sc = s
		}
	}
	require.NotNil(t, sc)
	require.Equal(t, "true", sc.Annotations["storageclass.kubernetes.io/is-default-class"])
	require.Equal(t, storagev1.VolumeBindingWaitForFirstConsumer, *sc.VolumeBindingMode)
	require.Equal(t, CinderDriver, sc.Provisioner)
	require.NotContains(t, sc.Parameters, "availability", "no zone unless csi_cinder_availability_zone names one")
}

func TestInMemoryFlavorWithholdsKindsItsAPIServerCannotHold(t *testing.T) {
	set, err := Render(input(func(in *Input) { in.Flavor = templates.FlavorInMemory }))
	require.NoError(t, err)
	var withheld []string
	for _, o := range set.Withheld {
		withheld = append(withheld, kindOf(o))
	}
	require.ElementsMatch(t, []string{"StorageClass", "APIService"}, withheld)
	for _, objs := range delivered(t, set) {
		for _, o := range objs {
			_, ok := inMemoryResources[o.GetKind()]
			require.True(t, ok, o.GetKind())
		}
	}
	full, err := Render(input())
	require.NoError(t, err)
	require.Empty(t, full.Withheld)
	require.Len(t, full.Inventory, len(set.Inventory)+2)
}

func TestEveryWorkloadIsSchedulableBeforeNodesAreReady(t *testing.T) {
	set, err := Render(input())
	require.NoError(t, err)
	for name, objs := range set.Objects {
		for _, o := range objs {
			spec := podSpecOf(o)
			if spec == nil {
				continue
			}
			require.NotEmpty(t, spec.PriorityClassName, name)
			require.NotEmpty(t, spec.Tolerations, name)
			if d, ok := o.(*appsv1.DaemonSet); ok && name == CNI {
				require.True(t, d.Spec.Template.Spec.HostNetwork, "the CNI cannot depend on itself")
				require.Contains(t, d.Spec.Template.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
			}
		}
	}
}

// TestGolden pins the whole OpenStack rendering (go test ./internal/addons -update rewrites it).
func TestGolden(t *testing.T) {
	set, err := Render(input(withLabels("container_infra_prefix", "mirror.example.com/k8s")))
	require.NoError(t, err)
	var b strings.Builder
	for _, u := range []*unstructured.Unstructured{set.ResourceSet} {
		y, err := yaml.Marshal(u.Object)
		require.NoError(t, err)
		b.WriteString("---\n" + string(y))
	}
	for _, name := range set.Addons {
		for _, o := range delivered(t, set)[name] {
			y, err := yaml.Marshal(o.Object)
			require.NoError(t, err)
			b.WriteString("---\n" + string(y))
		}
	}
	path := filepath.Join("testdata", "openstack.golden.yaml")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), b.String())
}

// sampleValues are values other than the default for every add-on label of the registry.
var sampleValues = map[string]string{
	"container_infra_prefix": "mirror.example.com/x", "cloud_provider_tag": "v1.31.7", "calico_tag": "v3.29.9",
	"calico_ipv4pool_ipip": "Always", "cilium_tag": "v1.16.1", "flannel_backend": "host-gw", "flannel_tag": "v0.25.1",
	"flannel_cni_tag": "v1.5.1-flannel2", "cinder_csi_enabled": "false", "cinder_csi_plugin_tag": "v1.31.7",
	"csi_attacher_tag": "v1.0.1", "csi_provisioner_tag": "v1.0.2", "csi_snapshotter_tag": "v1.0.3", "csi_resizer_tag": "v1.0.4",
	"csi_node_driver_registrar_tag": "v1.0.5", "csi_liveness_probe_tag": "v1.0.6", "csi_cinder_availability_zone": "az-2",
	"csi_cinder_reclaim_policy": "Delete", "csi_cinder_volume_binding_mode": "Immediate", "csi_cinder_fstype": "xfs",
	"csi_cinder_allow_volume_expansion": "false", "keystone_auth_enabled": "false", "k8s_keystone_auth_tag": "v1.31.7",
	"metrics_server_enabled": "false", "cloud_provider_enabled": "false",
}

// TestEveryAddonLabelHasAnEffect: each label the registry says internal/addons implements changes
// what is delivered (with the network driver that reads it).
func TestEveryAddonLabelHasAnEffect(t *testing.T) {
	for _, spec := range templates.Registry {
		if !spec.Addon {
			continue
		}
		t.Run(spec.Name, func(t *testing.T) {
			v, ok := sampleValues[spec.Name]
			require.True(t, ok, "no sample value for add-on label %s", spec.Name)
			driver := map[string]string{"cilium_tag": "cilium", "flannel_backend": "flannel", "flannel_tag": "flannel", "flannel_cni_tag": "flannel"}[spec.Name]
			base, err := Render(input(func(in *Input) { in.NetworkDriver = driver }))
			require.NoError(t, err)
			changed, err := Render(input(withLabels(spec.Name, v), func(in *Input) { in.NetworkDriver = driver }))
			require.NoError(t, err)
			require.NotEqual(t, base.Secret.Object["data"], changed.Secret.Object["data"], "label %s=%s changes nothing", spec.Name, v)
		})
	}
}

// The components that read kube-system/cloud-config roll when it changes (a rotated credential).
func TestCloudConfigChangeRollsItsReaders(t *testing.T) {
	hashes := func(in Input) map[string]string {
		set, err := Render(in)
		require.NoError(t, err)
		out := map[string]string{}
		for _, objs := range set.Objects {
			for _, o := range objs {
				if tmpl := podTemplateOf(o); tmpl != nil {
					out[kindOf(o)+"/"+tmpl.Labels["k8s-app"]] = tmpl.Annotations[AnnotationCloudConfigHash]
				}
			}
		}
		return out
	}
	before := hashes(input())
	after := hashes(input(func(in *Input) {
		in.Cloud.CloudsYAML = []byte(strings.Replace(testCloudsYAML, "0f3c9a6b", "1f3c9a6b", 1))
	}))
	for _, reader := range []string{"DaemonSet/openstack-cloud-controller-manager", "Deployment/csi-cinder-controllerplugin",
		"DaemonSet/csi-cinder-nodeplugin", "DaemonSet/k8s-keystone-auth"} {
		require.NotEmpty(t, before[reader], reader)
		require.NotEqual(t, before[reader], after[reader], "%s does not roll on a new credential", reader)
	}
	require.Empty(t, before["DaemonSet/calico-node"], "the CNI does not read cloud-config")
}

func TestCalicoResourceNames(t *testing.T) {
	var names []string
	for _, o := range calicoCRDs() {
		names = append(names, o.(interface{ GetName() string }).GetName())
	}
	for _, want := range []string{"blockaffinities.crd.projectcalico.org", "caliconodestatuses.crd.projectcalico.org",
		"globalnetworkpolicies.crd.projectcalico.org", "networkpolicies.crd.projectcalico.org", "ippools.crd.projectcalico.org",
		"kubecontrollersconfigurations.crd.projectcalico.org", "stagedkubernetesnetworkpolicies.crd.projectcalico.org"} {
		require.Contains(t, names, want)
	}
}
