package templates

// Label groups, in the order docs/labels.md lists them.
const (
	GroupVersion    = "Kubernetes version and images"
	GroupNetwork    = "Cluster network"
	GroupAPI        = "API server and its load balancer"
	GroupPlacement  = "Machines and placement"
	GroupStorage    = "Storage"
	GroupComponents = "Kubernetes component settings"
	GroupSecurity   = "Security: TLS, OIDC, audit"
	GroupHealing    = "Auto-healing and autoscaling"
	GroupAddons     = "Add-ons"
	GroupLegacy     = "Heat driver internals"
	GroupBridge     = "Bridge-only"
)

// LabelGroups is the order of the groups in the documentation.
var LabelGroups = []string{GroupVersion, GroupNetwork, GroupAPI, GroupPlacement, GroupStorage,
	GroupComponents, GroupSecurity, GroupHealing, GroupAddons, GroupLegacy, GroupBridge}

var (
	allFlavors = []Flavor{FlavorInMemory, FlavorOpenStack}
	onlyCAPO   = []Flavor{FlavorOpenStack}

	aHeat    = []Anchor{AnchorHeat}
	aVex     = []Anchor{AnchorVexxhost}
	aHelm    = []Anchor{AnchorCAPIHelm}
	aHeatVex = []Anchor{AnchorHeat, AnchorVexxhost}
	aAll     = []Anchor{AnchorHeat, AnchorVexxhost, AnchorCAPIHelm}
	aHeatHlm = []Anchor{AnchorHeat, AnchorCAPIHelm}
)

func intp(n int) *int { return &n }

// octaviaAlgorithms are the pool algorithms Octavia accepts.
var octaviaAlgorithms = []string{"ROUND_ROBIN", "LEAST_CONNECTIONS", "SOURCE_IP", "SOURCE_IP_PORT"}

// AutoscalerExpanders are the cluster autoscaler's expanders (--expander), for autoscaler_expander.
var AutoscalerExpanders = []string{"least-waste", "random", "most-pods", "least-nodes", "price", "priority"}

// serverGroupPolicies are the Nova server group policies (microversion 2.64+).
var serverGroupPolicies = []string{"soft-anti-affinity", "anti-affinity", "soft-affinity", "affinity", "none"}

// Registry is every label the three anchors accept (Magnum's Heat driver, vexxhost's
// magnum-cluster-api and magnum-capi-helm) plus the bridge's own. A label whose Flavors do not
// include the cluster's flavor is reported back to the tenant as not implemented, never silently
// dropped; labels that are not registered at all are reported the same way.
var Registry = []LabelSpec{
	// --- Kubernetes version and images ---------------------------------------------------------
	{Name: LabelKubeTag, Group: GroupVersion, Type: LabelVersion, Anchors: aHeatVex, Flavors: allFlavors,
		Description: "Kubernetes version of the cluster, e.g. v1.36.3.",
		Effect: "Cluster `spec.topology.version`. Default: the version in the image name (…-kube-vX.Y.Z), else the bridge's configured default. Both the in-memory and the OpenStack flavor. " +
			"Checked before anything is written (create, and upgrade to a new template): the version must equal the image's own (Glance property kube_version, else the version in the image's name) unless the operator sets `[bridge] allow_kube_tag_image_mismatch`, " +
			"and lie in the range the bridge supports: Cluster API v1.14's workload versions (" + CAPIKubernetesVersions.Oldest() + " to " + CAPIKubernetesVersions.Newest() +
			") narrowed to the add-on table's (internal/addons); the discovery document's kubernetes_versions lists what is accepted. A refused create is CREATE_FAILED at once, naming kube_tag, the image and the range."},
	{Name: LabelContainerInfraPrefix, Group: GroupVersion, Type: LabelRegistry, Anchors: aHeatVex, Flavors: allFlavors, Addon: true, NodeGroup: false,
		Description: "Registry (and path) every image of the cluster is pulled from, for air-gapped or mirrored clouds.",
		Effect:      "Variable `imageRepository` → KubeadmControlPlane `clusterConfiguration.imageRepository` (kube-apiserver, controller-manager, scheduler, etcd, CoreDNS, kube-proxy images); a trailing / is dropped. Default: kubeadm's registry.k8s.io. Also every add-on image becomes <prefix>/<name>:<tag> (internal/addons, delivered by the cluster's ClusterResourceSet); on the in-memory flavor only that."},
	{Name: LabelHyperkubePrefix, Group: GroupVersion, Type: LabelRegistry, Anchors: aHeat,
		Description: "Registry of the hyperkube image (Heat only; CAPI images have no hyperkube)."},
	{Name: LabelKubeImageDigest, Group: GroupVersion, Type: LabelString, Anchors: aHeat,
		Description: "Digest pinning the Heat driver's Kubernetes image."},
	{Name: LabelEtcdTag, Group: GroupVersion, Type: LabelImageTag, Anchors: aHeat,
		Description: "etcd image tag. With kubeadm the etcd version follows the Kubernetes version."},
	{Name: LabelCorednsTag, Group: GroupVersion, Type: LabelImageTag, Anchors: aHeat,
		Description: "CoreDNS image tag. With kubeadm the CoreDNS version follows the Kubernetes version."},
	{Name: LabelCloudProviderTag, Group: GroupVersion, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeatVex,
		Description: "OpenStack cloud-controller-manager image tag (default: derived from the Kubernetes minor).",
		Effect:      "Image tag of the OpenStack cloud-controller-manager add-on (internal/addons, delivered by the cluster's ClusterResourceSet); default: the cloud-provider-openstack release of the Kubernetes minor."},
	{Name: LabelHeatContainerAgentTag, Group: GroupVersion, Type: LabelImageTag, Anchors: aHeat,
		Description: "Heat container agent image tag (Heat only)."},
	{Name: LabelCAPIHelmChartVersion, Group: GroupVersion, Type: LabelString, Anchors: aHelm,
		Description: "Version of the openstack-cluster Helm chart (magnum-capi-helm only; the bridge renders no chart)."},

	// --- Cluster network ---------------------------------------------------------------------------
	{Name: LabelCalicoIPv4Pool, Group: GroupNetwork, Type: LabelCIDR, Default: defaultPodCIDR, Anchors: aHeatVex, Flavors: allFlavors,
		Description: "Pod network CIDR when the template's network_driver is calico.",
		Effect:      "Cluster `spec.clusterNetwork.pods.cidrBlocks` when network_driver is calico (or unset). Must not overlap the service range or the node subnet."},
	{Name: LabelCiliumIPv4Pool, Group: GroupNetwork, Type: LabelCIDR, Default: defaultPodCIDR, Anchors: aVex, Flavors: allFlavors,
		Description: "Pod network CIDR when the template's network_driver is cilium.",
		Effect:      "Cluster `spec.clusterNetwork.pods.cidrBlocks` when network_driver is cilium."},
	{Name: LabelFlannelNetworkCIDR, Group: GroupNetwork, Type: LabelCIDR, Default: defaultPodCIDR, Anchors: aHeat, Flavors: allFlavors,
		Description: "Pod network CIDR when the template's network_driver is flannel.",
		Effect:      "Cluster `spec.clusterNetwork.pods.cidrBlocks` when network_driver is flannel."},
	{Name: LabelServiceClusterIPRange, Group: GroupNetwork, Type: LabelCIDR, Default: defaultServiceCIDR, Anchors: aHeatVex, Flavors: allFlavors,
		Description: "Service (ClusterIP) CIDR.",
		Effect:      "Cluster `spec.clusterNetwork.services.cidrBlocks`."},
	{Name: LabelDNSClusterDomain, Group: GroupNetwork, Type: LabelString, Default: defaultServiceDomain, Anchors: aVex, Flavors: allFlavors,
		Description: "DNS domain of the cluster's services.",
		Effect:      "Cluster `spec.clusterNetwork.serviceDomain` (must be a DNS name)."},
	{Name: LabelFixedSubnetCIDR, Group: GroupNetwork, Type: LabelCIDR, Default: defaultNodeCIDR, Anchors: aAll, Flavors: onlyCAPO,
		Description: "CIDR of the node subnet when the driver creates the network (no fixed_network in the template).",
		Effect:      "Variable `managedSubnets[0].cidr` → OpenStackCluster `managedSubnets` (CAPO creates network, subnet and router). Ignored when the template names a fixed_network."},
	{Name: LabelExtraNetworkNames, Group: GroupNetwork, Type: LabelNameList, Anchors: aHelm, Flavors: onlyCAPO,
		Description: "Additional Neutron networks (names or IDs) every node gets a port on.",
		Effect:      "Variable `ports` → OpenStackMachineTemplate `ports`: the cluster network first, then one port per network (by ID when it is a UUID, else by name). Comma-separated (spaces also separate, as in magnum-capi-helm)."},
	{Name: LabelExtraNetworkName, Group: GroupNetwork, Type: LabelNameList, Anchors: aHelm, Flavors: onlyCAPO, AliasOf: "extra_network_names",
		Description: "Deprecated spelling of extra_network_names.", Effect: "Same as extra_network_names."},
	{Name: LabelCalicoIPv4PoolIPIP, Group: GroupNetwork, Type: LabelEnum, Default: "Off", Enum: []string{"Always", "CrossSubnet", "Never", "Off"}, Flavors: allFlavors, Addon: true, Anchors: aHeat,
		Description: "Calico IP-in-IP mode.",
		Effect:      "calico-node `CALICO_IPV4POOL_IPIP` (Off means Never) when network_driver is calico."},
	{Name: LabelCalicoTag, Group: GroupNetwork, Type: LabelImageTag, Default: "v3.32.1", Flavors: allFlavors, Addon: true, Anchors: aHeatVex,
		Description: "Calico version (CNI add-on).",
		Effect:      "Image tag of calico-node, calico/cni and calico-kube-controllers when network_driver is calico (or unset) (internal/addons, delivered by the cluster's ClusterResourceSet)."},
	{Name: LabelCiliumTag, Group: GroupNetwork, Type: LabelImageTag, Default: "v1.15.3", Flavors: allFlavors, Addon: true, Anchors: aVex,
		Description: "Cilium version (CNI add-on).",
		Effect:      "Image tag of the cilium agent and operator when network_driver is cilium (internal/addons, delivered by the cluster's ClusterResourceSet)."},
	{Name: LabelCiliumHubbleUIEnabled, Group: GroupNetwork, Type: LabelBool, Default: "false", Anchors: aVex, Honored: []string{"false"},
		Description: "Deploy Hubble relay and UI with Cilium."},
	{Name: LabelFlannelBackend, Group: GroupNetwork, Type: LabelEnum, Default: "vxlan", Enum: []string{"udp", "vxlan", "host-gw"}, Flavors: allFlavors, Addon: true, Anchors: aHeat,
		Description: "Flannel backend.",
		Effect:      "flannel `net-conf.json` Backend.Type when network_driver is flannel (internal/addons, delivered by the cluster's ClusterResourceSet)."},
	{Name: LabelFlannelNetworkSubnetlen, Group: GroupNetwork, Type: LabelInt, Default: "24", Anchors: aHeat,
		Description: "Size of each node's flannel subnet."},
	{Name: LabelFlannelTag, Group: GroupNetwork, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeat, Description: "Flannel image tag.",
		Effect: "Image tag of flannel when network_driver is flannel (default: the add-on table) (internal/addons, delivered by the cluster's ClusterResourceSet)."},
	{Name: LabelFlannelCNITag, Group: GroupNetwork, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeat, Description: "Flannel CNI image tag.",
		Effect: "Image tag of the flannel CNI plugin when network_driver is flannel (internal/addons, delivered by the cluster's ClusterResourceSet)."},

	// --- API server and its load balancer --------------------------------------------------------
	{Name: LabelMasterLBFloatingIPEnabled, Group: GroupAPI, Type: LabelBool, Anchors: aAll, Flavors: onlyCAPO,
		Description: "Give the API load balancer (or, without one, the control-plane machine) a floating IP.",
		Effect:      "Variable `disableAPIServerFloatingIP` (its negation) → OpenStackCluster `disableAPIServerFloatingIP`. Default: the template's floating_ip_enabled. Without a master load balancer it cannot be false (CAPO would need a pre-allocated VIP)."},
	{Name: LabelMasterLBAllowedCIDRs, Group: GroupAPI, Type: LabelCIDRList, Anchors: aHeat, Flavors: onlyCAPO,
		Description: "CIDRs allowed to reach the API load balancer (default: everyone).",
		Effect:      "Variable `apiServerLoadBalancer.allowedCIDRs` → OpenStackCluster `apiServerLoadBalancer.allowedCIDRs`. Needs master_lb_enabled in the template."},
	{Name: LabelAPIMasterLBAllowedCIDRs, Group: GroupAPI, Type: LabelCIDRList, Anchors: aHelm, Flavors: onlyCAPO, AliasOf: "master_lb_allowed_cidrs",
		Description: "magnum-capi-helm's spelling of master_lb_allowed_cidrs.", Effect: "Same as master_lb_allowed_cidrs."},
	{Name: LabelOctaviaProvider, Group: GroupAPI, Type: LabelString, Anchors: aAll, Flavors: onlyCAPO,
		Description: "Octavia provider of the load balancers (amphora, amphorav2, ovn, …).",
		Effect:      "Variable `apiServerLoadBalancer.provider` → OpenStackCluster `apiServerLoadBalancer.provider`. Default: Octavia's default provider."},
	{Name: LabelOctaviaLBAlgorithm, Group: GroupAPI, Type: LabelEnum, Enum: octaviaAlgorithms, Anchors: aAll, Flavors: onlyCAPO,
		Description: "Pool algorithm of the load balancers.",
		Effect:      "Validated; CAPO always uses SOURCE_IP_PORT with the ovn provider and ROUND_ROBIN otherwise, so that value is honoured and any other is reported as not implemented."},
	{Name: LabelOctaviaLBHealthcheck, Group: GroupAPI, Type: LabelBool, Default: "true", Anchors: aAll, Honored: []string{"true"},
		Description: "Create health monitors on the load balancers (CAPO always monitors the API load balancer, so only true is honoured)."},
	{Name: LabelAPIServerFloatingIP, Group: GroupAPI, Type: LabelIP, Anchors: aVex, Flavors: onlyCAPO,
		Description: "A specific (pre-allocated or to be created) floating IP for the API server.",
		Effect:      "Variable `apiServerFloatingIP` → OpenStackCluster `apiServerFloatingIP`."},
	{Name: LabelAPIServerLBFlavor, Group: GroupAPI, Type: LabelString, Anchors: aVex, Flavors: onlyCAPO,
		Description: "Octavia flavor of the API load balancer.",
		Effect:      "Variable `apiServerLoadBalancer.flavor` → OpenStackCluster `apiServerLoadBalancer.flavor`."},
	{Name: LabelAPIServerLBAvailabilityZone, Group: GroupAPI, Type: LabelString, Anchors: aVex, Flavors: onlyCAPO,
		Description: "Octavia availability zone of the API load balancer.",
		Effect:      "Variable `apiServerLoadBalancer.availabilityZone` → OpenStackCluster `apiServerLoadBalancer.availabilityZone`."},

	// --- Machines and placement --------------------------------------------------------------------
	// Horizon's Create Cluster dialog always sends the zone picked from Nova's list: on a backend
	// without zones, Nova's default zone "nova" asks for what happens anyway. The
	// in-memory flavor still renders it as the workers' failure domain (its machines accept any).
	{Name: LabelAvailabilityZone, Group: GroupPlacement, Type: LabelString, Anchors: aHeatVex, Flavors: onlyCAPO, NodeGroup: true,
		Honored:     []string{"nova"},
		Description: "Nova availability zone of the nodes.",
		Effect:      "Worker MachineDeployment `failureDomain` (CAPO's availability zone), per node group when the group's labels set it; also the control plane's zone when control_plane_availability_zones is not set."},
	{Name: LabelControlPlaneAvailabilityZones, Group: GroupPlacement, Type: LabelNameList, Anchors: aVex, Flavors: onlyCAPO,
		Description: "Availability zones the control-plane machines are spread over.",
		Effect:      "Variable `controlPlaneAvailabilityZones` → OpenStackCluster `controlPlaneAvailabilityZones` (CAPI spreads control-plane machines over them)."},
	{Name: LabelServerGroupPolicies, Group: GroupPlacement, Type: LabelEnum, Default: "soft-anti-affinity", Enum: serverGroupPolicies, Anchors: aVex, Flavors: onlyCAPO, NodeGroup: true,
		Description: "Nova server group policy of the control plane and of each node group.",
		Effect:      "Variable `serverGroup` (control-plane and per-node-group overrides) → OpenStackMachineTemplate `serverGroup` by name `<cluster>-<group>`; Rendered.ServerGroups lists the groups (name, policy) the bridge must create in Nova before applying. `none`: no server group."},
	{Name: LabelDifferentFailureDomain, Group: GroupPlacement, Type: LabelBool, Default: "false", Anchors: aVex, Honored: []string{"false"},
		Description: "Nova scheduler hint for vexxhost's own scheduler filter."},

	// --- Storage -------------------------------------------------------------------------------------
	{Name: LabelBootVolumeSize, Group: GroupStorage, Type: LabelInt, Default: "0", Max: intp(65536), Anchors: aAll, Flavors: onlyCAPO, NodeGroup: true,
		Description: "Boot from a Cinder volume of this many GiB (0: boot from the flavor's local disk).",
		Effect:      "Variable `rootVolume.sizeGiB` (cluster, per-node-group override) → OpenStackMachineTemplate `rootVolume`."},
	{Name: LabelBootVolumeType, Group: GroupStorage, Type: LabelString, Anchors: aAll, Flavors: onlyCAPO, NodeGroup: true,
		Description: "Cinder volume type of the boot volume (default: Cinder's default type).",
		Effect:      "Variable `rootVolume.type` → OpenStackMachineTemplate `rootVolume.type` (only with boot_volume_size > 0)."},
	{Name: LabelBootVolumeAvailabilityZone, Group: GroupStorage, Type: LabelString, Anchors: aVex, Flavors: onlyCAPO,
		Description: "Cinder availability zone of the boot volume (default: none, Cinder decides).",
		Effect:      "Variable `rootVolume.availabilityZone` → OpenStackMachineTemplate `rootVolume.availabilityZone` {from: Name} (only with boot_volume_size > 0)."},
	{Name: LabelEtcdVolumeSize, Group: GroupStorage, Type: LabelInt, Default: "0", Anchors: aAll,
		Description: "Dedicated Cinder volume for etcd, in GiB (0: etcd on the root disk)."},
	{Name: LabelEtcdVolumeType, Group: GroupStorage, Type: LabelString, Anchors: aAll, Description: "Cinder volume type of the etcd volume."},
	{Name: LabelEtcdBlockdeviceSize, Group: GroupStorage, Type: LabelInt, Default: "0", Anchors: aHelm, Description: "magnum-capi-helm's etcd block device size in GiB."},
	{Name: LabelEtcdBlockdeviceType, Group: GroupStorage, Type: LabelEnum, Default: "volume", Enum: []string{"volume", "local"}, Anchors: aHelm, Description: "etcd block device kind: Cinder volume or ephemeral disk."},
	{Name: LabelEtcdBlockdeviceVolumeType, Group: GroupStorage, Type: LabelString, Anchors: aHelm, Description: "Cinder type of the etcd block device."},
	{Name: LabelEtcdBlockdeviceVolumeAZ, Group: GroupStorage, Type: LabelString, Anchors: aHelm, Description: "Availability zone of the etcd block device."},
	{Name: LabelDockerVolumeType, Group: GroupStorage, Type: LabelString, Anchors: aHeatVex, Description: "Cinder type of the container runtime volume (size from the template's docker_volume_size)."},
	{Name: LabelCinderCSIEnabled, Group: GroupStorage, Type: LabelBool, Default: "true", Flavors: allFlavors, Addon: true, Anchors: aHeatVex,
		Description: "Install the Cinder CSI driver and StorageClasses (add-on, not installed by the bridge).",
		Effect:      "Cinder CSI add-on (controller Deployment, node DaemonSet, CSIDriver, default StorageClass `cinder`) (internal/addons, delivered by the cluster's ClusterResourceSet); needs the cluster's workload credential."},
	{Name: LabelCinderCSIPluginTag, Group: GroupStorage, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeatVex, Description: "Cinder CSI image tag.",
		Effect: "Image tag of cinder-csi-plugin (default: the cloud-provider-openstack release of the Kubernetes minor)."},
	{Name: LabelManilaCSIEnabled, Group: GroupStorage, Type: LabelBool, Default: "true", Anchors: aVex, Honored: []string{"false"}, Description: "Install the Manila CSI driver."},
	{Name: LabelManilaCSIPluginTag, Group: GroupStorage, Type: LabelImageTag, Anchors: aVex, Description: "Manila CSI image tag."},
	{Name: LabelManilaCSIShareNetworkID, Group: GroupStorage, Type: LabelString, Anchors: aVex, Description: "Share network of the Manila StorageClasses."},
	{Name: LabelCSIAttacherTag, Group: GroupStorage, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeatVex, Description: "CSI attacher sidecar tag.",
		Effect: "Image tag of the csi-attacher sidecar of the Cinder CSI add-on (default: the add-on table)."},
	{Name: LabelCSIProvisionerTag, Group: GroupStorage, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeatVex, Description: "CSI provisioner sidecar tag.",
		Effect: "Image tag of the csi-provisioner sidecar of the Cinder CSI add-on (default: the add-on table)."},
	{Name: LabelCSISnapshotterTag, Group: GroupStorage, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeatVex, Description: "CSI snapshotter sidecar tag.",
		Effect: "Image tag of the csi-snapshotter sidecar of the Cinder CSI add-on (default: the add-on table)."},
	{Name: LabelCSIResizerTag, Group: GroupStorage, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeatVex, Description: "CSI resizer sidecar tag.",
		Effect: "Image tag of the csi-resizer sidecar of the Cinder CSI add-on (default: the add-on table)."},
	{Name: LabelCSINodeDriverRegistrarTag, Group: GroupStorage, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeatVex, Description: "CSI node driver registrar sidecar tag.",
		Effect: "Image tag of the csi-node-driver-registrar sidecar of the Cinder CSI add-on (default: the add-on table)."},
	{Name: LabelCSILivenessProbeTag, Group: GroupStorage, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeatVex, Description: "CSI liveness probe sidecar tag.",
		Effect: "Image tag of the livenessprobe sidecar of the Cinder CSI add-on (default: the add-on table)."},
	{Name: LabelCSICinderAvailabilityZone, Group: GroupStorage, Type: LabelString, Default: "nova", Flavors: allFlavors, Addon: true, Anchors: aHelm, Description: "Availability zone of the Cinder StorageClass.",
		Effect: "StorageClass `cinder` parameter `availability` (only when set; the registry default is not applied)."},
	{Name: LabelCSICinderReclaimPolicy, Group: GroupStorage, Type: LabelEnum, Default: "Retain", Enum: []string{"Retain", "Delete"}, Flavors: allFlavors, Addon: true, Anchors: aHelm, Description: "Reclaim policy of the Cinder StorageClass.",
		Effect: "StorageClass `cinder` `reclaimPolicy`."},
	{Name: LabelCSICinderVolumeBindingMode, Group: GroupStorage, Type: LabelEnum, Default: "WaitForFirstConsumer", Enum: []string{"WaitForFirstConsumer", "Immediate"}, Flavors: allFlavors, Addon: true, Anchors: aHelm, Description: "Volume binding mode of the Cinder StorageClass.",
		Effect: "StorageClass `cinder` `volumeBindingMode`."},
	{Name: LabelCSICinderFstype, Group: GroupStorage, Type: LabelString, Default: "ext4", Flavors: allFlavors, Addon: true, Anchors: aHelm, Description: "Filesystem of Cinder volumes.",
		Effect: "StorageClass `cinder` parameter `csi.storage.k8s.io/fstype`."},
	{Name: LabelCSICinderAllowVolumeExpansion, Group: GroupStorage, Type: LabelBool, Default: "true", Flavors: allFlavors, Addon: true, Anchors: aHelm, Description: "Allow expanding Cinder volumes.",
		Effect: "StorageClass `cinder` `allowVolumeExpansion`."},

	// --- Kubernetes component settings --------------------------------------------------------------
	{Name: LabelAdmissionControlList, Group: GroupComponents, Type: LabelAdmissionPlugins, Anchors: aHeatVex, Flavors: onlyCAPO,
		Description: "Admission plugins kube-apiserver enables in addition to its defaults.",
		Effect:      "Variable `enableAdmissionPlugins` → kube-apiserver `enable-admission-plugins=NodeRestriction,<list>`. Removed plugins (PodSecurityPolicy, …) and plugins the cluster's Kubernetes version lacks are refused."},
	{Name: LabelKubeletOptions, Group: GroupComponents, Type: LabelFlags, Anchors: aHeat, Description: "Extra kubelet flags (Heat only)."},
	{Name: LabelKubeapiOptions, Group: GroupComponents, Type: LabelFlags, Anchors: aHeat, Description: "Extra kube-apiserver flags (Heat only)."},
	{Name: LabelKubecontrollerOptions, Group: GroupComponents, Type: LabelFlags, Anchors: aHeat, Description: "Extra kube-controller-manager flags (Heat only)."},
	{Name: LabelKubeschedulerOptions, Group: GroupComponents, Type: LabelFlags, Anchors: aHeat, Description: "Extra kube-scheduler flags (Heat only)."},
	{Name: LabelKubeproxyOptions, Group: GroupComponents, Type: LabelFlags, Anchors: aHeat, Description: "Extra kube-proxy flags (Heat only)."},
	{Name: LabelCgroupDriver, Group: GroupComponents, Type: LabelEnum, Default: "systemd", Enum: []string{"systemd", "cgroupfs"}, Anchors: aHeat, Honored: []string{"systemd"},
		Description: "cgroup driver of kubelet and the runtime; kubeadm uses systemd, so only systemd is honoured."},
	{Name: LabelContainerRuntime, Group: GroupComponents, Type: LabelEnum, Default: "containerd", Enum: []string{"containerd", "host-docker"}, Anchors: aHeat, Honored: []string{"containerd"},
		Description: "Container runtime; CAPI images run containerd, so only containerd is honoured."},
	{Name: LabelContainerdVersion, Group: GroupComponents, Type: LabelString, Anchors: aHeat, Description: "containerd version (comes with the image)."},
	{Name: LabelContainerdTarballURL, Group: GroupComponents, Type: LabelString, Anchors: aHeat, Description: "containerd tarball URL (Heat only)."},
	{Name: LabelContainerdTarballSha256, Group: GroupComponents, Type: LabelString, Anchors: aHeat, Description: "containerd tarball checksum (Heat only)."},
	{Name: LabelUsePodman, Group: GroupComponents, Type: LabelBool, Anchors: aHeat, Description: "Run system containers with podman (Heat only)."},
	{Name: LabelSelinuxMode, Group: GroupComponents, Type: LabelEnum, Enum: []string{"enforcing", "permissive", "disabled"}, Anchors: aHeat, Description: "SELinux mode of the nodes (comes with the image)."},
	{Name: LabelOstreeRemote, Group: GroupComponents, Type: LabelString, Anchors: aHeat, Description: "Fedora CoreOS ostree remote (Heat only)."},
	{Name: LabelOstreeCommit, Group: GroupComponents, Type: LabelString, Anchors: aHeat, Description: "Fedora CoreOS ostree commit (Heat only)."},

	// --- Security: TLS, OIDC, audit ------------------------------------------------------------------
	{Name: LabelAPIServerCertSANs, Group: GroupSecurity, Type: LabelSANList, Anchors: aVex, Flavors: onlyCAPO,
		Description: "Extra subject alternative names of the API server certificate.",
		Effect:      "Variable `apiServerCertSANs` → KubeadmControlPlane `clusterConfiguration.apiServer.certSANs`."},
	{Name: LabelAPIServerTLSCipherSuites, Group: GroupSecurity, Type: LabelCipherSuites, Anchors: aVex, Flavors: onlyCAPO,
		Description: "TLS cipher suites kube-apiserver accepts (default: Kubernetes' own list).",
		Effect:      "Variable `apiServerTLSCipherSuites` → kube-apiserver `tls-cipher-suites`."},
	{Name: LabelKubeletTLSCipherSuites, Group: GroupSecurity, Type: LabelCipherSuites, Anchors: aVex, Flavors: onlyCAPO,
		Description: "TLS cipher suites kubelet accepts (default: Kubernetes' own list).",
		Effect:      "Variable `kubeletTLSCipherSuites` → kubelet `tls-cipher-suites` on control-plane and worker nodes."},
	{Name: LabelOIDCIssuerURL, Group: GroupSecurity, Type: LabelHTTPSURL, Anchors: aVex, Flavors: onlyCAPO,
		Description: "OpenID Connect issuer; setting it enables OIDC authentication.",
		Effect:      "Variable `openidConnect.issuerURL` → kube-apiserver `oidc-issuer-url` (needs oidc_client_id)."},
	{Name: LabelOIDCClientID, Group: GroupSecurity, Type: LabelString, Anchors: aVex, Flavors: onlyCAPO,
		Description: "OIDC client ID the tokens must be issued for.", Effect: "kube-apiserver `oidc-client-id`."},
	{Name: LabelOIDCUsernameClaim, Group: GroupSecurity, Type: LabelString, Default: "sub", Anchors: aVex, Flavors: onlyCAPO,
		Description: "JWT claim used as the user name.", Effect: "kube-apiserver `oidc-username-claim`."},
	{Name: LabelOIDCUsernamePrefix, Group: GroupSecurity, Type: LabelString, Default: "-", Anchors: aVex, Flavors: onlyCAPO,
		Description: "Prefix of OIDC user names (- for none).", Effect: "kube-apiserver `oidc-username-prefix`."},
	{Name: LabelOIDCGroupsClaim, Group: GroupSecurity, Type: LabelString, Anchors: aVex, Flavors: onlyCAPO,
		Description: "JWT claim holding the user's groups.", Effect: "kube-apiserver `oidc-groups-claim`."},
	{Name: LabelOIDCGroupsPrefix, Group: GroupSecurity, Type: LabelString, Anchors: aVex, Flavors: onlyCAPO,
		Description: "Prefix of OIDC group names.", Effect: "kube-apiserver `oidc-groups-prefix`."},
	{Name: LabelAuditLogEnabled, Group: GroupSecurity, Type: LabelBool, Default: "false", Anchors: aVex, Flavors: onlyCAPO,
		Description: "Write a kube-apiserver audit log on the control-plane nodes.",
		Effect:      "Variable `auditLog` → an audit policy file, kube-apiserver `audit-policy-file`/`audit-log-path`=/var/log/kubernetes/audit/kube-apiserver-audit.log and the host mounts for both."},
	{Name: LabelAuditLogMaxAge, Group: GroupSecurity, Type: LabelInt, Default: "30", Anchors: aVex, Flavors: onlyCAPO,
		Description: "Days to keep audit log files.", Effect: "kube-apiserver `audit-log-maxage` (with audit_log_enabled)."},
	{Name: LabelAuditLogMaxBackup, Group: GroupSecurity, Type: LabelInt, Default: "10", Anchors: aVex, Flavors: onlyCAPO,
		Description: "Number of audit log files to keep.", Effect: "kube-apiserver `audit-log-maxbackup` (with audit_log_enabled)."},
	{Name: LabelAuditLogMaxSize, Group: GroupSecurity, Type: LabelInt, Default: "100", Min: intp(1), Anchors: aVex, Flavors: onlyCAPO,
		Description: "Size in MB at which the audit log is rotated.", Effect: "kube-apiserver `audit-log-maxsize` (with audit_log_enabled)."},
	{Name: LabelAuditLogMaxage, Group: GroupSecurity, Type: LabelInt, Anchors: aVex, Flavors: onlyCAPO, AliasOf: "audit_log_max_age",
		Description: "Spelling of audit_log_max_age in vexxhost's documentation.", Effect: "Same as audit_log_max_age."},
	{Name: LabelAuditLogMaxbackup, Group: GroupSecurity, Type: LabelInt, Anchors: aVex, Flavors: onlyCAPO, AliasOf: "audit_log_max_backup",
		Description: "Spelling of audit_log_max_backup in vexxhost's documentation.", Effect: "Same as audit_log_max_backup."},
	{Name: LabelAuditLogMaxsize, Group: GroupSecurity, Type: LabelInt, Min: intp(1), Anchors: aVex, Flavors: onlyCAPO, AliasOf: "audit_log_max_size",
		Description: "Spelling of audit_log_max_size in vexxhost's documentation.", Effect: "Same as audit_log_max_size."},
	{Name: LabelKeystoneAuthEnabled, Group: GroupSecurity, Type: LabelBool, Flavors: allFlavors, Addon: true, Default: "true", Anchors: aAll,
		Description: "Keystone authentication/authorization webhook (k8s-keystone-auth add-on). Default true in Heat and magnum-cluster-api, false in magnum-capi-helm.",
		Effect:      "k8s-keystone-auth add-on (DaemonSet on the control plane, policy ConfigMap mapping the project's admin/member and reader roles) (internal/addons, delivered by the cluster's ClusterResourceSet); the kube-apiserver webhook flags are not set yet."},
	{Name: LabelK8sKeystoneAuthTag, Group: GroupSecurity, Type: LabelImageTag, Flavors: allFlavors, Addon: true, Anchors: aHeat, Description: "k8s-keystone-auth image tag.",
		Effect: "Image tag of k8s-keystone-auth (default: the cloud-provider-openstack release of the Kubernetes minor)."},

	// --- Auto-healing and autoscaling ----------------------------------------------------------------
	{Name: LabelAutoHealingEnabled, Group: GroupHealing, Type: LabelBool, Default: "true", Anchors: aAll, Flavors: allFlavors,
		Description: "Replace machines whose node stays unhealthy.",
		Effect:      "MachineHealthChecks (node not Ready for 5 min, or not joined in 10 min). In-memory: in the ClusterClass; OpenStack: the class defines them for the control plane and the workers and the Cluster's topology disables them (`healthCheck.enabled: false`) when false."},
	{Name: LabelAutoHealingNodeTimeout, Group: GroupBridge, Type: LabelInt, Default: "300", Min: intp(30), Max: intp(86400), Anchors: []Anchor{AnchorBridge}, Flavors: allFlavors,
		Description: "Seconds a worker's node may stay not Ready before auto-healing replaces it (a label of this bridge).",
		Effect:      "The worker MachineDeployments' topology health check (`unhealthyNodeConditions` timeouts) when auto_healing_enabled."},
	{Name: LabelAutoScalingEnabled, Group: GroupHealing, Type: LabelBool, Default: "false", Anchors: aAll, Flavors: allFlavors,
		Description: "Let the cluster autoscaler size worker node groups between min_node_count and max_node_count.",
		Effect:      "MachineDeployment topology without replicas and with the cluster-autoscaler min/max size annotations (for node groups with a max_node_count)."},
	{Name: LabelMinNodeCount, Group: GroupHealing, Type: LabelInt, Default: "0", Anchors: aAll, Flavors: allFlavors,
		Description: "Lower bound of the default worker group when autoscaling.", Effect: "Autoscaler min-size annotation of the default worker group (via its node group)."},
	{Name: LabelMaxNodeCount, Group: GroupHealing, Type: LabelInt, Anchors: aAll, Flavors: allFlavors,
		Description: "Upper bound of the default worker group when autoscaling (default: node_count).", Effect: "Autoscaler max-size annotation of the default worker group (via its node group); must not be below min_node_count."},
	{Name: LabelAutoHealingController, Group: GroupHealing, Type: LabelEnum, Enum: []string{"draino", "magnum-auto-healer"}, Anchors: aHeat,
		Description: "Heat's in-cluster healer; with CAPI, healing is done by MachineHealthChecks (auto_healing_enabled)."},
	{Name: LabelMagnumAutoHealerTag, Group: GroupHealing, Type: LabelImageTag, Anchors: aHeat, Description: "magnum-auto-healer image tag."},
	{Name: LabelDrainoTag, Group: GroupHealing, Type: LabelImageTag, Anchors: aHeat, Description: "draino image tag."},
	{Name: LabelAutoscalerTag, Autoscaler: true, Group: GroupHealing, Type: LabelImageTag, Anchors: aHeat, Flavors: allFlavors,
		Description: "cluster-autoscaler image tag (default: the autoscaler release of the cluster's Kubernetes minor).",
		Effect:      "Image tag of the cluster's cluster-autoscaler Deployment (internal/autoscaler; it runs in the cluster's project namespace while a worker group is autoscaled); also the way to run a cluster whose Kubernetes minor has no known autoscaler release."},
	{Name: LabelAutoscalerExpander, Autoscaler: true, Group: GroupBridge, Type: LabelEnumList, Enum: AutoscalerExpanders, Default: "least-waste,random", Anchors: []Anchor{AnchorBridge}, Flavors: allFlavors,
		Description: "How the cluster autoscaler picks the node group to grow, in order (a label of this bridge).",
		Effect:      "cluster-autoscaler `--expander`."},
	{Name: LabelAutoscalerScaleDownEnabled, Autoscaler: true, Group: GroupBridge, Type: LabelBool, Default: "true", Anchors: []Anchor{AnchorBridge}, Flavors: allFlavors,
		Description: "Let the cluster autoscaler remove nodes it finds unneeded (a label of this bridge).",
		Effect:      "cluster-autoscaler `--scale-down-enabled`."},
	{Name: LabelAutoscalerScaleDownDelayAfterAdd, Autoscaler: true, Group: GroupBridge, Type: LabelDuration, Default: "10m", Anchors: []Anchor{AnchorBridge}, Flavors: allFlavors,
		Description: "How long after a scale-up the cluster autoscaler waits before it scales down (a label of this bridge).",
		Effect:      "cluster-autoscaler `--scale-down-delay-after-add`."},
	{Name: LabelAutoscalerScaleDownUnneededTime, Autoscaler: true, Group: GroupBridge, Type: LabelDuration, Default: "10m", Anchors: []Anchor{AnchorBridge}, Flavors: allFlavors,
		Description: "How long a node must be unneeded before the cluster autoscaler removes it (a label of this bridge).",
		Effect:      "cluster-autoscaler `--scale-down-unneeded-time`."},
	{Name: LabelAutoscalerScaleDownUtilization, Autoscaler: true, Group: GroupBridge, Type: LabelInt, Default: "50", Min: intp(1), Max: intp(100), Anchors: []Anchor{AnchorBridge}, Flavors: allFlavors,
		Description: "Percent of a node's allocatable CPU and memory requested below which the node counts as unneeded (a label of this bridge).",
		Effect:      "cluster-autoscaler `--scale-down-utilization-threshold` (the percent over 100)."},
	{Name: LabelNPDEnabled, Group: GroupHealing, Type: LabelBool, Default: "true", Anchors: aHeat, Honored: []string{"false"}, Description: "Install node-problem-detector."},
	{Name: LabelNodeProblemDetectorTag, Group: GroupHealing, Type: LabelImageTag, Anchors: aHeat, Description: "node-problem-detector image tag."},

	// --- Add-ons -------------------------------------------------------------------------------------
	{Name: LabelIngressController, Group: GroupAddons, Type: LabelEnum, Enum: []string{"", "octavia", "nginx", "traefik"}, Anchors: aHeat, Honored: []string{""},
		Description: "Ingress controller to install."},
	{Name: LabelIngressControllerRole, Group: GroupAddons, Type: LabelString, Default: "ingress", Anchors: aHeat, Description: "Node role label of ingress nodes."},
	{Name: LabelOctaviaIngressControllerTag, Group: GroupAddons, Type: LabelImageTag, Anchors: aHeat, Description: "octavia-ingress-controller image tag."},
	{Name: LabelNginxIngressControllerTag, Group: GroupAddons, Type: LabelImageTag, Anchors: aHeat, Description: "ingress-nginx image tag."},
	{Name: LabelNginxIngressControllerChartTag, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Description: "ingress-nginx chart version."},
	{Name: LabelTraefikIngressControllerTag, Group: GroupAddons, Type: LabelImageTag, Anchors: aHeat, Description: "Traefik image tag."},
	{Name: LabelKubeDashboardEnabled, Group: GroupAddons, Type: LabelBool, Default: "true", Anchors: aHeatHlm, Honored: []string{"false"}, Description: "Install the Kubernetes dashboard."},
	{Name: LabelMetricsScraperTag, Group: GroupAddons, Type: LabelImageTag, Anchors: aHeat, Description: "dashboard metrics-scraper image tag."},
	{Name: LabelMetricsServerEnabled, Group: GroupAddons, Type: LabelBool, Default: "true", Flavors: allFlavors, Addon: true, Anchors: aHeat, Description: "Install metrics-server.",
		Effect: "metrics-server add-on (Deployment, Service, APIService v1beta1.metrics.k8s.io) (internal/addons, delivered by the cluster's ClusterResourceSet)."},
	{Name: LabelMetricsServerChartTag, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Description: "metrics-server chart version."},
	{Name: LabelMonitoringEnabled, Group: GroupAddons, Type: LabelBool, Default: "false", Anchors: aHeatHlm, Honored: []string{"false"}, Description: "Install Prometheus/Grafana monitoring."},
	{Name: LabelMonitoringRetentionDays, Group: GroupAddons, Type: LabelInt, Anchors: aHeat, Description: "Prometheus retention in days."},
	{Name: LabelMonitoringRetentionSize, Group: GroupAddons, Type: LabelInt, Anchors: aHeat, Description: "Prometheus retention size in GiB."},
	{Name: LabelMonitoringIntervalSeconds, Group: GroupAddons, Type: LabelInt, Anchors: aHeat, Description: "Prometheus scrape interval."},
	{Name: LabelMonitoringStorageClassName, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Description: "StorageClass of the monitoring volumes."},
	{Name: LabelMonitoringIngressEnabled, Group: GroupAddons, Type: LabelBool, Default: "false", Anchors: aHeat, Honored: []string{"false"}, Description: "Expose monitoring through the ingress."},
	{Name: LabelClusterBasicAuthSecret, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Secret: true, Description: "Basic-auth secret of the monitoring ingress."},
	{Name: LabelClusterRootDomainName, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Description: "Domain of the monitoring ingress."},
	{Name: LabelPrometheusMonitoring, Group: GroupAddons, Type: LabelBool, Default: "false", Anchors: aHeat, Honored: []string{"false"}, Description: "Old Prometheus monitoring switch."},
	{Name: LabelPrometheusTag, Group: GroupAddons, Type: LabelImageTag, Anchors: aHeat, Description: "Prometheus image tag."},
	{Name: LabelPrometheusOperatorChartTag, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Description: "prometheus-operator chart version."},
	{Name: LabelPrometheusAdapterEnabled, Group: GroupAddons, Type: LabelBool, Default: "true", Anchors: aHeat, Honored: []string{"false"}, Description: "Install prometheus-adapter."},
	{Name: LabelPrometheusAdapterChartTag, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Description: "prometheus-adapter chart version."},
	{Name: LabelPrometheusAdapterConfigmap, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Description: "prometheus-adapter configuration."},
	{Name: LabelGrafanaAdminPasswd, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Secret: true, Description: "Grafana admin password."},
	{Name: LabelGrafanaTag, Group: GroupAddons, Type: LabelImageTag, Anchors: aHeat, Description: "Grafana image tag."},
	{Name: LabelInfluxGrafanaDashboardEnabled, Group: GroupAddons, Type: LabelBool, Default: "false", Anchors: aHeat, Honored: []string{"false"}, Description: "Install the InfluxDB/Grafana dashboard."},
	{Name: LabelHeapsterEnabled, Group: GroupAddons, Type: LabelBool, Default: "false", Anchors: aHeat, Honored: []string{"false"}, Description: "Install heapster (removed from Kubernetes)."},
	{Name: LabelCertManagerAPI, Group: GroupAddons, Type: LabelBool, Default: "false", Anchors: aHeat, Honored: []string{"false"}, Description: "Enable the cert-manager API."},
	{Name: LabelHelmClientURL, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Description: "Helm client download URL (Heat only)."},
	{Name: LabelHelmClientSha256, Group: GroupAddons, Type: LabelString, Anchors: aHeat, Description: "Helm client checksum (Heat only)."},
	{Name: LabelHelmClientTag, Group: GroupAddons, Type: LabelImageTag, Anchors: aHeat, Description: "Helm client version (Heat only)."},
	{Name: LabelCloudProviderEnabled, Group: GroupAddons, Type: LabelBool, Default: "true", Flavors: allFlavors, Addon: true, Anchors: aHeat,
		Description: "Run the OpenStack cloud provider (nodes always run kubelet with an external cloud provider).",
		Effect:      "OpenStack cloud-controller-manager add-on (DaemonSet on the control plane reading kube-system/cloud-config, built from the workload credential) (internal/addons, delivered by the cluster's ClusterResourceSet)."},

	// --- Heat driver internals -----------------------------------------------------------------------
	{Name: LabelSystemPodsInitialDelay, Group: GroupLegacy, Type: LabelInt, Anchors: aHeat, Description: "Heat's wait before checking system pods."},
	{Name: LabelSystemPodsTimeout, Group: GroupLegacy, Type: LabelInt, Anchors: aHeat, Description: "Heat's timeout for system pods."},

	// --- Bridge-only ---------------------------------------------------------------------------------
	{Name: LabelInfrastructure, Group: GroupBridge, Type: LabelEnum, Enum: []string{string(FlavorOpenStack), string(FlavorInMemory)}, Anchors: []Anchor{AnchorBridge}, Flavors: allFlavors,
		Description: "The infrastructure the cluster's machines run on: `openstack` (CAPO) or `inmemory` (CAPI's in-memory test machines). Unset: the operator's `[bridge] default_infrastructure`.",
		Effect:      "Chooses the ClusterClass flavor. Only values in the operator's `[bridge] allowed_infrastructures` are accepted (default: `openstack` alone); any other fails the create naming this label."},
	{Name: LabelInmemoryMachineStartup, Group: GroupBridge, Type: LabelDuration, Default: "10s", Anchors: []Anchor{AnchorBridge}, Flavors: []Flavor{FlavorInMemory},
		Description: "In-memory (test) flavor only: how long a fake machine takes to boot.",
		Effect:      "DevMachineTemplate `vm.provisioning.startupDuration`. A duration longer than create_timeout makes the create fail on purpose."},
}
