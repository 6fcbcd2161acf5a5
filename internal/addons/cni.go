package addons

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/templates"
)

// cniBuilder picks the CNI by the template's network_driver (Magnum's field; magnum-api checks it
// against kubernetes_allowed_network_drivers). Empty means calico, as internal/templates assumes for
// the pod CIDR.
func cniBuilder(networkDriver string) (func(Input, versions) ([]runtime.Object, error), error) {
	switch strings.ToLower(strings.TrimSpace(networkDriver)) {
	case "", "calico":
		return calico, nil
	case "cilium":
		return cilium, nil
	case "flannel":
		return flannel, nil
	}
	return nil, fmt.Errorf("the template's network_driver %q is not one the bridge installs (calico, cilium or flannel)", networkDriver)
}

var cniHostVolumes = []corev1.Volume{
	hostPath("cni-bin-dir", "/opt/cni/bin", corev1.HostPathDirectoryOrCreate),
	hostPath("cni-net-dir", "/etc/cni/net.d", corev1.HostPathDirectoryOrCreate),
	hostPath("lib-modules", "/lib/modules", corev1.HostPathDirectory),
	hostPath("xtables-lock", "/run/xtables.lock", corev1.HostPathFileOrCreate),
}

// calicoKinds are Calico's resources (crd.projectcalico.org/v1), kind → namespaced. Calico's own
// components validate their content, so the CRDs carry an open schema.
var calicoKinds = map[string]bool{
	"BGPConfiguration": false, "BGPFilter": false, "BGPPeer": false, "BlockAffinity": false,
	"CalicoNodeStatus": false, "ClusterInformation": false, "FelixConfiguration": false,
	"GlobalNetworkPolicy": false, "GlobalNetworkSet": false, "HostEndpoint": false, "IPAMBlock": false,
	"IPAMConfig": false, "IPAMHandle": false, "IPPool": false, "IPReservation": false,
	"KubeControllersConfiguration": false, "NetworkPolicy": true, "NetworkSet": true, "Tier": false,
	"StagedGlobalNetworkPolicy": false, "StagedNetworkPolicy": true, "StagedKubernetesNetworkPolicy": true,
}

// pluralOf is the resource name Calico's clients use for a lower-cased kind.
func pluralOf(kind string) string {
	switch {
	case strings.HasSuffix(kind, "y"):
		return strings.TrimSuffix(kind, "y") + "ies"
	case strings.HasSuffix(kind, "s"):
		return kind + "es"
	}
	return kind + "s"
}

func calicoCRDs() []runtime.Object {
	kinds := sortedKeys(calicoKinds)
	out := make([]runtime.Object, 0, len(kinds))
	for _, kind := range kinds {
		plural := pluralOf(strings.ToLower(kind))
		scope := apiextensionsv1.ClusterScoped
		if calicoKinds[kind] {
			scope = apiextensionsv1.NamespaceScoped
		}
		out = append(out, &apiextensionsv1.CustomResourceDefinition{
			TypeMeta:   typeMeta("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
			ObjectMeta: metav1.ObjectMeta{Name: plural + ".crd.projectcalico.org"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "crd.projectcalico.org",
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Scope: scope,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
			},
		})
	}
	return out
}

func calico(in Input, v versions) ([]runtime.Object, error) {
	ipip := map[string]string{"Always": "Always", "CrossSubnet": "CrossSubnet", "Never": "Never", "Off": "Never"}[templates.LabelValue(in.Labels, templates.LabelCalicoIPv4PoolIPIP)]
	if ipip == "" {
		ipip = "Never"
	}
	cniConf := `{"name":"k8s-pod-network","cniVersion":"0.3.1","plugins":[` +
		`{"type":"calico","log_level":"info","datastore_type":"kubernetes","nodename":"__KUBERNETES_NODE_NAME__","mtu":__CNI_MTU__,` +
		`"ipam":{"type":"calico-ipam"},"policy":{"type":"k8s"},"kubernetes":{"kubeconfig":"__KUBECONFIG_FILEPATH__"}},` +
		`{"type":"portmap","snat":true,"capabilities":{"portMappings":true}},` +
		`{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`
	objs := calicoCRDs()
	objs = append(objs, configMap(kubeSystem, "calico-config", map[string]string{
		"calico_backend": "bird", "veth_mtu": "0", "typha_service_name": "none", "cni_network_config": cniConf}))
	objs = append(objs, identity(kubeSystem, "calico-node",
		rule(core, []string{"pods", "nodes", "namespaces", "services", "endpoints", "configmaps", "serviceaccounts"}, readVerbs),
		rule(core, []string{"nodes/status", "pods/status"}, []string{"patch", "update"}),
		rule([]string{"discovery.k8s.io"}, []string{"endpointslices"}, readVerbs),
		rule([]string{"networking.k8s.io", "policy.networking.k8s.io"}, []string{"*"}, readVerbs),
		rule([]string{"crd.projectcalico.org"}, []string{"*"}, writeVerbs),
		rule([]string{""}, []string{"serviceaccounts/token"}, []string{"create"}),
	)...)
	objs = append(objs, identity(kubeSystem, "calico-kube-controllers",
		rule(core, []string{"nodes", "pods", "namespaces", "serviceaccounts"}, readVerbs),
		rule([]string{"crd.projectcalico.org"}, []string{"*"}, writeVerbs),
		rule([]string{"networking.k8s.io"}, []string{"networkpolicies"}, readVerbs),
	)...)
	node := corev1.PodSpec{
		HostNetwork: true, ServiceAccountName: "calico-node", PriorityClassName: nodeCritical,
		Tolerations: tolerateEverything, NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		InitContainers: []corev1.Container{{
			Name: "install-cni", Image: in.image(imgCalicoCNI, v["calico"]), Command: []string{"/opt/cni/bin/install"},
			Env: []corev1.EnvVar{env("CNI_CONF_NAME", "10-calico.conflist"), fieldEnv("KUBERNETES_NODE_NAME", "spec.nodeName"),
				{Name: "CNI_NETWORK_CONFIG", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "calico-config"}, Key: "cni_network_config"}}},
				env("CNI_MTU", "0"), env("SLEEP", "false")},
			VolumeMounts:    []corev1.VolumeMount{mount("cni-bin-dir", "/host/opt/cni/bin"), mount("cni-net-dir", "/host/etc/cni/net.d")},
			SecurityContext: privileged,
		}},
		Containers: []corev1.Container{{
			Name: "calico-node", Image: in.image(imgCalicoNode, v["calico"]),
			Env: []corev1.EnvVar{env("DATASTORE_TYPE", "kubernetes"), env("WAIT_FOR_DATASTORE", "true"),
				fieldEnv("NODENAME", "spec.nodeName"), env("CLUSTER_TYPE", "k8s,bgp"), env("IP", "autodetect"),
				env("CALICO_IPV4POOL_IPIP", ipip), env("CALICO_IPV4POOL_VXLAN", "Never"),
				env("CALICO_IPV4POOL_CIDR", in.PodCIDR), env("CALICO_DISABLE_FILE_LOGGING", "true"),
				env("FELIX_DEFAULTENDPOINTTOHOSTACTION", "ACCEPT"), env("FELIX_IPV6SUPPORT", "false"),
				env("FELIX_HEALTHENABLED", "true")},
			SecurityContext: privileged,
			VolumeMounts: []corev1.VolumeMount{mount("lib-modules", "/lib/modules"), mount("xtables-lock", "/run/xtables.lock"),
				mount("var-run-calico", "/var/run/calico"), mount("var-lib-calico", "/var/lib/calico"), mount("cni-net-dir", "/host/etc/cni/net.d")},
		}},
		Volumes: append(append([]corev1.Volume{}, cniHostVolumes...),
			hostPath("var-run-calico", "/var/run/calico", corev1.HostPathDirectoryOrCreate),
			hostPath("var-lib-calico", "/var/lib/calico", corev1.HostPathDirectoryOrCreate)),
	}
	controllers := corev1.PodSpec{
		ServiceAccountName: "calico-kube-controllers", PriorityClassName: clusterCritical,
		Tolerations:  tolerateControlPl,
		NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		Containers: []corev1.Container{{Name: "calico-kube-controllers", Image: in.image(imgCalicoControllers, v["calico"]),
			Env: []corev1.EnvVar{env("ENABLED_CONTROLLERS", "node,loadbalancer"), env("DATASTORE_TYPE", "kubernetes")}}},
	}
	return append(objs, daemonSet(kubeSystem, "calico-node", node), deployment(kubeSystem, "calico-kube-controllers", 1, controllers)), nil
}

func cilium(in Input, v versions) ([]runtime.Object, error) {
	objs := []runtime.Object{configMap(kubeSystem, "cilium-config", map[string]string{
		"ipam": "cluster-pool", "cluster-pool-ipv4-cidr": in.PodCIDR, "cluster-pool-ipv4-mask-size": "24",
		"routing-mode": "tunnel", "tunnel-protocol": "vxlan", "kube-proxy-replacement": "false",
		"enable-ipv4": "true", "enable-ipv6": "false", "cluster-name": in.ClusterName,
		"enable-hubble": "false", "identity-allocation-mode": "crd", "cni-exclusive": "true",
	})}
	// The agent and the operator register Cilium's CRDs themselves at start-up.
	objs = append(objs, identity(kubeSystem, "cilium",
		rule(core, []string{"pods", "nodes", "namespaces", "services", "endpoints"}, readVerbs),
		rule(core, []string{"nodes/status", "pods"}, []string{"patch", "update", "delete"}),
		rule([]string{"discovery.k8s.io"}, []string{"endpointslices"}, readVerbs),
		rule([]string{"networking.k8s.io"}, []string{"networkpolicies"}, readVerbs),
		rule([]string{"apiextensions.k8s.io"}, []string{"customresourcedefinitions"}, readVerbs),
		rule([]string{"cilium.io"}, []string{"*"}, writeVerbs),
	)...)
	objs = append(objs, identity(kubeSystem, "cilium-operator",
		rule(core, []string{"pods", "nodes", "namespaces", "services", "endpoints", "configmaps"}, writeVerbs),
		rule([]string{"discovery.k8s.io"}, []string{"endpointslices"}, readVerbs),
		rule([]string{"apiextensions.k8s.io"}, []string{"customresourcedefinitions"}, writeVerbs),
		rule([]string{"coordination.k8s.io"}, []string{"leases"}, writeVerbs),
		rule([]string{"cilium.io"}, []string{"*"}, writeVerbs),
	)...)
	cfg := []corev1.Volume{configMapVolume("cilium-config-path", "cilium-config")}
	agent := corev1.PodSpec{
		HostNetwork: true, ServiceAccountName: "cilium", PriorityClassName: nodeCritical,
		Tolerations: tolerateEverything, NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		InitContainers: []corev1.Container{{Name: "install-cni-binaries", Image: in.image(imgCilium, v["cilium"]),
			Command:         []string{"/install-plugin.sh"},
			VolumeMounts:    []corev1.VolumeMount{mount("cni-bin-dir", "/host/opt/cni/bin")},
			SecurityContext: privileged}},
		Containers: []corev1.Container{{Name: "cilium-agent", Image: in.image(imgCilium, v["cilium"]),
			Command: []string{"cilium-agent"}, Args: []string{"--config-dir=/tmp/cilium/config-map"},
			Env:             []corev1.EnvVar{fieldEnv("K8S_NODE_NAME", "spec.nodeName"), fieldEnv("CILIUM_K8S_NAMESPACE", "metadata.namespace")},
			SecurityContext: privileged,
			VolumeMounts: []corev1.VolumeMount{mount("cilium-config-path", "/tmp/cilium/config-map"), mount("cni-net-dir", "/host/etc/cni/net.d"),
				mount("lib-modules", "/lib/modules"), mount("xtables-lock", "/run/xtables.lock")}}},
		Volumes: append(append([]corev1.Volume{}, cniHostVolumes...), cfg...),
	}
	operator := corev1.PodSpec{
		HostNetwork: true, ServiceAccountName: "cilium-operator", PriorityClassName: clusterCritical,
		Tolerations: tolerateEverything,
		Containers: []corev1.Container{{Name: "cilium-operator", Image: in.image(imgCiliumOperator, v["cilium"]),
			Command: []string{"cilium-operator-generic"}, Args: []string{"--config-dir=/tmp/cilium/config-map"},
			Env:          []corev1.EnvVar{fieldEnv("K8S_NODE_NAME", "spec.nodeName"), fieldEnv("CILIUM_K8S_NAMESPACE", "metadata.namespace")},
			VolumeMounts: []corev1.VolumeMount{mount("cilium-config-path", "/tmp/cilium/config-map")}}},
		Volumes: cfg,
	}
	return append(objs, daemonSet(kubeSystem, "cilium", agent), deployment(kubeSystem, "cilium-operator", 1, operator)), nil
}

func flannel(in Input, v versions) ([]runtime.Object, error) {
	const ns = "kube-flannel"
	backend := templates.LabelValue(in.Labels, templates.LabelFlannelBackend)
	netConf := fmt.Sprintf(`{"Network":%q,"EnableNFTables":false,"Backend":{"Type":%q}}`, in.PodCIDR, backend)
	cniConf := `{"name":"cbr0","cniVersion":"0.3.1","plugins":[{"type":"flannel","delegate":{"hairpinMode":true,"isDefaultGateway":true}},` +
		`{"type":"portmap","capabilities":{"portMappings":true}}]}`
	objs := []runtime.Object{
		&corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}},
		configMap(ns, "kube-flannel-cfg", map[string]string{"cni-conf.json": cniConf, "net-conf.json": netConf}),
	}
	objs = append(objs, identity(ns, "flannel",
		rule(core, []string{"pods"}, []string{"get"}),
		rule(core, []string{"nodes"}, readVerbs),
		rule(core, []string{"nodes/status"}, []string{"patch"}),
	)...)
	spec := corev1.PodSpec{
		HostNetwork: true, ServiceAccountName: "flannel", PriorityClassName: nodeCritical,
		Tolerations: tolerateEverything, NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		InitContainers: []corev1.Container{
			{Name: "install-cni-plugin", Image: in.image(imgFlannelCNI, v["flannel-cni-plugin"]),
				Command: []string{"cp"}, Args: []string{"-f", "/flannel", "/opt/cni/bin/flannel"},
				VolumeMounts: []corev1.VolumeMount{mount("cni-bin-dir", "/opt/cni/bin")}},
			{Name: "install-cni", Image: in.image(imgFlannel, v["flannel"]),
				Command: []string{"cp"}, Args: []string{"-f", "/etc/kube-flannel/cni-conf.json", "/etc/cni/net.d/10-flannel.conflist"},
				VolumeMounts: []corev1.VolumeMount{mount("cni-net-dir", "/etc/cni/net.d"), mount("flannel-cfg", "/etc/kube-flannel/")}},
		},
		Containers: []corev1.Container{{Name: "kube-flannel", Image: in.image(imgFlannel, v["flannel"]),
			Command: []string{"/opt/bin/flanneld"}, Args: []string{"--ip-masq", "--kube-subnet-mgr"},
			Env: []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"),
				env("EVENT_QUEUE_DEPTH", "5000")},
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(false),
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}},
			VolumeMounts: []corev1.VolumeMount{mount("run", "/run/flannel"), mount("flannel-cfg", "/etc/kube-flannel/"),
				mount("xtables-lock", "/run/xtables.lock")}}},
		Volumes: append(append([]corev1.Volume{}, cniHostVolumes...),
			hostPath("run", "/run/flannel", corev1.HostPathDirectoryOrCreate), configMapVolume("flannel-cfg", "kube-flannel-cfg")),
	}
	return append(objs, daemonSet(ns, "kube-flannel-ds", spec)), nil
}
