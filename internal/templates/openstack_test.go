package templates_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/templatestest"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates/topologysim"
)

// renderAndPatch renders the input and runs CAPI's patch engine over the result, so a test sees
// the OpenStackCluster, KubeadmControlPlane and machine templates CAPI would create.
func renderAndPatch(t *testing.T, in templates.Input) (*templates.Rendered, *topologysim.Desired) {
	t.Helper()
	r, err := templates.Render(in)
	require.NoError(t, err)
	d, err := topologysim.Compute(context.Background(), r.ClassObjects, r.Cluster)
	require.NoError(t, err, "CAPI's patch engine refused the rendering")
	return r, d
}

func toYAML(t *testing.T, objs ...*unstructured.Unstructured) string {
	t.Helper()
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String()
}

// The OpenStack class does not depend on the input: every cluster shares it, so it has one golden
// file, and each matrix case's golden file holds its Cluster and what CAPI derives from it.
func TestOpenStackGolden(t *testing.T) {
	matrix := templatestest.OpenStackMatrix()
	var className string
	for _, name := range templatestest.SortedNames(matrix) {
		t.Run(name, func(t *testing.T) {
			r, d := renderAndPatch(t, matrix[name])
			if className == "" {
				className = r.ClassName
				templates.CheckGolden(t, "openstack-class", toYAML(t, r.ClassObjects...))
			}
			require.Equal(t, className, r.ClassName, "every OpenStack cluster shares the class")
			var b strings.Builder
			fmt.Fprintf(&b, "# version: %s\n# server groups: %v\n# not implemented: %v\n", r.Version, r.ServerGroups, r.Unimplemented)
			b.WriteString(toYAML(t, r.Cluster))
			b.WriteString("# --- objects CAPI's topology controller derives (patches applied) ---\n")
			b.WriteString(toYAML(t, d.Objects()...))
			templates.CheckGolden(t, name, b.String())
		})
	}
}

// --- accessors -----------------------------------------------------------------------------------

func field(t *testing.T, o *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, found, err := unstructured.NestedFieldNoCopy(o.Object, path...)
	require.NoError(t, err)
	if !found {
		return nil
	}
	return v
}

var (
	osmt        = []string{"spec", "template", "spec"}
	apiArgs     = []string{"spec", "kubeadmConfigSpec", "clusterConfiguration", "apiServer", "extraArgs"}
	cpInitArgs  = []string{"spec", "kubeadmConfigSpec", "initConfiguration", "nodeRegistration", "kubeletExtraArgs"}
	cpJoinArgs  = []string{"spec", "kubeadmConfigSpec", "joinConfiguration", "nodeRegistration", "kubeletExtraArgs"}
	workerArgs  = []string{"spec", "template", "spec", "joinConfiguration", "nodeRegistration", "kubeletExtraArgs"}
	clusterTopo = []string{"spec", "topology"}
)

func path(base []string, more ...string) []string {
	return append(append([]string{}, base...), more...)
}

// arg is the value of a kubeadm extra argument, "" when absent.
func arg(t *testing.T, o *unstructured.Unstructured, list []string, name string) string {
	t.Helper()
	args, _ := field(t, o, list...).([]any)
	for _, a := range args {
		m := a.(map[string]any)
		if m["name"] == name {
			return fmt.Sprint(m["value"])
		}
	}
	return ""
}

func worker(d *topologysim.Desired, name string) topologysim.MachineDeployment {
	return d.MachineDeployments[name]
}

// mdTopology is the Cluster's topology entry of a MachineDeployment.
func mdTopology(t *testing.T, r *templates.Rendered, name string) map[string]any {
	t.Helper()
	mds, _ := field(t, r.Cluster, path(clusterTopo, "workers", "machineDeployments")...).([]any)
	for _, m := range mds {
		if m.(map[string]any)["name"] == name {
			return m.(map[string]any)
		}
	}
	t.Fatalf("no machine deployment %s", name)
	return nil
}

func dig(m any, keys ...string) any {
	for _, k := range keys {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[k]
	}
	return m
}

// --- every implemented label changes the rendering as documented ----------------------------------

type effectCase struct {
	labels map[string]string
	mutate func(*templates.Input)
	// check asserts the documented effect on the rendering and on what CAPI derives from it.
	check func(t *testing.T, r *templates.Rendered, d *topologysim.Desired)
	// sameObjects: the label's value is what the bridge renders anyway (only its reporting changes).
	sameObjects bool
	// baseline overrides the labels compared against (default: the case's labels without this one).
	baseline map[string]string
}

func cpAndWorkerMachines(d *topologysim.Desired) []*unstructured.Unstructured {
	return []*unstructured.Unstructured{d.ControlPlaneMachineTemplate, worker(d, "default-worker").InfrastructureMachineTemplate}
}

var openStackEffects = map[string]effectCase{
	// On a bridge whose default is OpenStack, a template may ask for in-memory machines (allowed or
	// not is checked apart: TestInfrastructureLabelHonoursTheOperatorsChoice).
	templates.LabelInfrastructure: {labels: map[string]string{templates.LabelInfrastructure: "inmemory"}, check: func(t *testing.T, r *templates.Rendered, _ *topologysim.Desired) {
		require.Equal(t, templates.FlavorInMemory, r.Flavor)
		require.Equal(t, []string{"DevClusterTemplate", "DevMachineTemplate"}, kindsOf(r.ClassObjects, templates.InfraGroupVersion))
		require.Empty(t, kindsOf(r.ClassObjects, templates.CAPOGroupVersion))
	}},
	"kube_tag": {labels: map[string]string{"kube_tag": "v1.35.4"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "v1.35.4", field(t, r.Cluster, path(clusterTopo, "version")...))
		require.Equal(t, "v1.35.4", field(t, d.ControlPlane, "spec", "version"))
	}},
	"container_infra_prefix": {labels: map[string]string{"container_infra_prefix": "registry.example.com/mirror/"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "registry.example.com/mirror", field(t, d.ControlPlane, "spec", "kubeadmConfigSpec", "clusterConfiguration", "imageRepository"))
	}},
	"calico_ipv4pool": {labels: map[string]string{"calico_ipv4pool": "10.200.0.0/16"}, check: podCIDR("10.200.0.0/16")},
	"cilium_ipv4pool": {labels: map[string]string{"cilium_ipv4pool": "10.201.0.0/16"},
		mutate: func(in *templates.Input) { in.Template.NetworkDriver = "cilium" }, check: podCIDR("10.201.0.0/16")},
	"flannel_network_cidr": {labels: map[string]string{"flannel_network_cidr": "10.202.0.0/16"},
		mutate: func(in *templates.Input) { in.Template.NetworkDriver = "flannel" }, check: podCIDR("10.202.0.0/16")},
	"service_cluster_ip_range": {labels: map[string]string{"service_cluster_ip_range": "10.43.0.0/16"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, []any{"10.43.0.0/16"}, field(t, r.Cluster, "spec", "clusterNetwork", "services", "cidrBlocks"))
	}},
	"dns_cluster_domain": {labels: map[string]string{"dns_cluster_domain": "k8s.example"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "k8s.example", field(t, r.Cluster, "spec", "clusterNetwork", "serviceDomain"))
	}},
	"fixed_subnet_cidr": {labels: map[string]string{"fixed_subnet_cidr": "192.168.7.0/24"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "192.168.7.0/24", dig(field(t, d.InfrastructureCluster, "spec", "managedSubnets").([]any)[0], "cidr"))
	}},
	"extra_network_names": {labels: map[string]string{"extra_network_names": "storage,9d8c7b6a-5f4e-4d3c-b2a1-0f9e8d7c6b5a"}, check: extraNetworks},
	"extra_network_name":  {labels: map[string]string{"extra_network_name": "storage 9d8c7b6a-5f4e-4d3c-b2a1-0f9e8d7c6b5a"}, check: extraNetworks},
	"master_lb_floating_ip_enabled": {labels: map[string]string{"master_lb_floating_ip_enabled": "false"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, true, field(t, d.InfrastructureCluster, "spec", "disableAPIServerFloatingIP"))
	}},
	"master_lb_allowed_cidrs":     {labels: map[string]string{"master_lb_allowed_cidrs": "192.0.2.0/24,198.51.100.0/24"}, check: allowedCIDRs},
	"api_master_lb_allowed_cidrs": {labels: map[string]string{"api_master_lb_allowed_cidrs": "192.0.2.0/24, 198.51.100.0/24"}, check: allowedCIDRs},
	"octavia_provider": {labels: map[string]string{"octavia_provider": "ovn"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "ovn", field(t, d.InfrastructureCluster, "spec", "apiServerLoadBalancer", "provider"))
	}},
	"octavia_lb_algorithm": {labels: map[string]string{"octavia_lb_algorithm": "ROUND_ROBIN"}, sameObjects: true, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.NotContains(t, r.Unimplemented, "octavia_lb_algorithm", "CAPO's own algorithm is honoured")
	}},
	"api_server_floating_ip": {labels: map[string]string{"api_server_floating_ip": "203.0.113.10"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "203.0.113.10", field(t, d.InfrastructureCluster, "spec", "apiServerFloatingIP"))
	}},
	"api_server_lb_flavor": {labels: map[string]string{"api_server_lb_flavor": "lb.small"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "lb.small", field(t, d.InfrastructureCluster, "spec", "apiServerLoadBalancer", "flavor"))
	}},
	"api_server_lb_availability_zone": {labels: map[string]string{"api_server_lb_availability_zone": "az-lb"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "az-lb", field(t, d.InfrastructureCluster, "spec", "apiServerLoadBalancer", "availabilityZone"))
	}},
	"availability_zone": {labels: map[string]string{"availability_zone": "az-1"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "az-1", mdTopology(t, r, "default-worker")["failureDomain"])
		require.Equal(t, "az-1", worker(d, "default-worker").Object.Spec.Template.Spec.FailureDomain)
		require.Equal(t, []any{"az-1"}, field(t, d.InfrastructureCluster, "spec", "controlPlaneAvailabilityZones"))
	}},
	"control_plane_availability_zones": {labels: map[string]string{"control_plane_availability_zones": "az-1, az-2,az-3"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, []any{"az-1", "az-2", "az-3"}, field(t, d.InfrastructureCluster, "spec", "controlPlaneAvailabilityZones"))
	}},
	"server_group_policies": {labels: map[string]string{"server_group_policies": "anti-affinity"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, []templates.ServerGroup{{Name: "k8s-demo-bd71db63-control-plane", Policy: "anti-affinity"},
			{Name: "k8s-demo-bd71db63-default-worker", Policy: "anti-affinity"}}, r.ServerGroups)
		require.Equal(t, "k8s-demo-bd71db63-control-plane", dig(field(t, d.ControlPlaneMachineTemplate, path(osmt, "serverGroup")...), "filter", "name"))
		require.Equal(t, "k8s-demo-bd71db63-default-worker", dig(field(t, worker(d, "default-worker").InfrastructureMachineTemplate, path(osmt, "serverGroup")...), "filter", "name"))
	}},
	"boot_volume_size": {labels: map[string]string{"boot_volume_size": "40"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		for _, m := range cpAndWorkerMachines(d) {
			require.Equal(t, map[string]any{"sizeGiB": int64(40)}, field(t, m, path(osmt, "rootVolume")...))
		}
	}},
	"boot_volume_type": {labels: map[string]string{"boot_volume_size": "40", "boot_volume_type": "ssd"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		for _, m := range cpAndWorkerMachines(d) {
			require.Equal(t, "ssd", field(t, m, path(osmt, "rootVolume", "type")...))
		}
	}},
	"boot_volume_availability_zone": {labels: map[string]string{"boot_volume_size": "40", "boot_volume_availability_zone": "az-vol"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		for _, m := range cpAndWorkerMachines(d) {
			require.Equal(t, map[string]any{"from": "Name", "name": "az-vol"}, field(t, m, path(osmt, "rootVolume", "availabilityZone")...))
		}
	}},
	"admission_control_list": {labels: map[string]string{"admission_control_list": "AlwaysPullImages, PodSecurity"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "NodeRestriction,AlwaysPullImages,PodSecurity", arg(t, d.ControlPlane, apiArgs, "enable-admission-plugins"))
	}},
	"api_server_cert_sans": {labels: map[string]string{"api_server_cert_sans": "k8s.example.com,203.0.113.7,*.apps.example.com"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, []any{"k8s.example.com", "203.0.113.7", "*.apps.example.com"},
			field(t, d.ControlPlane, "spec", "kubeadmConfigSpec", "clusterConfiguration", "apiServer", "certSANs"))
	}},
	"api_server_tls_cipher_suites": {labels: map[string]string{"api_server_tls_cipher_suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256", arg(t, d.ControlPlane, apiArgs, "tls-cipher-suites"))
	}},
	"kubelet_tls_cipher_suites": {labels: map[string]string{"kubelet_tls_cipher_suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		const want = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
		require.Equal(t, want, arg(t, d.ControlPlane, cpInitArgs, "tls-cipher-suites"))
		require.Equal(t, want, arg(t, d.ControlPlane, cpJoinArgs, "tls-cipher-suites"))
		require.Equal(t, want, arg(t, worker(d, "default-worker").BootstrapTemplate, workerArgs, "tls-cipher-suites"))
		require.Equal(t, "", arg(t, d.ControlPlane, apiArgs, "tls-cipher-suites"), "not the API server's")
	}},
	"oidc_issuer_url": {labels: oidc(nil), baseline: map[string]string{}, check: oidcArg("oidc-issuer-url", "https://id.example.com")},
	"oidc_client_id":  {labels: oidc(nil), baseline: map[string]string{}, check: oidcArg("oidc-client-id", "kubernetes")},
	"oidc_username_claim": {labels: oidc(map[string]string{"oidc_username_claim": "email"}), check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "email", arg(t, d.ControlPlane, apiArgs, "oidc-username-claim"))
	}},
	"oidc_username_prefix": {labels: oidc(map[string]string{"oidc_username_prefix": "oidc:"}), check: oidcArg("oidc-username-prefix", "oidc:")},
	"oidc_groups_claim":    {labels: oidc(map[string]string{"oidc_groups_claim": "groups"}), check: oidcArg("oidc-groups-claim", "groups")},
	"oidc_groups_prefix":   {labels: oidc(map[string]string{"oidc_groups_prefix": "g:"}), check: oidcArg("oidc-groups-prefix", "g:")},
	"audit_log_enabled": {labels: map[string]string{"audit_log_enabled": "true"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, "/var/log/kubernetes/audit/kube-apiserver-audit.log", arg(t, d.ControlPlane, apiArgs, "audit-log-path"))
		require.Equal(t, "/etc/kubernetes/audit-policy.yaml", arg(t, d.ControlPlane, apiArgs, "audit-policy-file"))
		require.Equal(t, "30", arg(t, d.ControlPlane, apiArgs, "audit-log-maxage"))
		files := field(t, d.ControlPlane, "spec", "kubeadmConfigSpec", "files").([]any)
		require.Equal(t, "/etc/kubernetes/audit-policy.yaml", dig(files[0], "path"))
		require.Contains(t, dig(files[0], "content"), "kind: Policy")
		require.Len(t, field(t, d.ControlPlane, "spec", "kubeadmConfigSpec", "clusterConfiguration", "apiServer", "extraVolumes"), 2)
	}},
	"audit_log_max_age":    {labels: map[string]string{"audit_log_enabled": "true", "audit_log_max_age": "7"}, check: auditArg("audit-log-maxage", "7")},
	"audit_log_maxage":     {labels: map[string]string{"audit_log_enabled": "true", "audit_log_maxage": "8"}, check: auditArg("audit-log-maxage", "8")},
	"audit_log_max_backup": {labels: map[string]string{"audit_log_enabled": "true", "audit_log_max_backup": "3"}, check: auditArg("audit-log-maxbackup", "3")},
	"audit_log_maxbackup":  {labels: map[string]string{"audit_log_enabled": "true", "audit_log_maxbackup": "4"}, check: auditArg("audit-log-maxbackup", "4")},
	"audit_log_max_size":   {labels: map[string]string{"audit_log_enabled": "true", "audit_log_max_size": "50"}, check: auditArg("audit-log-maxsize", "50")},
	"audit_log_maxsize":    {labels: map[string]string{"audit_log_enabled": "true", "audit_log_maxsize": "60"}, check: auditArg("audit-log-maxsize", "60")},
	"auto_healing_enabled": {labels: map[string]string{"auto_healing_enabled": "false"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, false, field(t, r.Cluster, path(clusterTopo, "controlPlane", "healthCheck", "enabled")...))
		require.Equal(t, false, dig(mdTopology(t, r, "default-worker"), "healthCheck", "enabled"))
	}},
	"auto_healing_node_timeout": {labels: map[string]string{"auto_healing_node_timeout": "45"}, check: func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		conds := dig(mdTopology(t, r, "default-worker"), "healthCheck", "checks", "unhealthyNodeConditions").([]any)
		require.Len(t, conds, 2)
		for _, c := range conds {
			require.EqualValues(t, 45, dig(c, "timeoutSeconds"))
		}
	}},
	"auto_scaling_enabled": {labels: map[string]string{"auto_scaling_enabled": "true", "max_node_count": "6"}, check: autoscaled("0", "6")},
	"min_node_count":       {labels: map[string]string{"auto_scaling_enabled": "true", "min_node_count": "2", "max_node_count": "6"}, check: autoscaled("2", "6")},
	"max_node_count":       {labels: map[string]string{"auto_scaling_enabled": "true", "max_node_count": "9"}, check: autoscaled("0", "9")},
}

func podCIDR(want string) func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
	return func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, []any{want}, field(t, r.Cluster, "spec", "clusterNetwork", "pods", "cidrBlocks"))
	}
}

func extraNetworks(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
	for _, m := range cpAndWorkerMachines(d) {
		require.Equal(t, []any{
			map[string]any{},
			map[string]any{"network": map[string]any{"filter": map[string]any{"name": "storage"}}},
			map[string]any{"network": map[string]any{"id": "9d8c7b6a-5f4e-4d3c-b2a1-0f9e8d7c6b5a"}},
		}, field(t, m, path(osmt, "ports")...))
	}
}

func allowedCIDRs(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
	require.Equal(t, []any{"192.0.2.0/24", "198.51.100.0/24"}, field(t, d.InfrastructureCluster, "spec", "apiServerLoadBalancer", "allowedCIDRs"))
}

func oidc(extra map[string]string) map[string]string {
	m := map[string]string{"oidc_issuer_url": "https://id.example.com", "oidc_client_id": "kubernetes"}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func oidcArg(flag, want string) func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
	return func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, want, arg(t, d.ControlPlane, apiArgs, flag))
	}
}

func auditArg(flag, want string) func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
	return func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		require.Equal(t, want, arg(t, d.ControlPlane, apiArgs, flag))
	}
}

func autoscaled(min, max string) func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
	return func(t *testing.T, r *templates.Rendered, d *topologysim.Desired) {
		md := mdTopology(t, r, "default-worker")
		require.Nil(t, md["replicas"], "the autoscaler owns the replicas")
		require.Equal(t, min, dig(md, "metadata", "annotations", templates.AutoscalerMinAnnotation))
		require.Equal(t, max, dig(md, "metadata", "annotations", templates.AutoscalerMaxAnnotation))
	}
}

// inMemoryEffects are the labels the in-memory flavor implements, checked on its rendering.
var inMemoryEffects = map[string]effectCase{
	"kube_tag": {labels: map[string]string{"kube_tag": "v1.35.4"}, check: func(t *testing.T, r *templates.Rendered, _ *topologysim.Desired) {
		require.Equal(t, "v1.35.4", field(t, r.Cluster, path(clusterTopo, "version")...))
	}},
	"calico_ipv4pool": {labels: map[string]string{"calico_ipv4pool": "10.200.0.0/16"}, check: podCIDR("10.200.0.0/16")},
	"cilium_ipv4pool": {labels: map[string]string{"cilium_ipv4pool": "10.201.0.0/16"},
		mutate: func(in *templates.Input) { in.Template.NetworkDriver = "cilium" }, check: podCIDR("10.201.0.0/16")},
	"flannel_network_cidr": {labels: map[string]string{"flannel_network_cidr": "10.202.0.0/16"},
		mutate: func(in *templates.Input) { in.Template.NetworkDriver = "flannel" }, check: podCIDR("10.202.0.0/16")},
	"service_cluster_ip_range": openStackEffects["service_cluster_ip_range"],
	"dns_cluster_domain":       openStackEffects["dns_cluster_domain"],
	"auto_healing_enabled": {labels: map[string]string{"auto_healing_enabled": "false"}, check: func(t *testing.T, r *templates.Rendered, _ *topologysim.Desired) {
		class := r.ClassObjects[len(r.ClassObjects)-1]
		mdc := field(t, class, "spec", "workers", "machineDeployments").([]any)[0]
		require.Nil(t, dig(mdc, "healthCheck"))
	}},
	"auto_scaling_enabled":      openStackEffects["auto_scaling_enabled"],
	"auto_healing_node_timeout": openStackEffects["auto_healing_node_timeout"],
	"min_node_count":            openStackEffects["min_node_count"],
	"max_node_count":            openStackEffects["max_node_count"],
	"inmemory_machine_startup": {labels: map[string]string{"inmemory_machine_startup": "45s"}, check: func(t *testing.T, r *templates.Rendered, _ *topologysim.Desired) {
		require.Equal(t, "45s", field(t, r.ClassObjects[1], "spec", "template", "spec", "backend", "inMemory", "vm", "provisioning", "startupDuration"))
	}},
	// On a bridge whose default is the in-memory flavor, a template may ask for OpenStack machines.
	templates.LabelInfrastructure: {labels: map[string]string{templates.LabelInfrastructure: "openstack"},
		mutate: func(in *templates.Input) {
			*in = templatestest.BaseOpenStackInput()
			in.Flavor = templates.FlavorInMemory
		},
		check: func(t *testing.T, r *templates.Rendered, _ *topologysim.Desired) {
			require.Equal(t, templates.FlavorOpenStack, r.Flavor)
			require.Equal(t, []string{"OpenStackClusterTemplate", "OpenStackMachineTemplate"}, kindsOf(r.ClassObjects, templates.CAPOGroupVersion))
		}},
}

// kindsOf lists the kinds of the objects of one API group version, sorted.
func kindsOf(objs []*unstructured.Unstructured, apiVersion string) []string {
	var kinds []string
	for _, o := range objs {
		if o.GetAPIVersion() == apiVersion && !slices.Contains(kinds, o.GetKind()) {
			kinds = append(kinds, o.GetKind())
		}
	}
	slices.Sort(kinds)
	return kinds
}

func TestEveryImplementedLabelHasItsEffect(t *testing.T) {
	for _, tc := range []struct {
		flavor  templates.Flavor
		effects map[string]effectCase
		base    func() templates.Input
	}{
		{templates.FlavorOpenStack, openStackEffects, templatestest.BaseOpenStackInput},
		{templates.FlavorInMemory, inMemoryEffects, func() templates.Input { return templatestest.BaseInput(templates.FlavorInMemory) }},
	} {
		t.Run(string(tc.flavor), func(t *testing.T) {
			for _, s := range templates.Registry {
				if _, tested := tc.effects[s.Name]; (s.Addon || s.Autoscaler) && !tested {
					continue // internal/addons or internal/autoscaler renders and tests it
				}
				if s.Implemented(tc.flavor) {
					require.Contains(t, tc.effects, s.Name, "label %s is implemented for %s but its effect is not tested", s.Name, tc.flavor)
				}
			}
			for _, name := range sortedKeys(tc.effects) {
				c := tc.effects[name]
				t.Run(name, func(t *testing.T) {
					spec, ok := templates.LookupLabel(name)
					require.True(t, ok)
					require.True(t, spec.Implemented(tc.flavor), "%s is not implemented for %s", name, tc.flavor)
					in := tc.base()
					if c.mutate != nil {
						c.mutate(&in)
					}
					baseline := in
					in.Cluster.Labels = c.labels
					// The baseline has the other labels of the case, so the difference is this label's.
					baseline.Cluster.Labels = map[string]string{}
					for k, v := range c.labels {
						if k != name {
							baseline.Cluster.Labels[k] = v
						}
					}
					if c.baseline != nil {
						baseline.Cluster.Labels = c.baseline
					}
					r, d := renderFlavor(t, in)
					require.NotContains(t, r.Unimplemented, name)
					c.check(t, r, d)
					if !c.sameObjects {
						rb, db := renderFlavor(t, baseline)
						require.NotEqual(t, renderedText(t, rb, db), renderedText(t, r, d), "setting %s changes nothing", name)
					}
				})
			}
		})
	}
}

func renderFlavor(t *testing.T, in templates.Input) (*templates.Rendered, *topologysim.Desired) {
	t.Helper()
	if templates.SelectedFlavor(in.Cluster.Labels, in.Flavor) == templates.FlavorOpenStack {
		return renderAndPatch(t, in)
	}
	r, err := templates.Render(in)
	require.NoError(t, err)
	return r, nil
}

func renderedText(t *testing.T, r *templates.Rendered, d *topologysim.Desired) string {
	s := toYAML(t, append(append([]*unstructured.Unstructured{}, r.ClassObjects...), r.Cluster)...)
	if d != nil {
		s += toYAML(t, d.Objects()...)
	}
	return s + fmt.Sprint(r.ServerGroups)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// --- every implemented label refuses an invalid value, naming it ---------------------------------

var invalidValues = map[string][]string{
	// Autoscaler labels (internal/autoscaler renders them).
	"autoscaler_tag": {"v1 36"}, "autoscaler_expander": {"cheapest", ","}, "autoscaler_scale_down_enabled": {"maybe"},
	"autoscaler_scale_down_delay_after_add": {"-1m", "soon"}, "autoscaler_scale_down_unneeded_time": {"10"},
	"autoscaler_scale_down_utilization_percent": {"0", "101", "half"},
	// Add-on labels (internal/addons renders them; validated here like every label).
	"cloud_provider_tag": {"v1 35"}, "calico_tag": {"-v3"}, "cilium_tag": {"v1:15"}, "flannel_tag": {"v0/1"},
	"flannel_cni_tag": {"" + "bad tag"}, "calico_ipv4pool_ipip": {"Sometimes"}, "flannel_backend": {"wireguard"},
	"cinder_csi_enabled": {"maybe"}, "cinder_csi_plugin_tag": {"a b"}, "csi_attacher_tag": {"@"},
	"csi_provisioner_tag": {"@"}, "csi_snapshotter_tag": {"@"}, "csi_resizer_tag": {"@"},
	"csi_node_driver_registrar_tag": {"@"}, "csi_liveness_probe_tag": {"@"}, "csi_cinder_availability_zone": {"bad\nzone"},
	"csi_cinder_reclaim_policy": {"Recycle"}, "csi_cinder_volume_binding_mode": {"Later"}, "csi_cinder_fstype": {"ext4\x01"},
	"csi_cinder_allow_volume_expansion": {"maybe"}, "keystone_auth_enabled": {"maybe"}, "k8s_keystone_auth_tag": {"@"},
	"metrics_server_enabled": {"maybe"}, "cloud_provider_enabled": {"maybe"},
	"kube_tag":                         {"latest", "1.36", "v1.36.3-rc.1"},
	"container_infra_prefix":           {"Registry.Example.com/", "https://registry.example.com", "registry example"},
	"calico_ipv4pool":                  {"10.100.0.0", "10.100.0.1/16", "300.0.0.0/8"},
	"cilium_ipv4pool":                  {"not-a-cidr"},
	"flannel_network_cidr":             {"10.100.0.0/33"},
	"service_cluster_ip_range":         {"10.254.0.0"},
	"dns_cluster_domain":               {"Cluster_Local", "bad\nvalue"},
	"fixed_subnet_cidr":                {"10.0.0.5/24"},
	"extra_network_names":              {",,", "net\x01work"},
	"extra_network_name":               {","},
	"master_lb_floating_ip_enabled":    {"maybe"},
	"master_lb_allowed_cidrs":          {"192.0.2.1", "192.0.2.0/24,nope", ","},
	"api_master_lb_allowed_cidrs":      {"0.0.0.0/-1"},
	"octavia_provider":                 {"bad\nvalue"},
	"octavia_lb_algorithm":             {"RANDOM", "round_robin"},
	"api_server_floating_ip":           {"203.0.113.300", "example.com"},
	"api_server_lb_flavor":             {"bad\tvalue"},
	"api_server_lb_availability_zone":  {strings.Repeat("z", 256)},
	"availability_zone":                {"bad\nvalue"},
	"control_plane_availability_zones": {",", "az\x01"},
	"server_group_policies":            {"spread", "Anti-Affinity"},
	"boot_volume_size":                 {"-1", "20GB", "70000"},
	"boot_volume_type":                 {"bad\x00value"},
	"boot_volume_availability_zone":    {"bad\nvalue"},
	"admission_control_list":           {"PodSecurityPolicy", "NoSuchPlugin", "NodeRestriction,SecurityContextDeny"},
	"api_server_cert_sans":             {"bad_name", "exa mple.com", ","},
	"api_server_tls_cipher_suites":     {"TLS_FAKE_CIPHER", ","},
	"kubelet_tls_cipher_suites":        {"AES128-SHA"},
	"oidc_issuer_url":                  {"http://id.example.com", "https://user:pw@id.example.com", "id.example.com"},
	"oidc_client_id":                   {"bad\nvalue"},
	"oidc_username_claim":              {"bad\nvalue"},
	"oidc_username_prefix":             {"bad\nvalue"},
	"oidc_groups_claim":                {"bad\nvalue"},
	"oidc_groups_prefix":               {"bad\nvalue"},
	"audit_log_enabled":                {"yes please"},
	"audit_log_max_age":                {"-3", "thirty"},
	"audit_log_maxage":                 {"x"},
	"audit_log_max_backup":             {"-1"},
	"audit_log_maxbackup":              {"1.5"},
	"audit_log_max_size":               {"0"},
	"audit_log_maxsize":                {"0"},
	"auto_healing_enabled":             {"maybe"},
	"auto_scaling_enabled":             {"2"},
	"min_node_count":                   {"-1"},
	"max_node_count":                   {"many"},
	"inmemory_machine_startup":         {"forever", "-5s"},
	templates.LabelInfrastructure:      {"heat", "OpenStack", "docker"},
	"auto_healing_node_timeout":        {"soon", "10", "90000"},
}

// labelsFor adds what a label needs to be read at all (oidc_* need an issuer, audit_* need
// audit_log_enabled), so the invalid value is what fails.
func labelsFor(name, value string) map[string]string {
	l := map[string]string{name: value}
	if strings.HasPrefix(name, "oidc_") && name != "oidc_issuer_url" {
		l["oidc_issuer_url"] = "https://id.example.com"
	}
	if name == "oidc_issuer_url" {
		l["oidc_client_id"] = "kubernetes"
	}
	if strings.HasPrefix(name, "audit_log_") && name != "audit_log_enabled" {
		l["audit_log_enabled"] = "true"
	}
	return l
}

func TestInvalidLabelValuesAreRefusedByName(t *testing.T) {
	for _, s := range templates.Registry {
		if len(s.Flavors) > 0 {
			require.NotEmpty(t, invalidValues[s.Name], "label %s is implemented but no invalid value is tested", s.Name)
		}
	}
	for _, name := range sortedKeys(invalidValues) {
		spec, ok := templates.LookupLabel(name)
		require.True(t, ok, name)
		for _, flavor := range spec.Flavors {
			for _, v := range invalidValues[name] {
				t.Run(fmt.Sprintf("%s/%s/%q", flavor, name, v), func(t *testing.T) {
					in := templatestest.BaseOpenStackInput()
					if flavor == templates.FlavorInMemory {
						in = templatestest.BaseInput(flavor)
					}
					in.Cluster.Labels = labelsFor(name, v)
					_, err := templates.Render(in)
					var le *templates.LabelError
					require.True(t, errors.As(err, &le), "%s=%q: want a LabelError, got %v", name, v, err)
					require.Equal(t, name, le.Label)
					require.Contains(t, err.Error(), name)
				})
			}
		}
	}
}

// Rules between labels and the template: the error names the label to fix.
func TestOpenStackCrossChecks(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*templates.Input)
		label  string // "" for a plain (template) error
		substr string
	}{
		{"allowed CIDRs without a load balancer", func(in *templates.Input) {
			in.Template.MasterLBEnabled = false
			in.Cluster.Labels = map[string]string{"master_lb_allowed_cidrs": "10.0.0.0/8"}
		}, "master_lb_allowed_cidrs", "master_lb_enabled"},
		{"provider without a load balancer", func(in *templates.Input) {
			in.Template.MasterLBEnabled = false
			in.Cluster.Labels = map[string]string{"octavia_provider": "ovn"}
		}, "octavia_provider", "no master load balancer"},
		{"no floating IP and no load balancer (label)", func(in *templates.Input) {
			in.Template.MasterLBEnabled = false
			in.Cluster.Labels = map[string]string{"master_lb_floating_ip_enabled": "false"}
		}, "master_lb_floating_ip_enabled", "needs a floating IP"},
		{"no floating IP and no load balancer (template)", func(in *templates.Input) {
			in.Template.MasterLBEnabled, in.Template.FloatingIPEnabled = false, false
		}, "", "unreachable"},
		{"fixed floating IP while floating IPs are off", func(in *templates.Input) {
			in.Cluster.Labels = map[string]string{"master_lb_floating_ip_enabled": "false", "api_server_floating_ip": "203.0.113.1"}
		}, "api_server_floating_ip", "no floating IP"},
		{"OIDC client without issuer", func(in *templates.Input) {
			in.Cluster.Labels = map[string]string{"oidc_client_id": "k8s"}
		}, "oidc_client_id", "needs oidc_issuer_url"},
		{"OIDC issuer without client", func(in *templates.Input) {
			in.Cluster.Labels = map[string]string{"oidc_issuer_url": "https://id.example.com"}
		}, "oidc_client_id", "required"},
		{"admission plugin newer than the cluster", func(in *templates.Input) {
			in.Cluster.Labels = map[string]string{"kube_tag": "v1.32.5", "admission_control_list": "PodTopologyLabels"}
		}, "admission_control_list", "needs Kubernetes 1.33"},
		{"pods overlap services", func(in *templates.Input) {
			in.Cluster.Labels = map[string]string{"calico_ipv4pool": "10.0.0.0/8", "service_cluster_ip_range": "10.96.0.0/12"}
		}, "service_cluster_ip_range", "overlaps"},
		{"node subnet overlaps pods", func(in *templates.Input) {
			in.Cluster.Labels = map[string]string{"fixed_subnet_cidr": "10.100.5.0/24"}
		}, "fixed_subnet_cidr", "overlaps"},
		{"min above max", func(in *templates.Input) {
			in.Cluster.Labels = map[string]string{"min_node_count": "5", "max_node_count": "2"}
		}, "max_node_count", "smaller"},
		{"node group min above label max", func(in *templates.Input) {
			in.NodeGroups[1].MinNodeCount = 7
			in.Cluster.Labels = map[string]string{"max_node_count": "3"}
		}, "min_node_count", "above the maximum"},
		{"node group label invalid", func(in *templates.Input) {
			in.NodeGroups[1].Labels = map[string]string{"boot_volume_size": "huge"}
		}, "boot_volume_size", "node group default-worker"},
		{"node group local disk under a volume-booting cluster", func(in *templates.Input) {
			in.Cluster.Labels = map[string]string{"boot_volume_size": "20"}
			in.NodeGroups[1].Labels = map[string]string{"boot_volume_size": "0"}
		}, "boot_volume_size", "local disk"},
		{"restricted node label", func(in *templates.Input) {
			in.NodeGroups[1].NodeLabels = map[string]string{"node-role.kubernetes.io/worker": ""}
		}, "node_labels", `"node-role.kubernetes.io/worker=" for label node_labels: node group default-worker: kubelet may not set`},
		{"bad taint effect", func(in *templates.Input) {
			in.NodeGroups[1].NodeTaints = []templates.Taint{{Key: "a", Effect: "Sometimes"}}
		}, "node_taints", `"a:Sometimes" for label node_taints: node group default-worker: the effect "Sometimes"`},
		{"bad DNS server", func(in *templates.Input) { in.Template.DNSNameserver = "dns.example.com" }, "", "dns_nameserver"},
		{"bad proxy", func(in *templates.Input) { in.Template.HTTPProxy = "proxy:3128" }, "", "http_proxy"},
		{"fixed subnet without network", func(in *templates.Input) { in.Template.FixedSubnet = "sub" }, "", "fixed_network"},
		{"no image", func(in *templates.Input) { in.Template.ImageID = "" }, "", "no image"},
		{"no flavor", func(in *templates.Input) {
			in.Template.FlavorID, in.Template.MasterFlavorID = "", ""
		}, "", "flavor"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := templatestest.BaseOpenStackInput()
			c.mutate(&in)
			_, err := templates.Render(in)
			require.Error(t, err)
			require.ErrorContains(t, err, c.substr)
			var le *templates.LabelError
			if c.label == "" {
				require.False(t, errors.As(err, &le), "a template problem is not a label error: %v", err)
				return
			}
			require.True(t, errors.As(err, &le), "%v", err)
			require.Equal(t, c.label, le.Label)
		})
	}
}

func TestOpenStackReportsWhatItCannotHonour(t *testing.T) {
	in := templatestest.BaseOpenStackInput()
	in.Cluster.Labels = map[string]string{"octavia_lb_algorithm": "LEAST_CONNECTIONS", "etcd_tag": "v3.5.9", "monitoring_enabled": "false"}
	r, err := templates.Render(in)
	require.NoError(t, err)
	require.Equal(t, []string{"etcd_tag", "octavia_lb_algorithm"}, r.Unimplemented)
	in.Cluster.Labels = map[string]string{"octavia_provider": "ovn", "octavia_lb_algorithm": "SOURCE_IP_PORT"}
	r, err = templates.Render(in)
	require.NoError(t, err)
	require.Empty(t, r.Unimplemented)
}

func TestOpenStackReferencesByIDOrName(t *testing.T) {
	in := templatestest.BaseOpenStackInput()
	in.Template.ImageID = "5B4E1E58-1C5F-4A55-9B3C-0F6C9F0D2A11"
	in.Template.FlavorID = "7"
	in.Template.FixedNetwork = "private-net"
	r, d := renderAndPatch(t, in)
	require.Equal(t, map[string]any{"id": "5B4E1E58-1C5F-4A55-9B3C-0F6C9F0D2A11"}, field(t, d.ControlPlaneMachineTemplate, path(osmt, "image")...))
	w := worker(d, "default-worker").InfrastructureMachineTemplate
	require.Equal(t, "7", field(t, w, path(osmt, "flavorID")...))
	require.Nil(t, field(t, w, path(osmt, "flavor")...), "flavor and flavorID are exclusive")
	require.Equal(t, "m1.large", field(t, d.ControlPlaneMachineTemplate, path(osmt, "flavor")...))
	require.Equal(t, map[string]any{"filter": map[string]any{"name": "private-net"}}, field(t, d.InfrastructureCluster, "spec", "network"))
	require.Nil(t, field(t, d.InfrastructureCluster, "spec", "managedSubnets"))
	require.Equal(t, "ops-key", field(t, w, path(osmt, "sshKeyName")...))
	require.Equal(t, templates.CloudConfigSecretName(r.Cluster.GetName()), field(t, d.InfrastructureCluster, "spec", "identityRef", "name"))
	require.Equal(t, "k8s-demo-bd71db63-cloud-config", templates.CloudConfigSecretName("k8s-demo-bd71db63"))
}

func TestOpenStackNodeGroupOverrides(t *testing.T) {
	in := templatestest.OpenStackMatrix()["openstack-node-groups"]
	r, d := renderAndPatch(t, in)
	gpu := worker(d, "gpu-workers")
	require.Equal(t, "g1.xlarge", field(t, gpu.InfrastructureMachineTemplate, path(osmt, "flavor")...))
	require.Equal(t, "ubuntu-2404-kube-v1.36.3-nvidia", field(t, gpu.InfrastructureMachineTemplate, path(osmt, "image", "filter", "name")...))
	require.Equal(t, int64(100), field(t, gpu.InfrastructureMachineTemplate, path(osmt, "rootVolume", "sizeGiB")...))
	require.Equal(t, "ssd", field(t, gpu.InfrastructureMachineTemplate, path(osmt, "rootVolume", "type")...), "the cluster's volume type stays")
	require.Nil(t, field(t, gpu.InfrastructureMachineTemplate, path(osmt, "serverGroup")...), "policy none: no server group")
	require.Equal(t, "az-gpu", gpu.Object.Spec.Template.Spec.FailureDomain)
	require.Equal(t, "accelerator=nvidia,node.kubernetes.io/gpu=true", arg(t, gpu.BootstrapTemplate, workerArgs, "node-labels"))
	require.Equal(t, []any{map[string]any{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}},
		field(t, gpu.BootstrapTemplate, "spec", "template", "spec", "joinConfiguration", "nodeRegistration", "taints"))

	def := worker(d, "default-worker")
	require.Equal(t, "m1.medium", field(t, def.InfrastructureMachineTemplate, path(osmt, "flavor")...))
	require.Equal(t, int64(40), field(t, def.InfrastructureMachineTemplate, path(osmt, "rootVolume", "sizeGiB")...))
	require.Equal(t, "", arg(t, def.BootstrapTemplate, workerArgs, "node-labels"))
	require.Equal(t, "az-1", def.Object.Spec.Template.Spec.FailureDomain)
	require.Equal(t, "m1.large", field(t, d.ControlPlaneMachineTemplate, path(osmt, "flavor")...))

	require.Equal(t, []templates.ServerGroup{
		{Name: "k8s-demo-bd71db63-batch", Policy: "soft-affinity"},
		{Name: "k8s-demo-bd71db63-control-plane", Policy: "anti-affinity"},
		{Name: "k8s-demo-bd71db63-default-worker", Policy: "anti-affinity"},
	}, r.ServerGroups)
}

func TestOpenStackProxy(t *testing.T) {
	in := templatestest.OpenStackMatrix()["openstack-proxy-custom-network-no-healing"]
	_, d := renderAndPatch(t, in)
	for _, files := range []any{
		field(t, d.ControlPlane, "spec", "kubeadmConfigSpec", "files"),
		field(t, worker(d, "default-worker").BootstrapTemplate, "spec", "template", "spec", "files"),
	} {
		f := files.([]any)[0]
		require.Equal(t, "/etc/systemd/system/containerd.service.d/http-proxy.conf", dig(f, "path"))
		content := dig(f, "content").(string)
		require.Contains(t, content, `Environment="HTTP_PROXY=http://proxy.example.com:3128"`)
		require.Contains(t, content, `Environment="HTTPS_PROXY=http://proxy.example.com:3129"`)
		require.Contains(t, content, `NO_PROXY=localhost,127.0.0.1,.svc,.k8s.example,172.16.0.0/16,172.17.0.0/16,192.168.10.0/24,example.com,.internal"`)
	}
	require.Equal(t, []any{"systemctl daemon-reload", "systemctl restart containerd"},
		field(t, d.ControlPlane, "spec", "kubeadmConfigSpec", "preKubeadmCommands"))
	require.Equal(t, []any{"192.0.2.53", "192.0.2.54"}, dig(field(t, d.InfrastructureCluster, "spec", "managedSubnets").([]any)[0], "dnsNameservers"))
}

// The in-memory flavor renders availability_zone as the workers' failure domain too (Horizon sends
// "nova" on every create); its fake machines accept any zone.
func TestInMemoryAvailabilityZoneIsTheFailureDomain(t *testing.T) {
	in := templatestest.BaseInput(templates.FlavorInMemory)
	in.Cluster.Labels = map[string]string{"availability_zone": "nova"}
	r, err := templates.Render(in)
	require.NoError(t, err)
	require.Equal(t, "nova", mdTopology(t, r, "default-worker")["failureDomain"])
	require.Empty(t, r.Unimplemented)
}

// The operator decides which flavors tenants may choose; a refused or unknown value names the label
// and what this cloud offers.
func TestInfrastructureLabelHonoursTheOperatorsChoice(t *testing.T) {
	production := []templates.Flavor{templates.FlavorOpenStack}
	for _, tc := range []struct {
		name    string
		label   string
		allowed []templates.Flavor
		want    templates.Flavor
		refused string
	}{
		{name: "unset: the default", allowed: production, want: templates.FlavorOpenStack},
		{name: "openstack allowed", label: "openstack", allowed: production, want: templates.FlavorOpenStack},
		{name: "inmemory refused in production", label: "inmemory", allowed: production, refused: "this cloud does not offer it (offered: openstack)"},
		{name: "inmemory where both are offered", label: "inmemory", allowed: []templates.Flavor{templates.FlavorOpenStack, templates.FlavorInMemory}, want: templates.FlavorInMemory},
		{name: "unknown", label: "heat", allowed: production, refused: `want "openstack" or "inmemory"`},
		{name: "no list allows any", label: "inmemory", want: templates.FlavorInMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := templatestest.BaseOpenStackInput()
			in.AllowedFlavors = tc.allowed
			if tc.label != "" {
				in.Cluster.Labels = map[string]string{templates.LabelInfrastructure: tc.label}
			}
			r, err := templates.Render(in)
			if tc.refused != "" {
				var le *templates.LabelError
				require.ErrorAs(t, err, &le)
				require.Equal(t, templates.LabelInfrastructure, le.Label)
				require.Contains(t, le.Reason, tc.refused)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, r.Flavor)
		})
	}
}
