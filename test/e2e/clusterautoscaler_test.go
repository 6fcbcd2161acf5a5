package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// TestClusterAutoscalerRunsConfinedToItsCluster: a template with autoscaling from zero gets a
// cluster-autoscaler in the cluster's project namespace (server-side applied by the bridge, read
// back here); its ServiceAccount may resize its own cluster's MachineDeployments and nothing else;
// a resize made with that ServiceAccount's own token shows in Magnum; each autoscaled group carries
// the capacity of its Nova flavor; the autoscaler follows the autoscaled groups and goes with the
// cluster. The autoscaler's binary itself cannot run here (its image is not reachable); everything
// around it is real.
func TestClusterAutoscalerRunsConfinedToItsCluster(t *testing.T) {
	requireStack(t)
	t.Parallel()
	tmpl := createTemplate(t, cloudDemo, "--labels", "auto_scaling_enabled=true,min_node_count=0,max_node_count=5")
	// Autoscaled from the template's labels.
	scaled := createCluster(t, cloudDemo, tmpl, "as-"+testutil.RandomHex(3), "--node-count", "1")
	// Labels of its own replace the template's: no group autoscaled, until a node group with a maximum.
	fixed := createCluster(t, cloudDemo, tmpl, "fx-"+testutil.RandomHex(3), "--node-count", "1", "--labels", "auto_scaling_enabled=true")
	a := waitStatus(t, cloudDemo, scaled, 6*time.Minute, "CREATE_COMPLETE")
	b := waitStatus(t, cloudDemo, fixed, 6*time.Minute, "CREATE_COMPLETE")
	ns := capiNamespaceOf(t, a.StackID)
	name := a.StackID + "-autoscaler"
	sa := "system:serviceaccount:" + ns + ":" + name

	// The objects, as the bridge applied them.
	var dep appsv1.Deployment
	waitFor(t, 2*time.Minute, "the autoscaler's Deployment", func() bool {
		_, err := kubectl(t, mgmtKubeconfig, "-n", ns, "get", "deployment", name)
		return err == nil
	})
	kubectlJSON(t, mgmtKubeconfig, &dep, "-n", ns, "get", "deployment", name, "-o", "json")
	pod := dep.Spec.Template.Spec
	require.Equal(t, name, pod.ServiceAccountName)
	require.Equal(t, "magnum-cluster-autoscaler", pod.PriorityClassName)
	require.Len(t, pod.Containers, 1)
	require.Equal(t, "registry.k8s.io/autoscaling/cluster-autoscaler:"+autoscalerReleaseOf(t, a.COEVersion), pod.Containers[0].Image)
	args := strings.Join(pod.Containers[0].Args, " ")
	require.Contains(t, args, "--cloud-provider=clusterapi")
	require.Contains(t, args, "--node-group-auto-discovery=clusterapi:namespace="+ns+",clusterName="+a.StackID)
	require.Contains(t, args, "--kubeconfig=/etc/kubernetes/workload/value")
	require.Contains(t, args, "--expander=least-waste,random")
	require.Len(t, pod.Volumes, 1)
	require.Equal(t, a.StackID+"-kubeconfig", pod.Volumes[0].Secret.SecretName, "the workload cluster's kubeconfig")
	require.Equal(t, "/etc/kubernetes/workload", pod.Containers[0].VolumeMounts[0].MountPath)
	managers, err := kubectl(t, mgmtKubeconfig, "-n", ns, "get", "deployment", name, "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}")
	require.NoError(t, err, managers)
	require.Contains(t, managers, "magnum-capi-bridge", "server-side applied by the bridge")
	md := autoscaledMachineDeployment(t, ns, a.StackID)
	var role rbacv1.Role
	kubectlJSON(t, mgmtKubeconfig, &role, "-n", ns, "get", "role", name, "-o", "json")
	require.Contains(t, writableMachineDeployments(role), md, "the Role names the cluster's autoscaled MachineDeployment")

	// What its ServiceAccount may do.
	bNS := capiNamespaceOf(t, b.StackID)
	require.Equal(t, ns, bNS, "both clusters are demo's")
	otherMD := firstMachineDeployment(t, ns, b.StackID)
	altNS := altProjectNamespace(t)
	for _, c := range []struct {
		verb, resource, namespace string
		want                      bool
	}{
		{"patch", "machinedeployments.cluster.x-k8s.io/" + md, ns, true},
		{"update", "machinedeployments.cluster.x-k8s.io/" + md + " --subresource=scale", ns, true},
		{"list", "machines.cluster.x-k8s.io", ns, true},
		{"patch", "machinedeployments.cluster.x-k8s.io/" + otherMD, ns, false},
		{"patch", "machinedeployments.cluster.x-k8s.io", altNS, false},
		{"list", "machines.cluster.x-k8s.io", altNS, false},
		{"get", "secrets/" + a.StackID + "-kubeconfig", ns, false},
		{"get", "secrets/" + a.StackID + "-ca", ns, false},
		{"create", "pods", ns, false},
		{"patch", "clusters.cluster.x-k8s.io/" + a.StackID, ns, false},
		{"list", "machinedeployments.cluster.x-k8s.io", "kube-system", false},
	} {
		require.Equal(t, c.want, canI(t, sa, c.verb, c.resource, c.namespace), "%s may %s %s in %s", sa, c.verb, c.resource, c.namespace)
	}

	// A resize with the ServiceAccount's own token, as the autoscaler makes it: Magnum follows.
	asAutoscaler := serviceAccountKubeconfig(t, ns, name)
	out, err := kubectl(t, asAutoscaler, "-n", ns, "scale", "machinedeployment.cluster.x-k8s.io/"+md, "--replicas=2")
	require.NoError(t, err, out)
	waitFor(t, time.Minute, "node_count 2 in Magnum", func() bool {
		ng, err := showNodeGroup(t, scaled, "default-worker")
		return err == nil && ng.NodeCount == 2
	})
	out, err = kubectl(t, asAutoscaler, "-n", ns, "scale", "machinedeployment.cluster.x-k8s.io/"+otherMD, "--replicas=3")
	require.Error(t, err, "another cluster's MachineDeployment")
	require.Contains(t, out, "forbidden")

	// Scale from zero: the group carries a node's capacity, from the template's flavor.
	var flavor struct {
		VCPUs int `json:"vcpus"`
		RAM   int `json:"ram"`
		Disk  int `json:"disk"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustOpenstack(t, cloudDemo, "flavor", "show", "m1.small", "-f", "json")), &flavor))
	capacity := machineDeploymentAnnotations(t, ns, md)
	require.Equal(t, fmt.Sprint(flavor.VCPUs), capacity["capacity.cluster-autoscaler.kubernetes.io/cpu"])
	require.Equal(t, fmt.Sprintf("%dMi", flavor.RAM), capacity["capacity.cluster-autoscaler.kubernetes.io/memory"])
	require.Equal(t, fmt.Sprintf("%dGi", flavor.Disk), capacity["capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk"])
	require.Equal(t, "0", capacity["cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"])

	// The other cluster: none until a group is autoscaled, and none once it is gone.
	bName := b.StackID + "-autoscaler"
	requireNoAutoscaler(t, ns, b.UUID)
	mustOpenstack(t, cloudDemo, "coe", "nodegroup", "create", fixed, "elastic", "--node-count", "1", "--min-nodes", "0", "--max-nodes", "3", "--flavor", "m1.medium")
	waitNodeGroup(t, fixed, "elastic", "CREATE_COMPLETE")
	waitFor(t, 2*time.Minute, "the second cluster's autoscaler", func() bool {
		_, err := kubectl(t, mgmtKubeconfig, "-n", ns, "get", "role", bName)
		return err == nil && len(writableMachineDeploymentsOf(t, ns, bName)) == 1
	})
	elastic := writableMachineDeploymentsOf(t, ns, bName)[0]
	require.Contains(t, elastic, "elastic", "only the autoscaled group")
	require.Equal(t, "2", machineDeploymentAnnotations(t, ns, elastic)["capacity.cluster-autoscaler.kubernetes.io/cpu"], "m1.medium's vCPUs")
	mustOpenstack(t, cloudDemo, "coe", "nodegroup", "delete", fixed, "elastic")
	waitFor(t, 3*time.Minute, "the second cluster's autoscaler to go with its autoscaled group", func() bool {
		return autoscalerObjects(t, ns, b.UUID) == ""
	})

	// The cluster's delete takes its autoscaler with it.
	mustOpenstack(t, cloudDemo, "coe", "cluster", "delete", scaled)
	waitGone(t, cloudDemo, scaled, 4*time.Minute)
	requireNoAutoscaler(t, ns, a.UUID)
}

// autoscalerReleaseOf is the autoscaler release of a Kubernetes version's minor (internal/autoscaler's table).
func autoscalerReleaseOf(t *testing.T, version string) string {
	t.Helper()
	releases := map[string]string{"v1.30": "v1.30.7", "v1.31": "v1.31.5", "v1.32": "v1.32.7", "v1.33": "v1.33.6",
		"v1.34": "v1.34.5", "v1.35": "v1.35.2", "v1.36": "v1.36.1"}
	parts := strings.SplitN(version, ".", 3)
	require.Len(t, parts, 3, version)
	r, ok := releases[parts[0]+"."+parts[1]]
	require.True(t, ok, "no autoscaler release for %s", version)
	return r
}

func capiNamespaceOf(t *testing.T, stackID string) string {
	t.Helper()
	out, err := kubectl(t, mgmtKubeconfig, "get", "clusters.cluster.x-k8s.io", "-A", "--field-selector", "metadata.name="+stackID,
		"-o", "jsonpath={.items[0].metadata.namespace}")
	require.NoError(t, err, out)
	require.NotEmpty(t, out, "no CAPI Cluster %s", stackID)
	return out
}

// autoscaledMachineDeployment is the cluster's MachineDeployment with the autoscaler's size annotations.
func autoscaledMachineDeployment(t *testing.T, ns, cluster string) string {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		} `json:"items"`
	}
	kubectlJSON(t, mgmtKubeconfig, &list, "-n", ns, "get", "machinedeployments.cluster.x-k8s.io", "-l", "cluster.x-k8s.io/cluster-name="+cluster, "-o", "json")
	for _, md := range list.Items {
		if _, ok := md.Metadata.Annotations["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"]; ok {
			return md.Metadata.Name
		}
	}
	t.Fatalf("cluster %s has no autoscaled MachineDeployment", cluster)
	return ""
}

func firstMachineDeployment(t *testing.T, ns, cluster string) string {
	t.Helper()
	out, err := kubectl(t, mgmtKubeconfig, "-n", ns, "get", "machinedeployments.cluster.x-k8s.io", "-l", "cluster.x-k8s.io/cluster-name="+cluster,
		"-o", "jsonpath={.items[0].metadata.name}")
	require.NoError(t, err, out)
	require.NotEmpty(t, out)
	return out
}

func machineDeploymentAnnotations(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	var md struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	kubectlJSON(t, mgmtKubeconfig, &md, "-n", ns, "get", "machinedeployments.cluster.x-k8s.io", name, "-o", "json")
	return md.Metadata.Annotations
}

// writableMachineDeployments are the MachineDeployments a Role lets its subject patch.
func writableMachineDeployments(role rbacv1.Role) []string {
	var names []string
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "machinedeployments" && len(r.ResourceNames) > 0 {
				names = append(names, r.ResourceNames...)
			}
		}
	}
	return names
}

func writableMachineDeploymentsOf(t *testing.T, ns, role string) []string {
	t.Helper()
	var r rbacv1.Role
	kubectlJSON(t, mgmtKubeconfig, &r, "-n", ns, "get", "role", role, "-o", "json")
	return writableMachineDeployments(r)
}

// altProjectNamespace is alt_demo's project namespace (made if it does not exist yet: a SubjectAccessReview needs none).
func altProjectNamespace(t *testing.T) string {
	t.Helper()
	var token struct {
		ProjectID string `json:"project_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustOpenstack(t, cloudAlt, "token", "issue", "-f", "json")), &token))
	return "magnum-" + token.ProjectID
}

// canI asks the apiserver (a SubjectAccessReview through impersonation) whether user may do verb on resource.
func canI(t *testing.T, user, verb, resource, namespace string) bool {
	t.Helper()
	args := []string{"auth", "can-i", verb}
	args = append(args, strings.Fields(resource)...)
	out, err := kubectl(t, mgmtKubeconfig, append(args, "-n", namespace, "--as", user)...)
	out = strings.TrimSpace(out)
	if err != nil && !strings.HasPrefix(out, "no") {
		t.Fatalf("kubectl auth can-i %s %s: %v: %s", verb, resource, err, out)
	}
	return strings.HasPrefix(out, "yes")
}

// serviceAccountKubeconfig is a kubeconfig of the management cluster with a short-lived token of a ServiceAccount.
func serviceAccountKubeconfig(t *testing.T, ns, name string) string {
	t.Helper()
	token, err := kubectl(t, mgmtKubeconfig, "-n", ns, "create", "token", name, "--duration=10m")
	require.NoError(t, err, token)
	cfg, err := clientcmd.LoadFromFile(mgmtKubeconfig)
	require.NoError(t, err)
	for k := range cfg.AuthInfos {
		cfg.AuthInfos[k] = &clientcmdapi.AuthInfo{Token: strings.TrimSpace(token)}
	}
	path := filepath.Join(t.TempDir(), "sa.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	require.NoError(t, os.Chmod(path, 0o600))
	return path
}

// autoscalerObjects lists what the management cluster holds of a cluster's autoscaler.
func autoscalerObjects(t *testing.T, ns, clusterUUID string) string {
	t.Helper()
	out, err := kubectl(t, mgmtKubeconfig, "-n", ns, "get", "deployments,roles,rolebindings,serviceaccounts", "-l",
		"magnum.openstack.org/cluster-uuid="+clusterUUID+",app.kubernetes.io/component=cluster-autoscaler", "-o", "name")
	require.NoError(t, err, out)
	return strings.TrimSpace(out)
}

func requireNoAutoscaler(t *testing.T, ns, clusterUUID string) {
	t.Helper()
	require.Empty(t, autoscalerObjects(t, ns, clusterUUID))
}

func waitFor(t *testing.T, timeout time.Duration, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		require.True(t, time.Now().Before(deadline), "%s: not within %s", what, timeout)
		time.Sleep(time.Second)
	}
}
