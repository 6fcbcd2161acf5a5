package templates

//go:generate go run ./cmd/labelsdoc -o ../../docs/labels.md

import (
	"fmt"
	"sort"
	"strings"
)

// templateFields are the Magnum ClusterTemplate/Cluster fields the OpenStack flavor reads, for the
// documentation (they are not labels, so they are not in the registry).
var templateFields = []struct{ field, effect string }{
	{"image_id (template), image_id (node group)", "Variable `machineImage` (node groups: override) → OpenStackMachineTemplate `image`: `{id}` when it is a UUID, else `{filter: {name}}`. The Kubernetes version defaults to the `kube-vX.Y.Z` in the image name, and must match the image's own (its Glance property kube_version, else that name; see kube_tag)."},
	{"flavor_id (cluster, template), flavor_id (node group)", "Variable `machineFlavor` (node groups: override) → `flavorID` when it is a UUID or a number, else `flavor` (name)."},
	{"master_flavor_id (control-plane node group, cluster, template)", "Control-plane override of `machineFlavor`."},
	{"keypair (cluster), keypair_id (template)", "Variable `sshKeyName` → OpenStackMachineTemplate `sshKeyName`."},
	{"external_network_id", "Variable `externalNetwork` → OpenStackCluster `externalNetwork` (ID or name)."},
	{"fixed_network, fixed_subnet", "Variables `network`, `subnets` → OpenStackCluster `network`/`subnets` (ID or name). Without fixed_network CAPO creates network, subnet (fixed_subnet_cidr) and router (`managedSubnets`)."},
	{"dns_nameserver", "`managedSubnets[0].dnsNameservers` (one address or a comma-separated list) of the subnet CAPO creates."},
	{"master_lb_enabled", "Variable `apiServerLoadBalancer.enabled` → an Octavia load balancer in front of the API servers."},
	{"floating_ip_enabled", "Default of master_lb_floating_ip_enabled (the API server's floating IP). Nodes never get floating IPs."},
	{"http_proxy, https_proxy, no_proxy", "Variable `proxy` → a containerd systemd drop-in on every node (containerd restarted before kubeadm); no_proxy always adds localhost, the node, pod and service networks and the service domain."},
	{"network_driver", "Chooses which label holds the pod CIDR (calico_ipv4pool, cilium_ipv4pool, flannel_network_cidr). The CNI itself is not installed by the bridge."},
	{"node_labels, node_taints (node group, Magnum ≥ 1.14)", "Variables `nodeLabels` (kubelet `node-labels`) and `nodeTaints` (kubeadm `nodeRegistration.taints`) of the node group. Refused, naming the entry, on every flavor: bad label/taint syntax, effects other than NoSchedule, PreferNoSchedule and NoExecute, a key and effect given twice, kubernetes.io/k8s.io label keys other than node.kubernetes.io/ and kubelet.kubernetes.io/, cluster.x-k8s.io label keys other than node.cluster.x-k8s.io/, magnum.openstack.org keys, taint keys Kubernetes or Cluster API keep themselves (node.kubernetes.io/ except out-of-service, node.cloudprovider.kubernetes.io/, node-role.kubernetes.io/master), any on the control-plane group. The inmemory flavor (no kubelet) puts them on the MachineDeployment's Machines instead (metadata labels, topology `taints` with propagation Always), and the CAPI core manager copies them to the Nodes (`--additional-sync-machine-labels`, feature gate `MachineTaintPropagation`)."},
	{"node_count, min_node_count, max_node_count (node groups)", "MachineDeployment replicas, or the autoscaler annotations with auto_scaling_enabled."},
	{"docker_volume_size, volume_driver, tls_disabled, registry_enabled, insecure_registry, docker_storage_driver", "Not used: no separate container volume yet, CAPI clusters always use TLS, images come from container_infra_prefix."},
}

func mdEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

func anchorNames(as []Anchor) string {
	var out []string
	for _, a := range as {
		out = append(out, string(a))
	}
	return strings.Join(out, ", ")
}

func typeText(s LabelSpec) string {
	t := string(s.Type)
	switch {
	case len(s.Enum) > 0:
		var q []string
		for _, e := range s.Enum {
			if e == "" {
				e = `""`
			}
			q = append(q, e)
		}
		t += ": " + strings.Join(q, ", ")
	case s.Type == LabelInt:
		lo := 0
		if s.Min != nil {
			lo = *s.Min
		}
		if s.Max != nil {
			t += fmt.Sprintf(" %d–%d", lo, *s.Max)
		} else {
			t += fmt.Sprintf(" ≥ %d", lo)
		}
	}
	if s.Secret {
		t += " (secret)"
	}
	return t
}

func bridgeText(s LabelSpec) string {
	var parts []string
	for _, f := range s.Flavors {
		parts = append(parts, string(f))
	}
	if len(parts) > 0 {
		out := "**" + strings.Join(parts, ", ") + "**"
		if s.NodeGroup {
			out += " (node groups too)"
		}
		if s.AliasOf != "" {
			out += " (alias of `" + s.AliasOf + "`)"
		}
		if len(s.Honored) > 0 {
			out += "; other flavors honour " + honoredText(s) + " and report other values"
		}
		return out
	}
	if len(s.Honored) > 0 {
		return "honours " + honoredText(s) + "; other values reported"
	}
	return "reported as not implemented"
}

func honoredText(s LabelSpec) string {
	var q []string
	for _, h := range s.Honored {
		if h == "" {
			h = `""`
		}
		q = append(q, "`"+h+"`")
	}
	return strings.Join(q, ", ")
}

// LabelsMarkdown renders docs/labels.md from the registry.
func LabelsMarkdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	impl := map[Flavor]int{}
	honoredOnly, none := 0, 0
	for _, s := range Registry {
		for _, f := range s.Flavors {
			impl[f]++
		}
		if len(s.Flavors) == 0 {
			if len(s.Honored) > 0 {
				honoredOnly++
			} else {
				none++
			}
		}
	}
	w("# Magnum labels\n\n")
	w("<!-- Generated from internal/templates/registry.go by `go generate ./internal/templates`; do not edit. -->\n\n")
	w("Every label Magnum's Heat driver (`heat`), vexxhost's magnum-cluster-api (`magnum-cluster-api`) and\n")
	w("magnum-capi-helm (`magnum-capi-helm`) accept, and what magnum-capi-bridge does with it. A label the bridge\n")
	w("implements is validated when a cluster is created; an invalid value fails the create with a status reason\n")
	w("naming the label. A label it does not implement is validated by its type all the same (a boolean that is\n")
	w("not one fails the create naming the label); a valid value of it, or an unknown label, never fails a create:\n")
	w("the cluster's status reason lists it as not implemented. Empty values count as not set. The cluster's\n")
	w("Kubernetes version is checked against its image and the supported range before anything is built (`kube_tag`).\n\n")
	w("Flavors: `openstack` renders for Cluster API Provider OpenStack v0.14 (CAPO); `inmemory` is the test\n")
	w("flavor with fake machines.\n\n")
	w("%d labels: %d implemented for openstack, %d for inmemory, %d honoured only in their \"off\" value, %d not implemented.\n\n",
		len(Registry), impl[FlavorOpenStack], impl[FlavorInMemory], honoredOnly, none)
	for _, g := range LabelGroups {
		var specs []LabelSpec
		for _, s := range Registry {
			if s.Group == g {
				specs = append(specs, s)
			}
		}
		if len(specs) == 0 {
			continue
		}
		sort.SliceStable(specs, func(i, j int) bool {
			ii, ji := len(specs[i].Flavors) > 0, len(specs[j].Flavors) > 0
			if ii != ji {
				return ii
			}
			return specs[i].Name < specs[j].Name
		})
		w("## %s\n\n", g)
		w("| Label | Type | Default | Anchors | Bridge | Meaning | What the bridge renders |\n")
		w("|---|---|---|---|---|---|---|\n")
		for _, s := range specs {
			def := s.Default
			if def == "" {
				def = "—"
			} else {
				def = "`" + def + "`"
			}
			effect := s.Effect
			if effect == "" {
				effect = "—"
			}
			w("| `%s` | %s | %s | %s | %s | %s | %s |\n", s.Name, mdEscape(typeText(s)), mdEscape(def), anchorNames(s.Anchors),
				bridgeText(s), mdEscape(s.Description), mdEscape(effect))
		}
		w("\n")
	}
	w("## Cluster template and node group fields (openstack)\n\n")
	w("| Field | What the bridge renders |\n|---|---|\n")
	for _, f := range templateFields {
		w("| %s | %s |\n", mdEscape(f.field), mdEscape(f.effect))
	}
	w("\n## ClusterClass variables (openstack)\n\n")
	w("The OpenStack ClusterClass is the same for every cluster; everything above reaches the CAPO and kubeadm\n")
	w("templates through these variables (set on the Cluster, with control-plane and node-group overrides) and\n")
	w("the class's patches. The cloud credential is the Secret `<cluster>-cloud-config` (key `%s`, cloud `%s`).\n\n",
		CloudConfigSecretKey, CloudConfigCloudName)
	w("| Variable | Required | Type | Description |\n|---|---|---|---|\n")
	for _, v := range openStackVariables() {
		s := v.Schema.OpenAPIV3Schema
		req := "no"
		if v.Required != nil && *v.Required {
			req = "yes"
		}
		w("| `%s` | %s | %s | %s |\n", v.Name, req, s.Type, mdEscape(s.Description))
	}
	return b.String()
}
