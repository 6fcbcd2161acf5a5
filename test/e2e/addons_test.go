package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/addons"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// workloadWorkloads lists the DaemonSets and Deployments of a workload cluster as kind/namespace/name,
// with every image their pods run.
func workloadWorkloads(t *testing.T, kubeconfig string) (names []string, images []string) {
	t.Helper()
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct{ Namespace, Name string }
			Spec     struct {
				Template struct {
					Spec struct {
						InitContainers, Containers []struct{ Image string }
					}
				}
			}
		}
	}
	kubectlJSON(t, kubeconfig, &list, "get", "daemonsets,deployments", "-A", "-o", "json")
	for _, it := range list.Items {
		names = append(names, it.Kind+"/"+it.Metadata.Namespace+"/"+it.Metadata.Name)
		for _, c := range append(it.Spec.Template.Spec.InitContainers, it.Spec.Template.Spec.Containers...) {
			images = append(images, c.Image)
		}
	}
	return names, images
}

// TestAddons: one cluster (CI cost) from a template with container_infra_prefix, read with the
// tenant's own `coe cluster config` kubeconfig: the add-ons are delivered by the cluster's
// ClusterResourceSet, cloud-config carries the workload credential, every image is under the
// prefix; an upgrade to a template with metrics-server off removes it and moves the CCM to the new
// minor; delete leaves no add-on object in the management cluster.
//
// CAPD's in-memory workload API server stores but never runs these objects, and it cannot hold a
// StorageClass or an APIService at all: those two kinds get a server-side dry run against the
// management kube-apiserver instead (the in-memory flavor withholds them from the set).
func TestAddons(t *testing.T) {
	requireStack(t)
	t.Parallel()
	const prefix = "registry.example.com:5000/mirror"
	oldTmpl := "addons-old-" + testutil.RandomHex(3)
	// magnum-api fills in network_driver=flannel when a template names none: these ask for calico.
	mustOpenstack(t, cloudDemo, "coe", "cluster", "template", "create", oldTmpl, "--coe", "kubernetes",
		"--image", "ubuntu-2404-kube-v1.35.4", "--external-network", "public", "--flavor", "m1.small",
		"--master-flavor", "m1.medium", "--keypair", "default", "--network-driver", "calico",
		"--labels", "container_infra_prefix="+prefix+"/,availability_zone=nova")
	t.Cleanup(func() { _, _ = openstack(t, cloudDemo, "coe", "cluster", "template", "delete", oldTmpl) })
	newTmpl := createTemplate(t, cloudDemo, "--network-driver", "calico", "--labels", "container_infra_prefix="+prefix+",metrics_server_enabled=false") // v1.36.3

	start := time.Now()
	id := createCluster(t, cloudDemo, oldTmpl, "addons-"+testutil.RandomHex(3), "--node-count", "1")
	c := waitStatus(t, cloudDemo, id, 6*time.Minute, "CREATE_COMPLETE")
	timed(t, "create with add-ons", start)
	ns := templates.NamespaceFor("magnum-", c.ProjectID)
	out, err := kubectl(t, mgmtKubeconfig, "get", "machinedeployments.cluster.x-k8s.io", "-n", ns, "-l",
		"cluster.x-k8s.io/cluster-name="+c.StackID, "-o", "jsonpath={.items[*].spec.template.spec.failureDomain}")
	require.NoError(t, err, out)
	require.Equal(t, "nova", strings.TrimSpace(out), "availability_zone is the machines' failure domain")

	kc := workloadKubeconfig(t, id)
	want := []string{"DaemonSet/kube-system/calico-node", "Deployment/kube-system/calico-kube-controllers",
		"DaemonSet/kube-system/openstack-cloud-controller-manager", "Deployment/kube-system/csi-cinder-controllerplugin",
		"DaemonSet/kube-system/csi-cinder-nodeplugin", "DaemonSet/kube-system/k8s-keystone-auth", "Deployment/kube-system/metrics-server"}
	var names, images []string
	require.Eventually(t, func() bool {
		names, images = workloadWorkloads(t, kc)
		for _, w := range want {
			if !contains(names, w) {
				return false
			}
		}
		return true
	}, 3*time.Minute, 3*time.Second, "add-ons missing from the workload cluster: want %v", want)
	timed(t, "add-ons in the workload cluster", start)
	for _, img := range images {
		if strings.Contains(img, "kube-proxy") || strings.Contains(img, "coredns") {
			continue // kubeadm's own (imageRepository: the OpenStack flavor's ClusterClass, not the in-memory one)
		}
		require.True(t, strings.HasPrefix(img, prefix+"/"), "image %s is not under container_infra_prefix", img)
	}
	out, err = kubectl(t, kc, "get", "csidrivers.storage.k8s.io", addons.CinderDriver, "-o", "name")
	require.NoError(t, err, out)

	// kube-system/cloud-config holds the workload credential, not CAPO's.
	var cloudClouds struct {
		Clouds map[string]struct {
			Auth struct {
				ID string `json:"application_credential_id"`
			} `json:"auth"`
		} `json:"clouds"`
	}
	require.NoError(t, yaml.Unmarshal(secretData(t, ns, c.StackID+"-workload-cloud-config")["clouds.yaml"], &cloudClouds))
	var workloadID string
	for _, cl := range cloudClouds.Clouds {
		workloadID = cl.Auth.ID
	}
	require.NotEmpty(t, workloadID)
	var cfg struct{ Data map[string][]byte }
	kubectlJSON(t, kc, &cfg, "get", "secret", "-n", "kube-system", addons.CloudConfigName, "-o", "json")
	require.Contains(t, string(cfg.Data["cloud.conf"]), `application-credential-id="`+workloadID+`"`)
	require.NotContains(t, string(cfg.Data["clouds.yaml"]), capoCredentialID(t, ns, c.StackID))

	// The kinds the in-memory server cannot hold: a server-side dry run against the management cluster.
	set, err := addons.Render(addons.Input{Flavor: templates.FlavorInMemory, Namespace: ns, ClusterName: c.StackID,
		ClusterUUID: id, ProjectID: c.ProjectID, KubernetesVersion: c.COEVersion, PodCIDR: "10.100.0.0/16",
		Labels: map[string]string{}, Cloud: &addons.Credential{CloudsYAML: secretData(t, ns, c.StackID+"-workload-cloud-config")["clouds.yaml"]}})
	require.NoError(t, err)
	require.Len(t, set.Withheld, 2, "StorageClass and APIService")
	for _, o := range set.Withheld {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		require.NoError(t, err)
		b, err := json.Marshal(u)
		require.NoError(t, err)
		out, err := kubectlStdin(t, mgmtKubeconfig, b, "apply", "--server-side", "--dry-run=server", "-f", "-")
		require.NoError(t, err, "dry run of %s: %s", o.GetObjectKind().GroupVersionKind().Kind, out)
	}

	// Upgrade to a template with metrics-server off: gone from the workload cluster; the CCM follows
	// the new Kubernetes minor.
	start = time.Now()
	mustOpenstack(t, cloudDemo, "coe", "cluster", "upgrade", id, newTmpl)
	c = waitStatus(t, cloudDemo, id, 10*time.Minute, "UPDATE_COMPLETE")
	timed(t, "upgrade v1.35.4 → v1.36.3 with metrics-server off", start)
	require.Eventually(t, func() bool {
		names, images = workloadWorkloads(t, kc)
		return !contains(names, "Deployment/kube-system/metrics-server") &&
			contains(images, prefix+"/openstack-cloud-controller-manager:v1.36.0")
	}, 2*time.Minute, 3*time.Second, "after the upgrade: %v %v", names, images)

	mustOpenstack(t, cloudDemo, "coe", "cluster", "delete", id)
	waitGone(t, cloudDemo, id, 4*time.Minute)
	out, err = kubectl(t, mgmtKubeconfig, "get", "clusterresourcesets.addons.cluster.x-k8s.io,clusterresourcesetbindings.addons.cluster.x-k8s.io,secrets",
		"-n", ns, "-o", "name")
	require.NoError(t, err, out)
	for _, o := range strings.Fields(out) {
		require.NotContains(t, o, c.StackID, "an add-on object of the deleted cluster is left in the management cluster")
	}
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// kubectlStdin runs kubectl with input on its standard input.
func kubectlStdin(t *testing.T, kubeconfig string, input []byte, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--request-timeout=20s"}, args...)...)
	cmd.Stdin = bytes.NewReader(input)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// capoCredentialID is the application credential id of CAPO's clouds.yaml.
func capoCredentialID(t *testing.T, ns, stack string) string {
	t.Helper()
	var f struct {
		Clouds map[string]struct {
			Auth struct {
				ID string `json:"application_credential_id"`
			} `json:"auth"`
		} `json:"clouds"`
	}
	require.NoError(t, yaml.Unmarshal(secretData(t, ns, stack+"-cloud-config")["clouds.yaml"], &f))
	for _, c := range f.Clouds {
		require.NotEmpty(t, c.Auth.ID)
		return c.Auth.ID
	}
	t.Fatal("CAPO's clouds.yaml has no cloud")
	return ""
}
