package fakeopenstack

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
)

// Simulated Neutron: the resources CAPO v0.14 creates and looks up (pkg/cloud/services/networking):
// networks, subnets, routers and their interfaces, security groups and rules, ports and floating
// IPs, with tags (PUT …/tags, the standard-attr-tag extension's ReplaceAll). Trunks are not
// simulated: CAPO only asks for them when a machine sets trunk: true, after checking the
// extensions list, which stays empty (Horizon reads it too). The seed's networks and subnets are
// shared by every project, as before.

// neutronKinds maps each simulated collection to the key of its single-object documents.
var neutronKinds = map[string]string{
	"networks": "network", "subnets": "subnet", "routers": "router", "ports": "port",
	"security-groups": "security_group", "security-group-rules": "security_group_rule",
	"floatingips": "floatingip",
}

func neutronError(w http.ResponseWriter, status int, typ, message string) {
	writeJSON(w, status, map[string]any{"NeutronError": map[string]any{"type": typ, "message": message, "detail": ""}})
}

func (c *Cloud) addNeutronRoutes(mux *http.ServeMux) {
	for coll := range neutronKinds {
		if coll != "networks" && coll != "subnets" { // the seed routes list and get these two
			mux.HandleFunc("GET /v2.0/"+coll, c.neutronList(coll))
			mux.HandleFunc("GET /v2.0/"+coll+"/{id}", c.neutronGet(coll))
		}
		mux.HandleFunc("POST /v2.0/"+coll, c.neutronCreate(coll))
		mux.HandleFunc("PUT /v2.0/"+coll+"/{id}", c.neutronUpdate(coll))
		mux.HandleFunc("DELETE /v2.0/"+coll+"/{id}", c.neutronDelete(coll))
		mux.HandleFunc("PUT /v2.0/"+coll+"/{id}/tags", c.neutronReplaceTags(coll))
	}
	mux.HandleFunc("PUT /v2.0/routers/{id}/add_router_interface", c.routerInterface(true))
	mux.HandleFunc("PUT /v2.0/routers/{id}/remove_router_interface", c.routerInterface(false))
}

// visible: a project sees its own resources, shared and external networks and the subnets of those.
func (c *Cloud) visibleLocked(coll string, d doc, project string) bool {
	if str(d, "project_id") == project {
		return true
	}
	switch coll {
	case "networks":
		return d["shared"] == true || d["router:external"] == true
	case "subnets":
		if n, ok := c.networkLocked(str(d, "network_id")); ok {
			return n["shared"] == true || n["router:external"] == true
		}
	}
	return false
}

// networkLocked finds a network among the seed and the simulated ones.
func (c *Cloud) networkLocked(id string) (doc, bool) {
	for _, n := range c.seed.Networks {
		if n.ID == id {
			return c.networkDoc(n), true
		}
	}
	d, ok := c.sim.coll("networks").docs[id]
	return d, ok
}

func (c *Cloud) subnetLocked(id string) (doc, bool) {
	for _, s := range c.seed.Subnets {
		if s.ID == id {
			return c.subnetDoc(s), true
		}
	}
	d, ok := c.sim.coll("subnets").docs[id]
	return d, ok
}

// subnetsOfLocked lists a network's subnet ids, seed first.
func (c *Cloud) subnetsOfLocked(networkID string) []string {
	ids := c.subnetIDs(networkID)
	for _, s := range c.sim.coll("subnets").all() {
		if str(s, "network_id") == networkID {
			ids = append(ids, str(s, "id"))
		}
	}
	return ids
}

// renderLocked fills in the attributes derived from other resources.
func (c *Cloud) renderLocked(coll string, d doc) doc {
	out := cloneDoc(d)
	switch coll {
	case "networks":
		out["subnets"] = c.subnetsOfLocked(str(d, "id"))
	case "security-groups":
		rules := []any{}
		for _, r := range c.sim.coll("security-group-rules").all() {
			if str(r, "security_group_id") == str(d, "id") {
				rules = append(rules, cloneDoc(r))
			}
		}
		out["security_group_rules"] = rules
	}
	return out
}

// simulatedNetworkDocs is what the seed routes add for a caller: its networks or subnets.
func (c *Cloud) simulatedDocs(coll string, caller Caller) []doc {
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	var out []doc
	for _, d := range c.sim.coll(coll).all() {
		if c.visibleLocked(coll, d, caller.ProjectID) {
			out = append(out, c.renderLocked(coll, d))
		}
	}
	return out
}

func (c *Cloud) simulatedDoc(coll, id string, caller Caller) (doc, bool) {
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	d, ok := c.sim.coll(coll).docs[id]
	if !ok || !c.visibleLocked(coll, d, caller.ProjectID) {
		return nil, false
	}
	return c.renderLocked(coll, d), true
}

func notFoundMessage(coll, id string) (string, string) {
	kind := map[string]string{
		"networks": "Network", "subnets": "Subnet", "routers": "Router", "ports": "Port",
		"security-groups": "Security group", "security-group-rules": "Security group rule",
		"floatingips": "Floating IP",
	}[coll]
	typ := map[string]string{
		"networks": "NetworkNotFound", "subnets": "SubnetNotFound", "routers": "RouterNotFound",
		"ports": "PortNotFound", "security-groups": "SecurityGroupNotFound",
		"security-group-rules": "SecurityGroupRuleNotFound", "floatingips": "FloatingIPNotFound",
	}[coll]
	return fmt.Sprintf("%s %s could not be found.", kind, id), typ
}

func (c *Cloud) neutronList(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		docs := []doc{}
		for _, d := range c.simulatedDocs(coll, caller) {
			if matchesFilters(d, r.URL.Query()) {
				docs = append(docs, d)
			}
		}
		if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > 0 && len(docs) > n {
			docs = docs[:n]
		}
		writeJSON(w, http.StatusOK, map[string]any{listKey(coll): docs})
	}
}

// listKey is the list key of a collection: Neutron names it like the URL with "_" for "-".
func listKey(coll string) string {
	out := []byte(coll)
	for i, b := range out {
		if b == '-' {
			out[i] = '_'
		}
	}
	return string(out)
}

func (c *Cloud) neutronGet(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		id := r.PathValue("id")
		d, found := c.simulatedDoc(coll, id, caller)
		if !found {
			msg, typ := notFoundMessage(coll, id)
			neutronError(w, http.StatusNotFound, typ, msg)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{neutronKinds[coll]: d})
	}
}

func (c *Cloud) neutronCreate(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		in, msg := decodeObject(r, neutronKinds[coll])
		if msg == "" {
			msg = wrongTypes(in)
		}
		if msg != "" {
			neutronError(w, http.StatusBadRequest, "HTTPBadRequest", msg)
			return
		}
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		d, status, typ, msg := c.createNeutronLocked(coll, in, caller)
		if msg != "" {
			neutronError(w, status, typ, msg)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{neutronKinds[coll]: c.renderLocked(coll, d)})
	}
}

// base fills the attributes every Neutron resource has.
func base(in doc, project string) doc {
	d := doc{"id": newID(), "name": "", "description": "", "tags": []string{},
		"project_id": project, "tenant_id": project, "created_at": now(), "updated_at": now(),
		"revision_number": 1}
	for k, v := range in {
		if k != "id" && k != "tenant_id" && k != "project_id" {
			d[k] = v
		}
	}
	if d["tags"] == nil {
		d["tags"] = []string{}
	}
	return d
}

func setDefault(d doc, key string, v any) {
	if _, ok := d[key]; !ok || d[key] == nil {
		d[key] = v
	}
}

func (c *Cloud) createNeutronLocked(coll string, in doc, caller Caller) (doc, int, string, string) {
	project := caller.ProjectID
	d := base(in, project)
	bad := func(msg string) (doc, int, string, string) {
		return nil, http.StatusBadRequest, "HTTPBadRequest", msg
	}
	switch coll {
	case "networks":
		setDefault(d, "admin_state_up", true)
		setDefault(d, "port_security_enabled", true)
		setDefault(d, "mtu", 1450)
		setDefault(d, "shared", false)
		d["router:external"], d["is_default"], d["status"] = false, false, "ACTIVE"
		d["availability_zones"], d["availability_zone_hints"] = []string{FakeAvailabilityZone}, []string{}
		d["ipv4_address_scope"], d["ipv6_address_scope"] = nil, nil
	case "subnets":
		network, ok := c.networkLocked(str(d, "network_id"))
		if !ok || !c.visibleLocked("networks", network, project) {
			return nil, http.StatusNotFound, "NetworkNotFound", fmt.Sprintf("Network %s could not be found.", str(d, "network_id"))
		}
		if str(network, "project_id") != project {
			return nil, http.StatusForbidden, "HTTPForbidden", "(rule:create_subnet and (rule:create_subnet:segment_id and rule:create_subnet:service_types)) is disallowed by policy"
		}
		prefix, err := netip.ParsePrefix(str(d, "cidr"))
		if err != nil {
			return bad(fmt.Sprintf("Invalid input for cidr. Reason: '%v' is not a valid IP subnet.", d["cidr"]))
		}
		prefix = prefix.Masked()
		d["cidr"] = prefix.String()
		version := 4
		if prefix.Addr().Is6() {
			version = 6
		}
		setDefault(d, "ip_version", version)
		gw := prefix.Addr().Next()
		setDefault(d, "gateway_ip", gw.String())
		setDefault(d, "enable_dhcp", true)
		setDefault(d, "dns_nameservers", []string{})
		setDefault(d, "host_routes", []any{})
		setDefault(d, "allocation_pools", []any{map[string]any{"start": gw.Next().String(), "end": lastHost(prefix)}})
		d["ipv6_ra_mode"], d["ipv6_address_mode"], d["subnetpool_id"], d["service_types"] = nil, nil, nil, []string{}
		d["revision_number"] = 0
	case "routers":
		d["status"], d["routes"] = "ACTIVE", []any{}
		setDefault(d, "admin_state_up", true)
		gwInfo, err := c.gatewayInfoLocked(d["external_gateway_info"], project)
		if err != "" {
			return bad(err)
		}
		d["external_gateway_info"] = gwInfo
	case "ports":
		if msg := c.fillPortLocked(d, project); msg != "" {
			if msg == "notfound" {
				return nil, http.StatusNotFound, "NetworkNotFound", fmt.Sprintf("Network %s could not be found.", str(d, "network_id"))
			}
			return nil, http.StatusConflict, "IpAddressGenerationFailure", msg
		}
	case "security-groups":
		d["stateful"] = true
		d = cloneDoc(d)
		c.sim.coll(coll).put(d)
		for _, ether := range []string{"IPv4", "IPv6"} {
			c.sim.coll("security-group-rules").put(ruleDoc(doc{"security_group_id": d["id"], "direction": "egress", "ethertype": ether}, project))
		}
		return d, 0, "", ""
	case "security-group-rules":
		sg, ok := c.sim.coll("security-groups").docs[str(d, "security_group_id")]
		if !ok || str(sg, "project_id") != project {
			return nil, http.StatusNotFound, "SecurityGroupNotFound", fmt.Sprintf("Security group %s does not exist", str(d, "security_group_id"))
		}
		if dir := str(d, "direction"); dir != "ingress" && dir != "egress" {
			return bad(fmt.Sprintf("Invalid input for direction. Reason: %v is not in valid_values.", d["direction"]))
		}
		if rg := str(d, "remote_group_id"); rg != "" {
			if g, ok := c.sim.coll("security-groups").docs[rg]; !ok || str(g, "project_id") != project {
				return nil, http.StatusNotFound, "SecurityGroupNotFound", fmt.Sprintf("Security group %s does not exist", rg)
			}
		}
		d = ruleDoc(in, project)
		for _, existing := range c.sim.coll(coll).all() {
			if sameRule(existing, d) {
				return nil, http.StatusConflict, "SecurityGroupRuleExists", fmt.Sprintf("Security group rule already exists. Rule id is %s.", str(existing, "id"))
			}
		}
	case "floatingips":
		network, ok := c.networkLocked(str(d, "floating_network_id"))
		if !ok || network["router:external"] != true {
			return nil, http.StatusNotFound, "ExternalNetworkNotFound", fmt.Sprintf("External network %s could not be found.", str(d, "floating_network_id"))
		}
		subnets := c.subnetsOfLocked(str(network, "id"))
		if len(subnets) == 0 {
			return nil, http.StatusConflict, "ExternalIpAddressExhausted", "Unable to find any IP address on external network."
		}
		if str(d, "floating_ip_address") == "" {
			sn, _ := c.subnetLocked(subnets[0])
			ip, err := c.sim.allocateIP(subnets[0], str(sn, "cidr"), c.ipTakenLocked(subnets[0]))
			if err != nil {
				return nil, http.StatusConflict, "ExternalIpAddressExhausted", err.Error()
			}
			d["floating_ip_address"] = ip
		} else if c.ipTakenLocked(subnets[0])(str(d, "floating_ip_address")) {
			return nil, http.StatusConflict, "IpAddressInUse", fmt.Sprintf("Unable to complete operation for network %s. The IP address %s is in use.", str(network, "id"), str(d, "floating_ip_address"))
		}
		d["floating_network_id"] = network["id"]
		setDefault(d, "port_id", nil)
		d["fixed_ip_address"], d["router_id"], d["status"], d["port_details"] = nil, nil, "DOWN", nil
		if pid := str(d, "port_id"); pid != "" {
			if msg := c.associateLocked(d, pid, project); msg != "" {
				return nil, http.StatusNotFound, "PortNotFound", msg
			}
		}
	}
	d = cloneDoc(d)
	c.sim.coll(coll).put(d)
	return d, 0, "", ""
}

func lastHost(p netip.Prefix) string {
	addr := p.Addr()
	last := addr
	for a := addr; p.Contains(a); a = a.Next() {
		last = a
		if !a.Next().IsValid() {
			break
		}
	}
	if p.Addr().Is4() {
		return prevAddr(last).String()
	}
	return last.String()
}

func prevAddr(a netip.Addr) netip.Addr { return a.Prev() }

func ruleDoc(in doc, project string) doc {
	d := base(in, project)
	delete(d, "name")
	setDefault(d, "ethertype", "IPv4")
	for _, k := range []string{"protocol", "port_range_min", "port_range_max", "remote_ip_prefix", "remote_group_id", "remote_address_group_id"} {
		setDefault(d, k, nil)
	}
	return cloneDoc(d)
}

func sameRule(a, b doc) bool {
	for _, k := range []string{"security_group_id", "direction", "ethertype", "protocol", "port_range_min", "port_range_max", "remote_ip_prefix", "remote_group_id"} {
		if fmt.Sprint(a[k]) != fmt.Sprint(b[k]) {
			return false
		}
	}
	return true
}

// ipTakenLocked reports, for one subnet, whether an address is held by a port, a router's gateway
// or a floating IP. As in Neutron, an address is unique within its subnet only: two projects'
// networks may both be 10.6.0.0/24 (CAPO's default node CIDR), each with its own 10.6.0.1.
func (c *Cloud) ipTakenLocked(subnetID string) func(ip string) bool {
	return func(ip string) bool {
		for _, p := range c.sim.coll("ports").docs {
			for _, f := range fixedIPs(p) {
				if f["ip_address"] == ip && f["subnet_id"] == subnetID {
					return true
				}
			}
		}
		for _, f := range c.sim.coll("floatingips").docs {
			if str(f, "floating_ip_address") == ip && slices.Contains(c.subnetsOfLocked(str(f, "floating_network_id")), subnetID) {
				return true
			}
		}
		for _, r := range c.sim.coll("routers").docs {
			if gw, ok := r["external_gateway_info"].(map[string]any); ok {
				for _, f := range anyMaps(gw["external_fixed_ips"]) {
					if f["ip_address"] == ip && f["subnet_id"] == subnetID {
						return true
					}
				}
			}
		}
		return false
	}
}

func anyMaps(v any) []map[string]any {
	var out []map[string]any
	switch l := v.(type) {
	case []any:
		for _, x := range l {
			if m, ok := x.(map[string]any); ok {
				out = append(out, m)
			}
		}
	case []map[string]any:
		out = l
	}
	return out
}

func fixedIPs(p doc) []map[string]any { return anyMaps(p["fixed_ips"]) }

// gatewayInfoLocked completes a router's external_gateway_info with an address on the external
// network, as Neutron does.
func (c *Cloud) gatewayInfoLocked(v any, project string) (any, string) {
	in, ok := v.(map[string]any)
	if !ok || str(in, "network_id") == "" {
		return nil, ""
	}
	network, ok := c.networkLocked(str(in, "network_id"))
	if !ok || network["router:external"] != true {
		return nil, fmt.Sprintf("Network %s is not an external network", str(in, "network_id"))
	}
	out := map[string]any{"network_id": network["id"], "enable_snat": true, "external_fixed_ips": []any{}}
	if snat, ok := in["enable_snat"].(bool); ok {
		out["enable_snat"] = snat
	}
	if subnets := c.subnetsOfLocked(str(network, "id")); len(subnets) > 0 {
		sn, _ := c.subnetLocked(subnets[0])
		ip, err := c.sim.allocateIP(subnets[0], str(sn, "cidr"), c.ipTakenLocked(subnets[0]))
		if err != nil {
			return nil, err.Error()
		}
		out["external_fixed_ips"] = []any{map[string]any{"subnet_id": subnets[0], "ip_address": ip}}
	}
	return out, ""
}

// fillPortLocked validates a port's network and security groups and gives it addresses.
func (c *Cloud) fillPortLocked(d doc, project string) string {
	network, ok := c.networkLocked(str(d, "network_id"))
	if !ok || !c.visibleLocked("networks", network, project) {
		return "notfound"
	}
	setDefault(d, "admin_state_up", true)
	setDefault(d, "mac_address", newMAC())
	setDefault(d, "device_id", "")
	setDefault(d, "device_owner", "")
	setDefault(d, "allowed_address_pairs", []any{})
	setDefault(d, "binding:vnic_type", "normal")
	setDefault(d, "binding:host_id", "")
	setDefault(d, "binding:profile", map[string]any{})
	setDefault(d, "port_security_enabled", network["port_security_enabled"] != false)
	setDefault(d, "security_groups", []string{})
	setDefault(d, "propagate_uplink_status", false)
	d["status"], d["binding:vif_type"] = "DOWN", "unbound"
	for _, sg := range strList(d["security_groups"]) {
		if g, ok := c.sim.coll("security-groups").docs[sg]; !ok || str(g, "project_id") != project {
			return fmt.Sprintf("Security group %s does not exist", sg)
		}
	}
	subnets := c.subnetsOfLocked(str(network, "id"))
	requested := anyMaps(d["fixed_ips"])
	if d["fixed_ips"] == nil {
		if len(subnets) > 0 {
			requested = []map[string]any{{"subnet_id": subnets[0]}}
		}
	}
	var out []any
	for _, f := range requested {
		subnetID := str(f, "subnet_id")
		if subnetID == "" && len(subnets) > 0 {
			subnetID = subnets[0]
		}
		if !slices.Contains(subnets, subnetID) {
			return fmt.Sprintf("Invalid input for operation: Failed to create port on network %s, because fixed_ips included invalid subnet %s.", str(network, "id"), subnetID)
		}
		sn, _ := c.subnetLocked(subnetID)
		ip := str(f, "ip_address")
		if ip == "" {
			var err error
			if ip, err = c.sim.allocateIP(subnetID, str(sn, "cidr"), c.ipTakenLocked(subnetID)); err != nil {
				return err.Error()
			}
		} else if c.ipTakenLocked(subnetID)(ip) {
			return fmt.Sprintf("IP address %s already allocated in subnet %s", ip, subnetID)
		}
		out = append(out, map[string]any{"subnet_id": subnetID, "ip_address": ip})
	}
	if out == nil {
		out = []any{}
	}
	d["fixed_ips"] = out
	return ""
}

// associateLocked points a floating IP at a port (and its first address).
func (c *Cloud) associateLocked(fip doc, portID, project string) string {
	p, ok := c.sim.coll("ports").docs[portID]
	if !ok || str(p, "project_id") != project {
		return fmt.Sprintf("Port %s could not be found.", portID)
	}
	fip["port_id"], fip["status"] = portID, "ACTIVE"
	if ips := fixedIPs(p); len(ips) > 0 {
		fip["fixed_ip_address"] = ips[0]["ip_address"]
	}
	for _, r := range c.sim.coll("routers").all() {
		for _, rp := range c.sim.coll("ports").all() {
			if str(rp, "device_id") == str(r, "id") && str(rp, "network_id") == str(p, "network_id") {
				fip["router_id"] = r["id"]
			}
		}
	}
	return ""
}

func (c *Cloud) ownLocked(coll, id, project string) (doc, bool) {
	d, ok := c.sim.coll(coll).docs[id]
	if !ok || str(d, "project_id") != project {
		return nil, false
	}
	return d, true
}

func (c *Cloud) neutronUpdate(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		in, msg := decodeObject(r, neutronKinds[coll])
		if msg == "" {
			msg = wrongTypes(in)
		}
		if msg != "" {
			neutronError(w, http.StatusBadRequest, "HTTPBadRequest", msg)
			return
		}
		id := r.PathValue("id")
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		d, found := c.ownLocked(coll, id, caller.ProjectID)
		if !found {
			msg, typ := notFoundMessage(coll, id)
			neutronError(w, http.StatusNotFound, typ, msg)
			return
		}
		d = cloneDoc(d)
		if _, ok := in["port_id"]; coll == "floatingips" && !ok {
			// Neutron's API reference: "To disassociate the floating IP, port_id should be set
			// to null or omitted from the request" — and gophercloud omits a nil PortID, so this
			// is how CAPO disassociates.
			in["port_id"] = nil
		}
		for k, v := range in {
			switch {
			case k == "id" || k == "project_id" || k == "tenant_id" || k == "fixed_ips" && coll == "ports":
				continue
			case coll == "floatingips" && k == "port_id":
				if v == nil {
					d["port_id"], d["fixed_ip_address"], d["router_id"], d["status"] = nil, nil, nil, "DOWN"
				} else if msg := c.associateLocked(d, fmt.Sprint(v), caller.ProjectID); msg != "" {
					neutronError(w, http.StatusNotFound, "PortNotFound", msg)
					return
				}
			case coll == "routers" && k == "external_gateway_info":
				gw, msg := c.gatewayInfoLocked(v, caller.ProjectID)
				if msg != "" {
					neutronError(w, http.StatusBadRequest, "HTTPBadRequest", msg)
					return
				}
				d[k] = gw
			default:
				d[k] = v
			}
		}
		d["updated_at"] = now()
		d["revision_number"] = toInt(d["revision_number"]) + 1
		d = cloneDoc(d)
		c.sim.coll(coll).put(d)
		writeJSON(w, http.StatusOK, map[string]any{neutronKinds[coll]: c.renderLocked(coll, d)})
	}
}

func toInt(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	}
	return 0
}

func (c *Cloud) neutronReplaceTags(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		var body struct {
			Tags []string `json:"tags"`
		}
		raw, err := readBody(r)
		if err == nil {
			err = jsonUnmarshalStrict(raw, &body)
		}
		if err != nil || body.Tags == nil {
			neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Invalid tags body: a JSON object with a \"tags\" list is required")
			return
		}
		id := r.PathValue("id")
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		d, found := c.ownLocked(coll, id, caller.ProjectID)
		if !found {
			msg, typ := notFoundMessage(coll, id)
			neutronError(w, http.StatusNotFound, typ, msg)
			return
		}
		tags := slices.Compact(slices.Sorted(slices.Values(body.Tags)))
		d = cloneDoc(d)
		d["tags"] = tags
		c.sim.coll(coll).put(cloneDoc(d))
		writeJSON(w, http.StatusOK, map[string]any{"tags": tags})
	}
}

func (c *Cloud) neutronDelete(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		id := r.PathValue("id")
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		if _, found := c.ownLocked(coll, id, caller.ProjectID); !found {
			msg, typ := notFoundMessage(coll, id)
			neutronError(w, http.StatusNotFound, typ, msg)
			return
		}
		if status, typ, msg := c.deleteNeutronLocked(coll, id); msg != "" {
			neutronError(w, status, typ, msg)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// deleteNeutronLocked refuses what Neutron refuses (a network or subnet with ports, a router with
// interfaces, a router interface port, a security group in use) and cascades what it cascades (a
// network's subnets, a group's rules, a port's floating IP association).
func (c *Cloud) deleteNeutronLocked(coll, id string) (int, string, string) {
	ports := c.sim.coll("ports").all()
	switch coll {
	case "networks":
		for _, p := range ports {
			if str(p, "network_id") == id {
				return http.StatusConflict, "NetworkInUse", fmt.Sprintf("Unable to complete operation on network %s. There are one or more ports still in use on the network.", id)
			}
		}
		for _, s := range c.sim.coll("subnets").all() {
			if str(s, "network_id") == id {
				c.sim.coll("subnets").remove(str(s, "id"))
			}
		}
	case "subnets":
		for _, p := range ports {
			for _, f := range fixedIPs(p) {
				if f["subnet_id"] == id {
					return http.StatusConflict, "SubnetInUse", fmt.Sprintf("Unable to complete operation on subnet %s: One or more ports have an IP allocation from this subnet.", id)
				}
			}
		}
	case "routers":
		for _, p := range ports {
			if str(p, "device_id") == id {
				return http.StatusConflict, "RouterInUse", fmt.Sprintf("Router %s still has ports", id)
			}
		}
	case "ports":
		p := c.sim.coll("ports").docs[id]
		if owner := str(p, "device_owner"); owner == "network:router_interface" {
			return http.StatusConflict, "L3PortInUse", fmt.Sprintf("Port %s cannot be deleted directly via the port API: has device owner %s.", id, owner)
		}
		for _, f := range c.sim.coll("floatingips").all() {
			if str(f, "port_id") == id {
				f["port_id"], f["fixed_ip_address"], f["router_id"], f["status"] = nil, nil, nil, "DOWN"
			}
		}
	case "security-groups":
		for _, p := range ports {
			if slices.Contains(strList(p["security_groups"]), id) {
				return http.StatusConflict, "SecurityGroupInUse", fmt.Sprintf("Security Group %s in use.", id)
			}
		}
		for _, rule := range c.sim.coll("security-group-rules").all() {
			if str(rule, "security_group_id") == id {
				c.sim.coll("security-group-rules").remove(str(rule, "id"))
			}
		}
	}
	c.sim.coll(coll).remove(id)
	return 0, "", ""
}

// routerInterface adds or removes a router's interface on a subnet: a port holding the subnet's
// gateway address, owned by the router.
func (c *Cloud) routerInterface(add bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		raw, err := readBody(r)
		var body struct {
			SubnetID string `json:"subnet_id"`
			PortID   string `json:"port_id"`
		}
		if err == nil {
			err = jsonUnmarshalStrict(raw, &body)
		}
		if err != nil || (body.SubnetID == "") == (body.PortID == "") {
			neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "Bad router request: Either subnet_id or port_id must be specified.")
			return
		}
		id := r.PathValue("id")
		project := caller.ProjectID
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		router, found := c.ownLocked("routers", id, project)
		if !found {
			msg, typ := notFoundMessage("routers", id)
			neutronError(w, http.StatusNotFound, typ, msg)
			return
		}
		info := map[string]any{"id": router["id"], "tenant_id": project, "project_id": project}
		if !add {
			for _, p := range c.sim.coll("ports").all() {
				if str(p, "device_id") != id {
					continue
				}
				ips := fixedIPs(p)
				if p["id"] == body.PortID || (len(ips) > 0 && ips[0]["subnet_id"] == body.SubnetID) {
					info["port_id"], info["subnet_id"] = p["id"], ips[0]["subnet_id"]
					info["subnet_ids"] = []any{ips[0]["subnet_id"]}
					c.sim.coll("ports").remove(str(p, "id"))
					writeJSON(w, http.StatusOK, info)
					return
				}
			}
			neutronError(w, http.StatusNotFound, "RouterInterfaceNotFoundForSubnet",
				fmt.Sprintf("Router %s has no interface on subnet %s", id, body.SubnetID))
			return
		}
		if body.PortID != "" {
			neutronError(w, http.StatusBadRequest, "HTTPBadRequest", "the fake simulates router interfaces by subnet_id only (CAPO's way)")
			return
		}
		subnet, ok := c.subnetLocked(body.SubnetID)
		if !ok || !c.visibleLocked("subnets", subnet, project) {
			neutronError(w, http.StatusNotFound, "SubnetNotFound", fmt.Sprintf("Subnet %s could not be found.", body.SubnetID))
			return
		}
		for _, p := range c.sim.coll("ports").all() {
			if str(p, "device_id") == id && len(fixedIPs(p)) > 0 && fixedIPs(p)[0]["subnet_id"] == body.SubnetID {
				neutronError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("Bad router request: Router already has a port on subnet %s.", body.SubnetID))
				return
			}
		}
		port := base(doc{"network_id": subnet["network_id"], "device_id": id, "device_owner": "network:router_interface",
			"fixed_ips": []any{map[string]any{"subnet_id": body.SubnetID, "ip_address": subnet["gateway_ip"]}}}, project)
		if msg := c.fillPortLocked(port, project); msg != "" {
			neutronError(w, http.StatusConflict, "IpAddressGenerationFailure", msg)
			return
		}
		port["status"] = "ACTIVE"
		c.sim.coll("ports").put(cloneDoc(port))
		info["port_id"], info["subnet_id"], info["subnet_ids"] = port["id"], body.SubnetID, []any{body.SubnetID}
		writeJSON(w, http.StatusOK, info)
	}
}
