// Package templatestest holds the inputs the rendering is tested with, shared by the golden tests of
// internal/templates and the server-side dry run against real CAPO CRDs and webhooks in test/capo.
package templatestest

import (
	"sort"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// Namespace is the namespace the inputs render into (tests that apply objects replace it).
const Namespace = "magnum-0123456789abcdef0123456789abcdef"

// BaseInput is a one-control-plane, two-worker cluster of a template with an image named after its
// Kubernetes version, as Magnum stores it.
func BaseInput(flavor templates.Flavor) templates.Input {
	return templates.Input{
		Flavor:    flavor,
		Namespace: Namespace,
		Template: templates.Template{UUID: "d7c6cbe4-3a63-447f-88de-1ab09044b177", Name: "k8s", ImageID: "ubuntu-2404-kube-v1.36.3",
			FlavorID: "m1.medium", ExternalNetworkID: "public"},
		Cluster: templates.Cluster{UUID: "bd71db63-28f3-4ac5-8e6e-d51a6470e5ff", Name: "k8s-demo", ProjectID: "0123456789abcdef0123456789abcdef",
			Labels: map[string]string{}},
		NodeGroups: []templates.NodeGroup{
			{UUID: "11111111-1111-1111-1111-111111111111", Name: "default-master", Role: "master", NodeCount: 1, IsDefault: true},
			{UUID: "22222222-2222-2222-2222-222222222222", Name: "default-worker", Role: "worker", NodeCount: 2, IsDefault: true},
		},
		DefaultKubernetesVersion: "v1.36.3",
	}
}

// BaseOpenStackInput is BaseInput for CAPO with what a typical production template sets: a master
// load balancer, floating IPs, a keypair, separate master and worker flavors and a DNS server.
func BaseOpenStackInput() templates.Input {
	in := BaseInput(templates.FlavorOpenStack)
	in.Template.MasterFlavorID = "m1.large"
	in.Template.KeypairID = "ops-key"
	in.Template.MasterLBEnabled = true
	in.Template.FloatingIPEnabled = true
	in.Template.DNSNameserver = "8.8.8.8"
	in.Template.NetworkDriver = "calico"
	return in
}

func intp(n int) *int { return &n }

// OpenStackMatrix is the set of OpenStack-flavor inputs covering every implemented label group,
// keyed by a name usable as a file name.
func OpenStackMatrix() map[string]templates.Input {
	m := map[string]templates.Input{}

	m["openstack-default"] = BaseOpenStackInput()

	ids := BaseOpenStackInput()
	ids.Template.ImageID = "5b4e1e58-1c5f-4a55-9b3c-0f6c9f0d2a11"
	ids.Template.FlavorID = "42"
	ids.Template.MasterFlavorID = "0f3c0a8e-5a0c-4a4c-8d3e-5f1b2a3c4d5e"
	ids.Template.ExternalNetworkID = "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	ids.Template.FixedNetwork = "3c2b1a0f-9e8d-4c7b-a6f5-e4d3c2b1a0f9"
	ids.Template.FixedSubnet = "6e5d4c3b-2a19-4f8e-b7d6-c5b4a3928170"
	ids.Template.MasterLBEnabled = false
	ids.Cluster.Labels = map[string]string{templates.LabelKubeTag: "v1.35.4"}
	ids.NodeGroups[0].NodeCount = 3
	m["openstack-ids-fixed-network-no-lb"] = ids

	lb := BaseOpenStackInput()
	lb.Cluster.Labels = map[string]string{
		templates.LabelMasterLBAllowedCIDRs: "192.0.2.0/24, 198.51.100.0/24", templates.LabelOctaviaProvider: "ovn",
		templates.LabelOctaviaLBAlgorithm: "SOURCE_IP_PORT", templates.LabelAPIServerLBFlavor: "lb.small",
		templates.LabelAPIServerLBAvailabilityZone: "az-lb", templates.LabelAPIServerFloatingIP: "203.0.113.10",
	}
	m["openstack-load-balancer"] = lb

	private := BaseOpenStackInput()
	private.Cluster.Labels = map[string]string{templates.LabelMasterLBFloatingIPEnabled: "false", templates.LabelAPIMasterLBAllowedCIDRs: "10.0.0.0/8"}
	m["openstack-private-api"] = private

	sec := BaseOpenStackInput()
	sec.Cluster.Labels = map[string]string{
		templates.LabelOIDCIssuerURL: "https://id.example.com/realms/k8s", templates.LabelOIDCClientID: "kubernetes",
		templates.LabelOIDCUsernameClaim: "email", templates.LabelOIDCUsernamePrefix: "oidc:", templates.LabelOIDCGroupsClaim: "groups", templates.LabelOIDCGroupsPrefix: "oidc:",
		templates.LabelAuditLogEnabled: "true", templates.LabelAuditLogMaxage: "7", templates.LabelAuditLogMaxBackup: "3", templates.LabelAuditLogMaxSize: "50",
		templates.LabelAdmissionControlList:     "AlwaysPullImages,PodSecurity,NodeRestriction",
		templates.LabelAPIServerTLSCipherSuites: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
		templates.LabelKubeletTLSCipherSuites:   "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
		templates.LabelAPIServerCertSANs:        "k8s.example.com, 203.0.113.7",
		templates.LabelContainerInfraPrefix:     "registry.example.com:5000/mirror/",
	}
	m["openstack-security"] = sec

	ng := BaseOpenStackInput()
	ng.Cluster.Labels = map[string]string{
		templates.LabelBootVolumeSize: "40", templates.LabelBootVolumeType: "ssd", templates.LabelBootVolumeAvailabilityZone: "az-vol",
		templates.LabelAvailabilityZone: "az-1", templates.LabelControlPlaneAvailabilityZones: "az-1,az-2,az-3",
		templates.LabelExtraNetworkNames:  "storage-net 9d8c7b6a-5f4e-4d3c-b2a1-0f9e8d7c6b5a",
		templates.LabelAutoScalingEnabled: "true", templates.LabelServerGroupPolicies: "anti-affinity",
	}
	ng.NodeGroups[1].MaxNodeCount = intp(5)
	ng.NodeGroups[1].MinNodeCount = 1
	ng.NodeGroups = append(ng.NodeGroups,
		templates.NodeGroup{UUID: "33333333-3333-3333-3333-333333333333", Name: "GPU Workers", Role: "worker", NodeCount: 1,
			FlavorID: "g1.xlarge", ImageID: "ubuntu-2404-kube-v1.36.3-nvidia",
			Labels:     map[string]string{templates.LabelAvailabilityZone: "az-gpu", templates.LabelBootVolumeSize: "100", templates.LabelServerGroupPolicies: "none"},
			NodeLabels: map[string]string{"accelerator": "nvidia", "node.kubernetes.io/gpu": "true"},
			NodeTaints: []templates.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}}},
		templates.NodeGroup{UUID: "44444444-4444-4444-4444-444444444444", Name: "batch", Role: "worker", NodeCount: 2,
			Labels: map[string]string{templates.LabelServerGroupPolicies: "soft-affinity"}},
	)
	m["openstack-node-groups"] = ng

	proxy := BaseOpenStackInput()
	proxy.Template.NetworkDriver = "cilium"
	proxy.Template.HTTPProxy = "http://proxy.example.com:3128"
	proxy.Template.HTTPSProxy = "http://proxy.example.com:3129"
	proxy.Template.NoProxy = "example.com,.internal"
	proxy.Template.DNSNameserver = "192.0.2.53, 192.0.2.54"
	proxy.Cluster.Labels = map[string]string{
		templates.LabelAutoHealingEnabled: "false", templates.LabelCiliumIPv4Pool: "172.16.0.0/16", templates.LabelServiceClusterIPRange: "172.17.0.0/16",
		templates.LabelDNSClusterDomain: "k8s.example", templates.LabelFixedSubnetCIDR: "192.168.10.0/24",
		// Labels the bridge reports as not implemented must not stop a rendering.
		templates.LabelCinderCSIEnabled: "true", templates.LabelMonitoringEnabled: "false", "cern_enabled": "true",
	}
	m["openstack-proxy-custom-network-no-healing"] = proxy
	return m
}

// SortedNames returns the keys of a matrix in order.
func SortedNames(m map[string]templates.Input) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
