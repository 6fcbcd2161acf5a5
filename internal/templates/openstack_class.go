package templates

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// The OpenStack flavor renders for Cluster API Provider OpenStack (CAPO) v0.14, which implements the
// v1beta1 infrastructure contract only; the control plane and bootstrap templates are CAPI v1beta2.
const (
	CAPOGroupVersion = "infrastructure.cluster.x-k8s.io/v1beta1"
	// CloudConfigSecretKey is the key of the cloud credential Secret that holds the clouds.yaml;
	// CloudConfigCloudName is the entry of that clouds.yaml CAPO uses.
	CloudConfigSecretKey = "clouds.yaml"
	CloudConfigCloudName = "openstack"
	// topologyPlaceholder fills fields the CRDs require in the class templates; a patch always
	// replaces it from the Cluster's variables.
	topologyPlaceholder = "set-by-cluster-topology"
)

// CloudConfigSecretName is the Secret (in the cluster's namespace, key clouds.yaml, cloud
// "openstack", optional key cacert) CAPO authenticates with for a cluster. Another part of the
// bridge creates it; the rendering only references it.
func CloudConfigSecretName(clusterName string) string { return clusterName + "-cloud-config" }

// ClusterClass variables of the OpenStack flavor. Their values are computed by the bridge from the
// Magnum template, cluster, node groups and labels; the class's patches copy them into the templates.
const (
	VarIdentityRef                   = "identityRef"
	VarMachineImage                  = "machineImage"
	VarMachineFlavor                 = "machineFlavor"
	VarSSHKeyName                    = "sshKeyName"
	VarExternalNetwork               = "externalNetwork"
	VarNetwork                       = "network"
	VarSubnets                       = "subnets"
	VarManagedSubnets                = "managedSubnets"
	VarAPIServerLoadBalancer         = "apiServerLoadBalancer"
	VarDisableAPIServerFloatingIP    = "disableAPIServerFloatingIP"
	VarAPIServerFloatingIP           = "apiServerFloatingIP"
	VarControlPlaneAvailabilityZones = "controlPlaneAvailabilityZones"
	VarRootVolume                    = "rootVolume"
	VarServerGroup                   = "serverGroup"
	VarPorts                         = "ports"
	VarImageRepository               = "imageRepository"
	VarAPIServerCertSANs             = "apiServerCertSANs"
	VarAPIServerTLSCipherSuites      = "apiServerTLSCipherSuites"
	VarKubeletTLSCipherSuites        = "kubeletTLSCipherSuites"
	VarEnableAdmissionPlugins        = "enableAdmissionPlugins"
	VarOpenIDConnect                 = "openidConnect"
	VarAuditLog                      = "auditLog"
	VarProxy                         = "proxy"
	VarNodeLabels                    = "nodeLabels"
	VarNodeTaints                    = "nodeTaints"
)

// Files the audit log and proxy features write on the nodes.
const (
	auditPolicyPath = "/etc/kubernetes/audit-policy.yaml"
	auditLogDir     = "/var/log/kubernetes/audit"
	auditLogPath    = auditLogDir + "/kube-apiserver-audit.log"
	proxyDropInPath = "/etc/systemd/system/containerd.service.d/http-proxy.conf"
)

// auditPolicy records who did what (metadata, never request or response bodies, which may hold
// Secrets) and leaves out the high-volume, low-value requests: health probes and events.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages:
- RequestReceived
rules:
- level: None
  nonResourceURLs:
  - /healthz*
  - /livez*
  - /readyz*
  - /version
- level: None
  resources:
  - group: ""
    resources:
    - events
  - group: events.k8s.io
    resources:
    - events
- level: Metadata
`

// --- JSON schema helpers for the variables --------------------------------------------------------

func schemaString(desc string) clusterv1.JSONSchemaProps {
	return clusterv1.JSONSchemaProps{Type: "string", Description: desc, MinLength: ptr.To[int64](1)}
}

func schemaObject(desc string, props map[string]clusterv1.JSONSchemaProps, required ...string) clusterv1.JSONSchemaProps {
	return clusterv1.JSONSchemaProps{Type: "object", Description: desc, Properties: props, Required: required}
}

func schemaArray(desc string, items clusterv1.JSONSchemaProps) clusterv1.JSONSchemaProps {
	return clusterv1.JSONSchemaProps{Type: "array", Description: desc, Items: &items, MinItems: ptr.To[int64](1)}
}

// schemaOneOf is an object that must have exactly one of its properties (CAPO's ID-or-filter params).
func schemaOneOf(desc string, props map[string]clusterv1.JSONSchemaProps) clusterv1.JSONSchemaProps {
	s := schemaObject(desc, props)
	s.MinProperties, s.MaxProperties = ptr.To[int64](1), ptr.To[int64](1)
	return s
}

func schemaUUID() clusterv1.JSONSchemaProps {
	return clusterv1.JSONSchemaProps{Type: "string", Format: "uuid"}
}

func schemaNameFilter() clusterv1.JSONSchemaProps {
	return schemaObject("", map[string]clusterv1.JSONSchemaProps{"name": schemaString("")}, "name")
}

// schemaNeutronParam is CAPO's NetworkParam/SubnetParam: {id} or {filter: {name}}.
func schemaNeutronParam(desc string) clusterv1.JSONSchemaProps {
	return schemaOneOf(desc, map[string]clusterv1.JSONSchemaProps{"id": schemaUUID(), "filter": schemaNameFilter()})
}

func variable(name string, required bool, schema clusterv1.JSONSchemaProps) clusterv1.ClusterClassVariable {
	return clusterv1.ClusterClassVariable{Name: name, Required: ptr.To(required),
		Schema: clusterv1.VariableSchema{OpenAPIV3Schema: schema}}
}

func openStackVariables() []clusterv1.ClusterClassVariable {
	str := schemaString
	boolean := clusterv1.JSONSchemaProps{Type: "boolean"}
	integer := func(min int64) clusterv1.JSONSchemaProps {
		return clusterv1.JSONSchemaProps{Type: "integer", Minimum: ptr.To(min)}
	}
	return []clusterv1.ClusterClassVariable{
		variable(VarIdentityRef, true, schemaObject("Secret (key clouds.yaml) and cloud CAPO authenticates with.",
			map[string]clusterv1.JSONSchemaProps{"name": str(""), "cloudName": str("")}, "name", "cloudName")),
		variable(VarMachineImage, true, schemaOneOf("Glance image of the machines: {id} or {filter: {name}}.",
			map[string]clusterv1.JSONSchemaProps{"id": schemaUUID(), "filter": schemaNameFilter()})),
		variable(VarMachineFlavor, true, schemaOneOf("Nova flavor of the machines: {name} or {id}.",
			map[string]clusterv1.JSONSchemaProps{"name": str(""), "id": str("")})),
		variable(VarSSHKeyName, false, str("Nova keypair injected into the machines.")),
		variable(VarExternalNetwork, false, schemaNeutronParam("External network for the router and floating IPs.")),
		variable(VarNetwork, false, schemaNeutronParam("Existing network of the nodes (the template's fixed_network).")),
		variable(VarSubnets, false, func() clusterv1.JSONSchemaProps {
			s := schemaArray("Existing subnets of the nodes (the template's fixed_subnet).", schemaNeutronParam(""))
			s.MaxItems = ptr.To[int64](2)
			return s
		}()),
		variable(VarManagedSubnets, false, func() clusterv1.JSONSchemaProps {
			s := schemaArray("Subnet CAPO creates (with network and router) when there is no fixed network.",
				schemaObject("", map[string]clusterv1.JSONSchemaProps{
					"cidr":           str(""),
					"dnsNameservers": schemaArray("", str("")),
				}, "cidr"))
			s.MaxItems = ptr.To[int64](1)
			return s
		}()),
		variable(VarAPIServerLoadBalancer, true, schemaObject("Octavia load balancer in front of the API servers.",
			map[string]clusterv1.JSONSchemaProps{
				"enabled":          boolean,
				"provider":         str(""),
				"allowedCIDRs":     schemaArray("", str("")),
				"flavor":           str(""),
				"availabilityZone": str(""),
			}, "enabled")),
		variable(VarDisableAPIServerFloatingIP, true, boolean),
		variable(VarAPIServerFloatingIP, false, str("Floating IP of the API server.")),
		variable(VarControlPlaneAvailabilityZones, false, schemaArray("Availability zones of the control-plane machines.", str(""))),
		variable(VarRootVolume, false, schemaObject("Boot volume of the machines (CAPO RootVolume).",
			map[string]clusterv1.JSONSchemaProps{
				"sizeGiB": integer(1),
				"type":    str(""),
				"availabilityZone": schemaObject("", map[string]clusterv1.JSONSchemaProps{
					"from": {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"Name"`)}, {Raw: []byte(`"Machine"`)}}},
					"name": str(""),
				}, "from"),
			}, "sizeGiB")),
		variable(VarServerGroup, false, schemaObject("Nova server group of the machines, by name.",
			map[string]clusterv1.JSONSchemaProps{"filter": schemaNameFilter()}, "filter")),
		variable(VarPorts, false, schemaArray("Ports of the machines: the cluster network first, then extra networks.",
			schemaObject("", map[string]clusterv1.JSONSchemaProps{"network": schemaNeutronParam("")}))),
		variable(VarImageRepository, false, str("Registry the Kubernetes images are pulled from.")),
		variable(VarAPIServerCertSANs, false, schemaArray("Extra SANs of the API server certificate.", str(""))),
		variable(VarAPIServerTLSCipherSuites, false, str("kube-apiserver tls-cipher-suites.")),
		variable(VarKubeletTLSCipherSuites, false, str("kubelet tls-cipher-suites.")),
		variable(VarEnableAdmissionPlugins, false, str("kube-apiserver enable-admission-plugins.")),
		variable(VarOpenIDConnect, false, schemaObject("OIDC authentication of kube-apiserver.",
			map[string]clusterv1.JSONSchemaProps{
				"issuerURL": str(""), "clientID": str(""), "usernameClaim": str(""), "usernamePrefix": str(""),
				"groupsClaim": str(""), "groupsPrefix": str(""),
			}, "issuerURL", "clientID", "usernameClaim", "usernamePrefix")),
		variable(VarAuditLog, false, schemaObject("kube-apiserver audit log rotation; set to enable the audit log.",
			map[string]clusterv1.JSONSchemaProps{"maxAge": integer(0), "maxBackup": integer(0), "maxSize": integer(1)},
			"maxAge", "maxBackup", "maxSize")),
		variable(VarProxy, false, schemaObject("HTTP proxy of the container runtime.",
			map[string]clusterv1.JSONSchemaProps{"httpProxy": str(""), "httpsProxy": str(""), "noProxy": str("")}, "noProxy")),
		variable(VarNodeLabels, false, str("kubelet node-labels of a node group (k=v,…).")),
		variable(VarNodeTaints, false, schemaArray("Taints a node group's nodes register with.",
			schemaObject("", map[string]clusterv1.JSONSchemaProps{
				"key":   str(""),
				"value": {Type: "string"},
				"effect": {Type: "string", Enum: []apiextensionsv1.JSON{
					{Raw: []byte(`"NoSchedule"`)}, {Raw: []byte(`"PreferNoSchedule"`)}, {Raw: []byte(`"NoExecute"`)}}},
			}, "key", "effect"))),
	}
}

// --- patch helpers ---------------------------------------------------------------------------------

var (
	matchInfraCluster = clusterv1.PatchSelectorMatch{InfrastructureCluster: ptr.To(true)}
	// matchAllMachines selects the control-plane and the worker machine templates.
	matchAllMachines = clusterv1.PatchSelectorMatch{ControlPlane: ptr.To(true),
		MachineDeploymentClass: &clusterv1.PatchSelectorMatchMachineDeploymentClass{Names: []string{WorkerClass}}}
	matchControlPlane = clusterv1.PatchSelectorMatch{ControlPlane: ptr.To(true)}
	matchWorkers      = clusterv1.PatchSelectorMatch{
		MachineDeploymentClass: &clusterv1.PatchSelectorMatchMachineDeploymentClass{Names: []string{WorkerClass}}}
)

func selector(apiVersion, kind string, m clusterv1.PatchSelectorMatch) clusterv1.PatchSelector {
	return clusterv1.PatchSelector{APIVersion: apiVersion, Kind: kind, MatchResources: m}
}

func onClusterTemplate() clusterv1.PatchSelector {
	return selector(CAPOGroupVersion, "OpenStackClusterTemplate", matchInfraCluster)
}
func onMachineTemplates() clusterv1.PatchSelector {
	return selector(CAPOGroupVersion, "OpenStackMachineTemplate", matchAllMachines)
}
func onControlPlaneTemplate() clusterv1.PatchSelector {
	return selector(ControlPlaneGroupVersion, "KubeadmControlPlaneTemplate", matchControlPlane)
}
func onWorkerBootstrap() clusterv1.PatchSelector {
	return selector(BootstrapGroupVersion, "KubeadmConfigTemplate", matchWorkers)
}

func patchFromVar(op, path, variable string) clusterv1.JSONPatch {
	return clusterv1.JSONPatch{Op: op, Path: path, ValueFrom: &clusterv1.JSONPatchValue{Variable: variable}}
}

func patchFromTemplate(op, path, tmpl string) clusterv1.JSONPatch {
	return clusterv1.JSONPatch{Op: op, Path: path, ValueFrom: &clusterv1.JSONPatchValue{Template: tmpl}}
}

func patchValue(op, path string, v any) clusterv1.JSONPatch {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("templates: patch value for %s: %v", path, err)) // only constant values reach here
	}
	return clusterv1.JSONPatch{Op: op, Path: path, Value: &apiextensionsv1.JSON{Raw: raw}}
}

// enabledIfAny is a patch condition: any of the variables is set (and not empty/false).
func enabledIfAny(vars ...string) string {
	if len(vars) == 1 {
		return "{{ if ." + vars[0] + " }}true{{ end }}"
	}
	return "{{ if or ." + strings.Join(vars, " .") + " }}true{{ end }}"
}

// argTemplate renders one kubeadm extra argument {name, value}; toJson quotes and escapes the value.
func argTemplate(name, valueExpr string) string {
	return `{"name": "` + name + `", "value": {{ ` + valueExpr + ` | toString | toJson }}}`
}

type patchDef struct {
	sel     clusterv1.PatchSelector
	patches []clusterv1.JSONPatch
}

func classPatch(name, desc, enabledIf string, defs ...patchDef) clusterv1.ClusterClassPatch {
	p := clusterv1.ClusterClassPatch{Name: name, Description: desc, EnabledIf: enabledIf}
	for _, d := range defs {
		p.Definitions = append(p.Definitions, clusterv1.PatchDefinition{Selector: d.sel, JSONPatches: d.patches})
	}
	return p
}

const (
	osctSpec          = "/spec/template/spec"
	osmtSpec          = "/spec/template/spec"
	kcpConfig         = "/spec/template/spec/kubeadmConfigSpec"
	kcpAPIServer      = kcpConfig + "/clusterConfiguration/apiServer"
	kctConfig         = "/spec/template/spec"
	kubeletArgsAppend = "/nodeRegistration/kubeletExtraArgs/-"
)

// Features that add control-plane and worker files: a first patch creates each list when one of
// them is on, the feature patches then append to it (JSON patch cannot append to a list that does
// not exist, and the CRDs refuse empty lists, so the list may only exist when something is added).
var (
	cpFileFeatures     = []string{VarAuditLog, VarProxy}
	workerFileFeatures = []string{VarProxy}
)

func openStackPatches() []clusterv1.ClusterClassPatch {
	oidcArg := func(flag, field string) clusterv1.JSONPatch {
		return patchFromTemplate("add", kcpAPIServer+"/extraArgs/-", argTemplate(flag, ".openidConnect."+field))
	}
	auditArg := func(flag, expr string) clusterv1.JSONPatch {
		return patchFromTemplate("add", kcpAPIServer+"/extraArgs/-", argTemplate(flag, expr))
	}
	// The systemd drop-in that gives containerd the proxy settings; toJson escapes the assembled text.
	proxyFile := `{{- $c := "[Service]\n" -}}
{{- with .proxy.httpProxy }}{{ $c = printf "%sEnvironment=\"HTTP_PROXY=%s\"\nEnvironment=\"http_proxy=%s\"\n" $c . . }}{{ end -}}
{{- with .proxy.httpsProxy }}{{ $c = printf "%sEnvironment=\"HTTPS_PROXY=%s\"\nEnvironment=\"https_proxy=%s\"\n" $c . . }}{{ end -}}
{{- $c = printf "%sEnvironment=\"NO_PROXY=%s\"\nEnvironment=\"no_proxy=%s\"\n" $c .proxy.noProxy .proxy.noProxy -}}
{"path": "` + proxyDropInPath + `", "owner": "root:root", "permissions": "0644", "content": {{ toJson $c }}}`
	restartContainerd := []string{"systemctl daemon-reload", "systemctl restart containerd"}

	return []clusterv1.ClusterClassPatch{
		// Lists several features append to.
		classPatch("control-plane-files", "Creates the control plane's files list for the features that add to it.", enabledIfAny(cpFileFeatures...),
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{patchValue("add", kcpConfig+"/files", []any{})}}),
		classPatch("worker-files", "Creates the workers' files list for the features that add to it.", enabledIfAny(workerFileFeatures...),
			patchDef{onWorkerBootstrap(), []clusterv1.JSONPatch{patchValue("add", kctConfig+"/files", []any{})}}),

		// Infrastructure cluster.
		classPatch("identity", "Cloud credential Secret of the cluster.", "",
			patchDef{onClusterTemplate(), []clusterv1.JSONPatch{patchFromVar("replace", osctSpec+"/identityRef", VarIdentityRef)}}),
		classPatch("external-network", "External network.", enabledIfAny(VarExternalNetwork),
			patchDef{onClusterTemplate(), []clusterv1.JSONPatch{patchFromVar("add", osctSpec+"/externalNetwork", VarExternalNetwork)}}),
		classPatch("fixed-network", "Existing node network.", enabledIfAny(VarNetwork),
			patchDef{onClusterTemplate(), []clusterv1.JSONPatch{patchFromVar("add", osctSpec+"/network", VarNetwork)}}),
		classPatch("fixed-subnets", "Existing node subnets.", enabledIfAny(VarSubnets),
			patchDef{onClusterTemplate(), []clusterv1.JSONPatch{patchFromVar("add", osctSpec+"/subnets", VarSubnets)}}),
		classPatch("managed-subnets", "Node network CAPO creates.", enabledIfAny(VarManagedSubnets),
			patchDef{onClusterTemplate(), []clusterv1.JSONPatch{patchFromVar("add", osctSpec+"/managedSubnets", VarManagedSubnets)}}),
		classPatch("api-server-load-balancer", "API server load balancer.", "",
			patchDef{onClusterTemplate(), []clusterv1.JSONPatch{
				patchFromVar("add", osctSpec+"/apiServerLoadBalancer", VarAPIServerLoadBalancer),
				patchFromVar("add", osctSpec+"/disableAPIServerFloatingIP", VarDisableAPIServerFloatingIP),
			}}),
		classPatch("api-server-floating-ip", "Fixed floating IP of the API server.", enabledIfAny(VarAPIServerFloatingIP),
			patchDef{onClusterTemplate(), []clusterv1.JSONPatch{patchFromVar("add", osctSpec+"/apiServerFloatingIP", VarAPIServerFloatingIP)}}),
		classPatch("control-plane-availability-zones", "Availability zones of the control plane.", enabledIfAny(VarControlPlaneAvailabilityZones),
			patchDef{onClusterTemplate(), []clusterv1.JSONPatch{patchFromVar("add", osctSpec+"/controlPlaneAvailabilityZones", VarControlPlaneAvailabilityZones)}}),

		// Machines (control plane and workers; node groups override through their variables).
		classPatch("machine-image", "Glance image.", "",
			patchDef{onMachineTemplates(), []clusterv1.JSONPatch{patchFromVar("replace", osmtSpec+"/image", VarMachineImage)}}),
		classPatch("machine-flavor-by-name", "Nova flavor by name.", "{{ if .machineFlavor.name }}true{{ end }}",
			patchDef{onMachineTemplates(), []clusterv1.JSONPatch{patchFromVar("replace", osmtSpec+"/flavor", VarMachineFlavor+".name")}}),
		classPatch("machine-flavor-by-id", "Nova flavor by ID.", "{{ if .machineFlavor.id }}true{{ end }}",
			patchDef{onMachineTemplates(), []clusterv1.JSONPatch{
				{Op: "remove", Path: osmtSpec + "/flavor"},
				patchFromVar("add", osmtSpec+"/flavorID", VarMachineFlavor+".id"),
			}}),
		classPatch("ssh-key", "Nova keypair.", enabledIfAny(VarSSHKeyName),
			patchDef{onMachineTemplates(), []clusterv1.JSONPatch{patchFromVar("add", osmtSpec+"/sshKeyName", VarSSHKeyName)}}),
		classPatch("root-volume", "Boot from volume.", enabledIfAny(VarRootVolume),
			patchDef{onMachineTemplates(), []clusterv1.JSONPatch{patchFromVar("add", osmtSpec+"/rootVolume", VarRootVolume)}}),
		classPatch("server-group", "Nova server group.", enabledIfAny(VarServerGroup),
			patchDef{onMachineTemplates(), []clusterv1.JSONPatch{patchFromVar("add", osmtSpec+"/serverGroup", VarServerGroup)}}),
		classPatch("ports", "Extra networks.", enabledIfAny(VarPorts),
			patchDef{onMachineTemplates(), []clusterv1.JSONPatch{patchFromVar("add", osmtSpec+"/ports", VarPorts)}}),

		// kubeadm: control plane.
		classPatch("image-repository", "Registry of the Kubernetes images.", enabledIfAny(VarImageRepository),
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{patchFromVar("add", kcpConfig+"/clusterConfiguration/imageRepository", VarImageRepository)}}),
		classPatch("api-server-cert-sans", "Extra API server certificate SANs.", enabledIfAny(VarAPIServerCertSANs),
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{patchFromVar("add", kcpAPIServer+"/certSANs", VarAPIServerCertSANs)}}),
		classPatch("api-server-tls-cipher-suites", "kube-apiserver TLS cipher suites.", enabledIfAny(VarAPIServerTLSCipherSuites),
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{
				patchFromTemplate("add", kcpAPIServer+"/extraArgs/-", argTemplate("tls-cipher-suites", ".apiServerTLSCipherSuites"))}}),
		classPatch("admission-plugins", "kube-apiserver admission plugins.", enabledIfAny(VarEnableAdmissionPlugins),
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{
				patchFromTemplate("add", kcpAPIServer+"/extraArgs/-", argTemplate("enable-admission-plugins", ".enableAdmissionPlugins"))}}),
		classPatch("oidc", "OIDC authentication.", enabledIfAny(VarOpenIDConnect),
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{
				oidcArg("oidc-issuer-url", "issuerURL"), oidcArg("oidc-client-id", "clientID"),
				oidcArg("oidc-username-claim", "usernameClaim"), oidcArg("oidc-username-prefix", "usernamePrefix"),
			}}),
		classPatch("oidc-groups-claim", "OIDC groups claim.", "{{ if and .openidConnect .openidConnect.groupsClaim }}true{{ end }}",
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{oidcArg("oidc-groups-claim", "groupsClaim")}}),
		classPatch("oidc-groups-prefix", "OIDC groups prefix.", "{{ if and .openidConnect .openidConnect.groupsPrefix }}true{{ end }}",
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{oidcArg("oidc-groups-prefix", "groupsPrefix")}}),
		classPatch("audit-log", "kube-apiserver audit log.", enabledIfAny(VarAuditLog),
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{
				patchValue("add", kcpConfig+"/files/-", bootstrapv1.File{Path: auditPolicyPath, Owner: "root:root", Permissions: "0600", Content: auditPolicy}),
				auditArg("audit-policy-file", `"`+auditPolicyPath+`"`),
				auditArg("audit-log-path", `"`+auditLogPath+`"`),
				auditArg("audit-log-maxage", ".auditLog.maxAge"),
				auditArg("audit-log-maxbackup", ".auditLog.maxBackup"),
				auditArg("audit-log-maxsize", ".auditLog.maxSize"),
				patchValue("add", kcpAPIServer+"/extraVolumes", []bootstrapv1.HostPathMount{
					{Name: "audit-policy", HostPath: auditPolicyPath, MountPath: auditPolicyPath, ReadOnly: ptr.To(true), PathType: corev1.HostPathFile},
					{Name: "audit-logs", HostPath: auditLogDir, MountPath: auditLogDir, PathType: corev1.HostPathDirectoryOrCreate},
				}),
			}}),
		classPatch("kubelet-tls-cipher-suites", "kubelet TLS cipher suites.", enabledIfAny(VarKubeletTLSCipherSuites),
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{
				patchFromTemplate("add", kcpConfig+"/initConfiguration"+kubeletArgsAppend, argTemplate("tls-cipher-suites", ".kubeletTLSCipherSuites")),
				patchFromTemplate("add", kcpConfig+"/joinConfiguration"+kubeletArgsAppend, argTemplate("tls-cipher-suites", ".kubeletTLSCipherSuites")),
			}},
			patchDef{onWorkerBootstrap(), []clusterv1.JSONPatch{
				patchFromTemplate("add", kctConfig+"/joinConfiguration"+kubeletArgsAppend, argTemplate("tls-cipher-suites", ".kubeletTLSCipherSuites")),
			}}),
		classPatch("http-proxy", "HTTP proxy of containerd.", enabledIfAny(VarProxy),
			patchDef{onControlPlaneTemplate(), []clusterv1.JSONPatch{
				patchFromTemplate("add", kcpConfig+"/files/-", proxyFile),
				patchValue("add", kcpConfig+"/preKubeadmCommands", restartContainerd),
			}},
			patchDef{onWorkerBootstrap(), []clusterv1.JSONPatch{
				patchFromTemplate("add", kctConfig+"/files/-", proxyFile),
				patchValue("add", kctConfig+"/preKubeadmCommands", restartContainerd),
			}}),

		// kubeadm: node groups.
		classPatch("node-labels", "Node labels of a node group.", enabledIfAny(VarNodeLabels),
			patchDef{onWorkerBootstrap(), []clusterv1.JSONPatch{
				patchFromTemplate("add", kctConfig+"/joinConfiguration"+kubeletArgsAppend, argTemplate("node-labels", ".nodeLabels"))}}),
		classPatch("node-taints", "Node taints of a node group.", enabledIfAny(VarNodeTaints),
			patchDef{onWorkerBootstrap(), []clusterv1.JSONPatch{
				patchFromVar("add", kctConfig+"/joinConfiguration/nodeRegistration/taints", VarNodeTaints)}}),
	}
}

// nodeRegistration is what every CAPO node registers with: the server's hostname as node name and
// the OpenStack provider ID kubelet reports, with the cloud-controller-manager as cloud provider.
// {{ local_hostname }} and {{ instance_id }} are cloud-init (jinja) variables.
func nodeRegistration() bootstrapv1.NodeRegistrationOptions {
	return bootstrapv1.NodeRegistrationOptions{
		Name: "{{ local_hostname }}",
		KubeletExtraArgs: []bootstrapv1.Arg{
			{Name: "cloud-provider", Value: ptr.To("external")},
			{Name: "provider-id", Value: ptr.To("openstack:///'{{ instance_id }}'")},
		},
	}
}

// openStackClass renders the OpenStack flavor's ClusterClass and templates. It does not depend on
// the input: everything that differs between clusters reaches the templates through variables, so
// every OpenStack cluster of a bridge version shares one class per namespace.
func openStackClass() ([]*unstructured.Unstructured, error) {
	clusterTmpl := obj(CAPOGroupVersion, "OpenStackClusterTemplate", classPlaceholder+"-cluster", map[string]any{
		"template": map[string]any{"spec": map[string]any{
			"identityRef": map[string]any{"type": "Secret", "name": topologyPlaceholder, "cloudName": CloudConfigCloudName},
			// Calico and Cilium need node-to-node traffic (BGP, IP-in-IP, VXLAN) the default rules block.
			"managedSecurityGroups": map[string]any{"allowAllInClusterTraffic": true},
		}},
	})
	machineTmpl := obj(CAPOGroupVersion, "OpenStackMachineTemplate", classPlaceholder+"-machine", map[string]any{
		"template": map[string]any{"spec": map[string]any{
			"flavor": topologyPlaceholder,
			"image":  map[string]any{"filter": map[string]any{"name": topologyPlaceholder}},
		}},
	})
	cp := &controlplanev1.KubeadmControlPlaneTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: classPlaceholder + "-control-plane"},
		Spec: controlplanev1.KubeadmControlPlaneTemplateSpec{Template: controlplanev1.KubeadmControlPlaneTemplateResource{
			Spec: controlplanev1.KubeadmControlPlaneTemplateResourceSpec{KubeadmConfigSpec: bootstrapv1.KubeadmConfigSpec{
				// profiling=false (CIS hardening) also keeps apiServer.extraArgs, which the CRD refuses
				// empty, always present, so feature patches can append to it.
				ClusterConfiguration: bootstrapv1.ClusterConfiguration{APIServer: bootstrapv1.APIServer{
					ExtraArgs: []bootstrapv1.Arg{{Name: "profiling", Value: ptr.To("false")}},
				}},
				InitConfiguration: bootstrapv1.InitConfiguration{NodeRegistration: nodeRegistration()},
				JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: nodeRegistration()},
			}},
		}},
	}
	cpTmpl, err := toUnstructured(cp, ControlPlaneGroupVersion, "KubeadmControlPlaneTemplate")
	if err != nil {
		return nil, err
	}
	worker := &bootstrapv1.KubeadmConfigTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: classPlaceholder + "-worker"},
		Spec: bootstrapv1.KubeadmConfigTemplateSpec{Template: bootstrapv1.KubeadmConfigTemplateResource{
			Spec: bootstrapv1.KubeadmConfigSpec{JoinConfiguration: bootstrapv1.JoinConfiguration{NodeRegistration: nodeRegistration()}},
		}},
	}
	workerTmpl, err := toUnstructured(worker, BootstrapGroupVersion, "KubeadmConfigTemplate")
	if err != nil {
		return nil, err
	}
	for _, u := range []*unstructured.Unstructured{cpTmpl, workerTmpl} {
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		delete(u.Object, "status")
	}
	machineRef := ref(CAPOGroupVersion, "OpenStackMachineTemplate", classPlaceholder+"-machine")
	class := &clusterv1.ClusterClass{
		ObjectMeta: metav1.ObjectMeta{Name: classPlaceholder},
		Spec: clusterv1.ClusterClassSpec{
			Infrastructure: clusterv1.InfrastructureClass{TemplateRef: ref(CAPOGroupVersion, "OpenStackClusterTemplate", classPlaceholder+"-cluster")},
			ControlPlane: clusterv1.ControlPlaneClass{
				TemplateRef:           ref(ControlPlaneGroupVersion, "KubeadmControlPlaneTemplate", classPlaceholder+"-control-plane"),
				MachineInfrastructure: clusterv1.ControlPlaneClassMachineInfrastructureTemplate{TemplateRef: machineRef},
				HealthCheck:           controlPlaneHealthCheck(),
			},
			Workers: clusterv1.WorkersClass{MachineDeployments: []clusterv1.MachineDeploymentClass{{
				Class:          WorkerClass,
				Bootstrap:      clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: ref(BootstrapGroupVersion, "KubeadmConfigTemplate", classPlaceholder+"-worker")},
				Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: machineRef},
				HealthCheck:    workerHealthCheck(),
			}}},
			Variables: openStackVariables(),
			Patches:   openStackPatches(),
		},
	}
	cc, err := toUnstructured(class, clusterv1.GroupVersion.String(), "ClusterClass")
	if err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{clusterTmpl, machineTmpl, cpTmpl, workerTmpl, cc}, nil
}

// controlPlaneHealthCheck has the same thresholds as the workers'; KCP remediates one machine at a
// time and never below quorum.
func controlPlaneHealthCheck() clusterv1.ControlPlaneClassHealthCheck {
	w := workerHealthCheck()
	return clusterv1.ControlPlaneClassHealthCheck{Checks: clusterv1.ControlPlaneClassHealthCheckChecks{
		NodeStartupTimeoutSeconds: w.Checks.NodeStartupTimeoutSeconds,
		UnhealthyNodeConditions:   w.Checks.UnhealthyNodeConditions,
	}}
}
