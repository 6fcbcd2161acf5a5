package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/config"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// terraformConfig is what a tenant writes: a template with labels, a cluster of it (1 control plane,
// node_count workers) and one more node group. %[1]s is the provider block's body, %[2]s the names' prefix.
const terraformConfig = `
terraform {
  required_providers {
    openstack = { source = "terraform-provider-openstack/openstack" }
  }
}

provider "openstack" {
%[1]s
}

variable "node_count" {
  type    = number
  default = 1
}
variable "ng_node_count" {
  type    = number
  default = 1
}

resource "openstack_containerinfra_clustertemplate_v1" "t" {
  name                = "%[2]s"
  coe                 = "kubernetes"
  image               = "ubuntu-2404-kube-v1.36.3"
  external_network_id = "public"
  flavor              = "m1.small"
  master_flavor       = "m1.medium"
  keypair_id          = "default"
  labels = {
    kube_tag           = "v1.36.3"
    dns_cluster_domain = "tf.example"
  }
}

resource "openstack_containerinfra_cluster_v1" "c" {
  name                = "%[2]s"
  cluster_template_id = openstack_containerinfra_clustertemplate_v1.t.id
  master_count        = 1
  node_count          = var.node_count
  timeouts {
    create = "10m"
    update = "10m"
    delete = "10m"
  }
}

resource "openstack_containerinfra_nodegroup_v1" "ng" {
  name       = "extra"
  cluster_id = openstack_containerinfra_cluster_v1.c.id
  node_count = var.ng_node_count
  timeouts {
    create = "10m"
    update = "10m"
    delete = "10m"
  }
}

output "template_id" { value = openstack_containerinfra_clustertemplate_v1.t.id }
output "cluster_id" { value = openstack_containerinfra_cluster_v1.c.id }
output "stack_id" { value = openstack_containerinfra_cluster_v1.c.stack_id }
output "nodegroup_id" { value = openstack_containerinfra_nodegroup_v1.ng.id }
output "kubeconfig" {
  value     = openstack_containerinfra_cluster_v1.c.kubeconfig.raw_config
  sensitive = true
}
`

// TestTerraformZed drives OpenTofu with terraform-provider-openstack against magnum-api 15 (zed).
func TestTerraformZed(t *testing.T) {
	requireStack(t)
	t.Parallel()
	terraformLifecycle(t, "zed", cloudDemo, "", testutil.Env("MCB_MAGNUM_CONF", "/etc/magnum/magnum.conf"))
}

// TestTerraformNewest: the same against magnum-api 23, which the provider reaches through
// endpoint_overrides (the demo cloud of RegionOne, container-infra pointed at the other API).
func TestTerraformNewest(t *testing.T) {
	requireNewest(t)
	t.Parallel()
	shareNewestBridge(t)
	url := strings.TrimSuffix(testutil.Env("MCB_MAGNUM_NEW_URL", "http://127.0.0.1:9512/v1"), "/") + "/"
	terraformLifecycle(t, "23", cloudNewest, fmt.Sprintf("  endpoint_overrides = { \"container-infra\" = %q }", url),
		filepath.Join(newestRoot, "etc/magnum/magnum.conf"))
}

// terraformLifecycle: apply (template, cluster, node group) → the kubeconfig attribute works with
// kubectl → empty plan → node group and cluster resized (empty plan after each) → destroy, and
// neither Magnum's database nor the management cluster keeps anything of it. Tofu runs as demo of
// RegionOne; cliCloud is the same user for the CLI in front of the same magnum-api.
func terraformLifecycle(t *testing.T, api, cliCloud, provider, magnumConf string) {
	name := "tf-" + testutil.RandomHex(3)
	// step runs one tofu command and logs its TIMING line.
	step := func(what string, run func()) {
		start := time.Now()
		run()
		timed(t, api+": tofu "+what, start)
	}
	var tf *tofu
	step("init", func() { tf = newTofu(t, cloudDemo, fmt.Sprintf(terraformConfig, provider, name)) })
	counts := func(cluster, ng int) map[string]string {
		return map[string]string{"node_count": fmt.Sprint(cluster), "ng_node_count": fmt.Sprint(ng)}
	}

	step("apply template+cluster+nodegroup", func() { tf.apply(counts(1, 1)) })
	tmplID, clusterID, stackID := tf.output("template_id"), tf.output("cluster_id"), tf.output("stack_id")
	require.NotEmpty(t, stackID)

	// The template's labels reached the cluster's topology.
	out, err := kubectl(t, mgmtKubeconfig, "get", "clusters.cluster.x-k8s.io", "-A", "-l",
		"magnum.openstack.org/cluster-uuid="+clusterID, "-o", "jsonpath={.items[*].spec.clusterNetwork.serviceDomain}")
	require.NoError(t, err, out)
	require.Equal(t, "tf.example", out)

	// The kubeconfig attribute (built by the provider from get_ca_certificate + sign_certificate).
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(tf.output("kubeconfig")), 0o600))
	requireNodes := func(want int) {
		t.Helper()
		var out string
		for range 20 { // the fake API server may lag behind a change of machines
			out, err = kubectl(t, kc, "get", "nodes", "-o", "name")
			if err == nil && len(strings.Fields(out)) == want {
				return
			}
			time.Sleep(3 * time.Second)
		}
		t.Fatalf("the workload cluster (through the kubeconfig attribute) has not %d nodes: %v\n%s", want, err, out)
	}
	requireNodes(3)

	step("plan (empty) after apply", func() { tf.requireNoChanges(counts(1, 1)) })

	step("apply nodegroup node_count 1→2", func() { tf.apply(counts(1, 2)) })
	step("plan (empty) after nodegroup resize", func() { tf.requireNoChanges(counts(1, 2)) })
	requireNodes(4)

	step("apply cluster node_count 1→2", func() { tf.apply(counts(2, 2)) })
	step("plan (empty) after cluster resize", func() { tf.requireNoChanges(counts(2, 2)) })
	requireNodes(5)

	step("destroy", func() { tf.destroy(counts(2, 2)) })

	// Nothing left: not in Magnum (API and database) ...
	_, err = showCluster(t, cliCloud, clusterID)
	require.ErrorContains(t, err, "could not be found")
	conf, err := config.Load(magnumConf)
	require.NoError(t, err)
	store := magnumStore(t, conf)
	ctx := context.Background()
	notFound := func(err error) string {
		var e *magnum.Exception
		if errors.As(err, &e) {
			return e.Class
		}
		return fmt.Sprint(err)
	}
	_, err = store.GetCluster(ctx, clusterID)
	require.Equal(t, "ClusterNotFound", notFound(err), "cluster row after destroy")
	_, err = store.GetClusterTemplate(ctx, tmplID)
	require.Equal(t, "ClusterTemplateNotFound", notFound(err), "template row after destroy")
	// ... nor in the management cluster ...
	require.Empty(t, capiObjects(t, clusterID), "management cluster still holds objects of the destroyed cluster")
	out, err = kubectl(t, mgmtKubeconfig, "get", "machinedeployments,machines,kubeadmcontrolplanes", "-A", "-l",
		"cluster.x-k8s.io/cluster-name="+stackID, "-o", "name")
	require.NoError(t, err, out)
	require.Empty(t, strings.TrimSpace(out), "CAPI objects of the destroyed cluster")
	// ... and the node group rows, which the bridge keeps (invisible) for db.DefaultNodeGroupDeleteDelay
	// after the cluster row so that no magnum-api request sees a cluster without them, go after that.
	deadline := time.Now().Add(db.DefaultNodeGroupDeleteDelay + time.Minute)
	for {
		ngs, err := store.ListNodeGroups(ctx, clusterID)
		require.NoError(t, err)
		if len(ngs) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d node group rows of the destroyed cluster left after %s",
			len(ngs), db.DefaultNodeGroupDeleteDelay+time.Minute)
		time.Sleep(5 * time.Second)
	}
}
