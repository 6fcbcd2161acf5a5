package templates

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

// looksLikeUUID: Magnum keeps images, networks and subnets as the tenant typed them, a name or an
// ID; the mapping has no Glance or Neutron to ask, so a UUID is taken as an ID, anything else as a name.
func looksLikeUUID(s string) bool { return uuidRE.MatchString(s) }

// imageParam is CAPO's ImageParam for a Magnum image reference.
func imageParam(ref string) map[string]any {
	if looksLikeUUID(ref) {
		return map[string]any{"id": ref}
	}
	return map[string]any{"filter": map[string]any{"name": ref}}
}

// neutronParam is CAPO's NetworkParam/SubnetParam for a Magnum network or subnet reference.
func neutronParam(ref string) map[string]any { return imageParam(ref) }

var numericRE = regexp.MustCompile(`^[0-9]+$`)

// flavorParam: Nova flavor IDs are UUIDs or (on many clouds) small numbers; anything else is a name.
func flavorParam(ref string) map[string]any {
	if looksLikeUUID(ref) || numericRE.MatchString(ref) {
		return map[string]any{"id": ref}
	}
	return map[string]any{"name": ref}
}

// firstNonBlank is the first of s that is not only white space, trimmed (labels and rows may carry
// stray spaces).
func firstNonBlank(s ...string) string {
	for _, x := range s {
		if strings.TrimSpace(x) != "" {
			return strings.TrimSpace(x)
		}
	}
	return ""
}

func jsonValue(v any) (apiextensionsv1.JSON, error) {
	raw, err := json.Marshal(v)
	return apiextensionsv1.JSON{Raw: raw}, err
}

// varList collects Cluster variables; the result is sorted by name so renderings are stable.
type varList struct {
	vars []clusterv1.ClusterVariable
	err  error
}

func (l *varList) set(name string, v any) {
	if l.err != nil {
		return
	}
	j, err := jsonValue(v)
	if err != nil {
		l.err = fmt.Errorf("variable %s: %w", name, err)
		return
	}
	l.vars = append(l.vars, clusterv1.ClusterVariable{Name: name, Value: j})
}

func (l *varList) sorted() ([]clusterv1.ClusterVariable, error) {
	sort.Slice(l.vars, func(i, j int) bool { return l.vars[i].Name < l.vars[j].Name })
	return l.vars, l.err
}

// openStackExtras is what the OpenStack flavor adds to a rendering besides the objects.
type openStackExtras struct {
	serverGroups []ServerGroup
}

// groupLabels are a node group's labels over the cluster's: Magnum copies the cluster's labels into
// each node group unless the group was created with its own.
func groupLabels(cluster map[string]string, ng NodeGroup) map[string]string {
	out := make(map[string]string, len(cluster)+len(ng.Labels))
	for k, v := range cluster {
		out[k] = v
	}
	for k, v := range ng.Labels {
		out[k] = v
	}
	return out
}

// validateGroupLabels validates the node-group-scoped labels a node group sets itself.
func validateGroupLabels(ng NodeGroup) error {
	names := make([]string, 0, len(ng.Labels))
	for k := range ng.Labels {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		spec, ok := lookupLabel(k)
		if !ok || !spec.NodeGroup || !spec.Implemented(FlavorOpenStack) || strings.TrimSpace(ng.Labels[k]) == "" {
			continue
		}
		if err := validateValue(spec, ng.Labels[k]); err != nil {
			le := err.(*LabelError)
			le.Reason += " (node group " + ng.Name + ")"
			return le
		}
	}
	return nil
}

// rootVolume is CAPO's RootVolume from the boot_volume_* labels, or nil to boot from local disk.
func rootVolume(labels map[string]string) map[string]any {
	size := labelInt(labels, LabelBootVolumeSize)
	if size <= 0 {
		return nil
	}
	rv := map[string]any{"sizeGiB": size}
	if t := labelOr(labels, LabelBootVolumeType); t != "" {
		rv["type"] = t
	}
	if az := labelOr(labels, LabelBootVolumeAvailabilityZone); az != "" {
		rv["availabilityZone"] = map[string]any{"from": "Name", "name": az}
	}
	return rv
}

func serverGroupName(clusterName, group string) string { return clusterName + "-" + group }

// openStackTopology adds the OpenStack flavor's variables, overrides and failure domains to the
// Cluster built by clusterObject.
func openStackTopology(in Input, c *clusterv1.Cluster, topo topology, network clusterNetwork, version string) (openStackExtras, error) {
	var extras openStackExtras
	labels := in.Cluster.Labels
	tmpl := in.Template
	clusterName := c.Name
	var vars varList

	vars.set(VarIdentityRef, map[string]any{"name": CloudConfigSecretName(clusterName), "cloudName": CloudConfigCloudName})

	// Image and flavors.
	image := firstNonBlank(tmpl.ImageID)
	if image == "" {
		return extras, fmt.Errorf("the cluster template has no image")
	}
	vars.set(VarMachineImage, imageParam(image))
	workerFlavor := firstNonBlank(in.Cluster.FlavorID, tmpl.FlavorID)
	masterFlavor := firstNonBlank(topo.controlPlane.FlavorID, in.Cluster.MasterFlavorID, tmpl.MasterFlavorID, workerFlavor)
	if masterFlavor == "" {
		return extras, fmt.Errorf("neither the cluster, its template nor its control-plane node group names a flavor")
	}
	if workerFlavor == "" {
		workerFlavor = masterFlavor
	}
	vars.set(VarMachineFlavor, flavorParam(workerFlavor))
	if key := firstNonBlank(in.Cluster.Keypair, tmpl.KeypairID); key != "" {
		vars.set(VarSSHKeyName, key)
	}

	// Networks.
	if tmpl.ExternalNetworkID != "" {
		vars.set(VarExternalNetwork, neutronParam(tmpl.ExternalNetworkID))
	}
	dns, err := dnsNameservers(tmpl.DNSNameserver)
	if err != nil {
		return extras, err
	}
	if tmpl.FixedNetwork != "" {
		vars.set(VarNetwork, neutronParam(tmpl.FixedNetwork))
		if tmpl.FixedSubnet != "" {
			vars.set(VarSubnets, []any{neutronParam(tmpl.FixedSubnet)})
		}
	} else {
		if tmpl.FixedSubnet != "" {
			return extras, fmt.Errorf("the cluster template names fixed_subnet %q without its fixed_network", tmpl.FixedSubnet)
		}
		subnet := map[string]any{"cidr": network.Node.String()}
		if len(dns) > 0 {
			subnet["dnsNameservers"] = dns
		}
		vars.set(VarManagedSubnets, []any{subnet})
	}
	if labelSet(labels, LabelExtraNetworkNames) {
		ports := []any{map[string]any{}} // the cluster network first, as CAPO's default port would be
		for _, n := range strings.FieldsFunc(labelOr(labels, LabelExtraNetworkNames), func(r rune) bool { return r == ',' || r == ' ' }) {
			ports = append(ports, map[string]any{"network": neutronParam(n)})
		}
		vars.set(VarPorts, ports)
	}

	// API server endpoint.
	lb, err := apiServerLoadBalancer(in)
	if err != nil {
		return extras, err
	}
	vars.set(VarAPIServerLoadBalancer, lb)
	fip := tmpl.FloatingIPEnabled
	if labelSet(labels, LabelMasterLBFloatingIPEnabled) {
		fip = LabelEnabled(labels, LabelMasterLBFloatingIPEnabled)
	}
	if !fip && !tmpl.MasterLBEnabled {
		if labelSet(labels, LabelMasterLBFloatingIPEnabled) {
			return extras, &LabelError{Label: LabelMasterLBFloatingIPEnabled, Value: labels[LabelMasterLBFloatingIPEnabled],
				Reason: "the cluster template has no master load balancer, so the API server needs a floating IP"}
		}
		return extras, fmt.Errorf("the cluster template disables floating IPs and has no master load balancer: the API server would be unreachable (enable master_lb_enabled or floating_ip_enabled)")
	}
	vars.set(VarDisableAPIServerFloatingIP, !fip)
	if ip := labelOr(labels, LabelAPIServerFloatingIP); ip != "" {
		if !fip {
			return extras, &LabelError{Label: LabelAPIServerFloatingIP, Value: ip, Reason: "the API server has no floating IP (master_lb_floating_ip_enabled is false)"}
		}
		vars.set(VarAPIServerFloatingIP, ip)
	}

	// Placement.
	if labelSet(labels, LabelControlPlaneAvailabilityZones) {
		vars.set(VarControlPlaneAvailabilityZones, splitList(labelOr(labels, LabelControlPlaneAvailabilityZones)))
	} else if az := labelOr(labels, LabelAvailabilityZone); az != "" {
		vars.set(VarControlPlaneAvailabilityZones, []string{az})
	}
	if rv := rootVolume(labels); rv != nil {
		vars.set(VarRootVolume, rv)
	}

	// kubeadm.
	if prefix := labelOr(labels, LabelContainerInfraPrefix); prefix != "" {
		vars.set(VarImageRepository, strings.TrimSuffix(prefix, "/"))
	}
	if labelSet(labels, LabelAPIServerCertSANs) {
		vars.set(VarAPIServerCertSANs, splitList(labelOr(labels, LabelAPIServerCertSANs)))
	}
	if v := labelOr(labels, LabelAPIServerTLSCipherSuites); v != "" {
		vars.set(VarAPIServerTLSCipherSuites, strings.Join(splitList(v), ","))
	}
	if v := labelOr(labels, LabelKubeletTLSCipherSuites); v != "" {
		vars.set(VarKubeletTLSCipherSuites, strings.Join(splitList(v), ","))
	}
	if labelSet(labels, LabelAdmissionControlList) {
		plugins, err := admissionPlugins(labelOr(labels, LabelAdmissionControlList), version)
		if err != nil {
			return extras, err
		}
		vars.set(VarEnableAdmissionPlugins, plugins)
	}
	if issuer := labelOr(labels, LabelOIDCIssuerURL); issuer != "" {
		oidc := map[string]any{
			"issuerURL": issuer, "clientID": labelOr(labels, LabelOIDCClientID),
			"usernameClaim": labelOr(labels, LabelOIDCUsernameClaim), "usernamePrefix": labelOr(labels, LabelOIDCUsernamePrefix),
		}
		for field, label := range map[string]string{"groupsClaim": LabelOIDCGroupsClaim, "groupsPrefix": LabelOIDCGroupsPrefix} {
			if v := labelOr(labels, label); v != "" {
				oidc[field] = v
			}
		}
		vars.set(VarOpenIDConnect, oidc)
	}
	if LabelEnabled(labels, LabelAuditLogEnabled) {
		vars.set(VarAuditLog, map[string]any{
			"maxAge": labelInt(labels, LabelAuditLogMaxAge), "maxBackup": labelInt(labels, LabelAuditLogMaxBackup),
			"maxSize": labelInt(labels, LabelAuditLogMaxSize),
		})
	}
	if proxy, err := proxySettings(tmpl, network); err != nil {
		return extras, err
	} else if proxy != nil {
		vars.set(VarProxy, proxy)
	}
	if c.Spec.Topology.Variables, err = vars.sorted(); err != nil {
		return extras, err
	}

	// Control plane: its flavor and server group.
	autoHeal := LabelEnabled(labels, LabelAutoHealingEnabled)
	var cpVars varList
	cpVars.set(VarMachineFlavor, flavorParam(masterFlavor))
	policy := labelOr(labels, LabelServerGroupPolicies)
	if policy != "none" {
		name := serverGroupName(clusterName, "control-plane")
		cpVars.set(VarServerGroup, map[string]any{"filter": map[string]any{"name": name}})
		extras.serverGroups = append(extras.serverGroups, ServerGroup{Name: name, Policy: policy})
	}
	if c.Spec.Topology.ControlPlane.Variables.Overrides, err = cpVars.sorted(); err != nil {
		return extras, err
	}
	if !autoHeal {
		c.Spec.Topology.ControlPlane.HealthCheck.Enabled = ptr.To(false)
	}

	// Node groups.
	for i := range c.Spec.Topology.Workers.MachineDeployments {
		md := &c.Spec.Topology.Workers.MachineDeployments[i]
		ng := topo.workers[i]
		if err := validateGroupLabels(ng); err != nil {
			return extras, err
		}
		gl := groupLabels(labels, ng)
		if az := labelOr(gl, LabelAvailabilityZone); az != "" {
			md.FailureDomain = az
		}
		var mdVars varList
		if f := firstNonBlank(ng.FlavorID); f != "" && f != workerFlavor {
			mdVars.set(VarMachineFlavor, flavorParam(f))
		}
		if img := firstNonBlank(ng.ImageID); img != "" && img != image {
			mdVars.set(VarMachineImage, imageParam(img))
		}
		if rv, base := rootVolume(gl), rootVolume(labels); !jsonEqual(rv, base) {
			if rv == nil {
				return extras, &LabelError{Label: LabelBootVolumeSize, Value: ng.Labels[LabelBootVolumeSize],
					Reason: "node group " + ng.Name + " cannot boot from local disk while the cluster boots from volume"}
			}
			mdVars.set(VarRootVolume, rv)
		}
		if p := labelOr(gl, LabelServerGroupPolicies); p != "none" {
			name := serverGroupName(clusterName, md.Name)
			mdVars.set(VarServerGroup, map[string]any{"filter": map[string]any{"name": name}})
			extras.serverGroups = append(extras.serverGroups, ServerGroup{Name: name, Policy: p})
		}
		// Validated by clusterObject, like every flavor's node labels and taints.
		if nl := kubeletNodeLabels(ng.NodeLabels); nl != "" {
			mdVars.set(VarNodeLabels, nl)
		}
		if len(ng.NodeTaints) > 0 {
			mdVars.set(VarNodeTaints, kubeadmTaints(ng.NodeTaints))
		}
		if md.Variables.Overrides, err = mdVars.sorted(); err != nil {
			return extras, err
		}
		if !autoHeal {
			md.HealthCheck.Enabled = ptr.To(false)
		}
	}
	sort.Slice(extras.serverGroups, func(i, j int) bool { return extras.serverGroups[i].Name < extras.serverGroups[j].Name })
	return extras, nil
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// apiServerLoadBalancer is the apiServerLoadBalancer variable from the template's master_lb_enabled
// and the Octavia labels; those labels need the load balancer.
func apiServerLoadBalancer(in Input) (map[string]any, error) {
	labels := in.Cluster.Labels
	lb := map[string]any{"enabled": in.Template.MasterLBEnabled}
	fields := []struct{ label, field string }{
		{LabelMasterLBAllowedCIDRs, "allowedCIDRs"}, {LabelOctaviaProvider, "provider"},
		{LabelAPIServerLBFlavor, "flavor"}, {LabelAPIServerLBAvailabilityZone, "availabilityZone"},
	}
	for _, f := range fields {
		if !labelSet(labels, f.label) {
			continue
		}
		v := labelOr(labels, f.label)
		if !in.Template.MasterLBEnabled {
			return nil, &LabelError{Label: f.label, Value: v, Reason: "the cluster template has no master load balancer (master_lb_enabled is false)"}
		}
		if f.field == "allowedCIDRs" {
			var cidrs []string
			for _, c := range splitList(v) {
				p, _ := parseCIDR(c)
				cidrs = append(cidrs, p.String())
			}
			lb[f.field] = cidrs
			continue
		}
		lb[f.field] = v
	}
	return lb, nil
}

// dnsNameservers parses the template's dns_nameserver (one address, or a comma-separated list).
func dnsNameservers(v string) ([]string, error) {
	var out []string
	for _, s := range splitList(v) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("the cluster template's dns_nameserver %q is not an IP address", s)
		}
		out = append(out, a.String())
	}
	return out, nil
}

// admissionPlugins is enable-admission-plugins: NodeRestriction (kubeadm's default, which setting
// the flag would otherwise drop) and the label's plugins, each once, checked against the version.
func admissionPlugins(list, version string) (string, error) {
	minor := 0
	if v, err := ParseVersion(version); err == nil {
		minor = int(v.Minor())
	}
	out := []string{"NodeRestriction"}
	seen := map[string]bool{"NodeRestriction": true}
	for _, p := range splitList(list) {
		if min := admissionPluginMinMinor[p]; min > minor {
			return "", &LabelError{Label: LabelAdmissionControlList, Value: list,
				Reason: fmt.Sprintf("admission plugin %s needs Kubernetes 1.%d or newer (the cluster runs %s)", p, min, version)}
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return strings.Join(out, ","), nil
}

// proxySettings is the proxy variable from the template's http_proxy, https_proxy and no_proxy.
// no_proxy always covers the node, pod and service networks and the cluster's own names, so
// in-cluster traffic never goes through the proxy.
func proxySettings(tmpl Template, network clusterNetwork) (map[string]any, error) {
	if tmpl.HTTPProxy == "" && tmpl.HTTPSProxy == "" {
		return nil, nil
	}
	p := map[string]any{}
	for _, f := range []struct{ field, name, value string }{
		{"httpProxy", "http_proxy", tmpl.HTTPProxy}, {"httpsProxy", "https_proxy", tmpl.HTTPSProxy},
	} {
		if f.value == "" {
			continue
		}
		u, err := url.Parse(f.value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(f.value, "\"\\\n") {
			return nil, fmt.Errorf("the cluster template's %s %q is not an http:// or https:// URL", f.name, f.value)
		}
		p[f.field] = f.value
	}
	noProxy := []string{"localhost", "127.0.0.1", ".svc", "." + network.ServiceDomain, network.Pods.String(), network.Services.String()}
	if network.Node.IsValid() {
		noProxy = append(noProxy, network.Node.String())
	}
	for _, s := range splitList(tmpl.NoProxy) {
		if strings.ContainsAny(s, "\"\\\n ") {
			return nil, fmt.Errorf("the cluster template's no_proxy entry %q is not a host, domain or CIDR", s)
		}
		noProxy = append(noProxy, s)
	}
	p["noProxy"] = strings.Join(dedupe(noProxy), ",")
	return p, nil
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
