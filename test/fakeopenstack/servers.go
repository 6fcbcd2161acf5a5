package fakeopenstack

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Simulated Nova servers, the calls CAPO v0.14 makes (pkg/clients/compute.go): create (ports made
// beforehand, key_name, metadata, user_data, tags, availability zone, server group hint, block
// devices), get, list with a name regex, delete, list and detach interfaces, console output; plus
// os-quota-sets for the per-project instance quota. A server is ACTIVE at once with its ports'
// addresses; nothing boots.

// maxUserData is Nova's limit on a server's base64-encoded user_data (its API schema's maxLength).
const maxUserData = 65535

// DefaultInstanceQuota is Nova's default `[quota] instances`.
const DefaultInstanceQuota = 10

// Microversions where a server changes shape: 2.26 tags, 2.47 the embedded flavor, 2.71 server_groups.
var (
	mvServerTags     = microversion{2, 26}
	mvEmbeddedFlavor = microversion{2, 47}
	mvServerGroups   = microversion{2, 71}
)

func (c *Cloud) addServerRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v2.1/servers", c.createServer)
	mux.HandleFunc("GET /v2.1/servers", c.listServers(false))
	mux.HandleFunc("GET /v2.1/servers/detail", c.listServers(true))
	mux.HandleFunc("GET /v2.1/servers/{id}", c.getServer)
	mux.HandleFunc("DELETE /v2.1/servers/{id}", c.deleteServer)
	mux.HandleFunc("GET /v2.1/servers/{id}/os-interface", c.listInterfaces)
	mux.HandleFunc("DELETE /v2.1/servers/{id}/os-interface/{port}", c.detachInterface)
	mux.HandleFunc("POST /v2.1/servers/{id}/action", c.serverAction)
	mux.HandleFunc("GET /v2.1/os-quota-sets/{project}", c.getQuotaSet)
	mux.HandleFunc("PUT /v2.1/os-quota-sets/{project}", c.updateQuotaSet)
}

// computeRequest authenticates and negotiates the microversion (see serverGroupRequest).
func (c *Cloud) computeRequest(w http.ResponseWriter, r *http.Request) (Caller, microversion, bool) {
	return c.serverGroupRequest(w, r)
}

func (c *Cloud) instanceQuotaLocked(project string) int {
	if q, ok := c.sim.quotas[project]["instances"]; ok {
		return q
	}
	return c.instanceQuota
}

// WithInstanceQuota sets the default number of servers a project may have; negative: unlimited.
func WithInstanceQuota(n int) Option { return func(c *Cloud) { c.instanceQuota = n } }

func (c *Cloud) createServer(w http.ResponseWriter, r *http.Request) {
	caller, v, ok := c.computeRequest(w, r)
	if !ok {
		return
	}
	body, err := readBody(r)
	var top map[string]any
	if err == nil {
		err = jsonUnmarshalStrict(body, &top)
	}
	in, _ := top["server"].(map[string]any)
	if err != nil || in == nil {
		novaFault(w, http.StatusBadRequest, "Malformed request body")
		return
	}
	name := str(in, "name")
	if name == "" || len(name) > 255 {
		novaFault(w, http.StatusBadRequest, invalidInput("name", in["name"], "A name must be 1 to 255 characters."))
		return
	}
	flavor, found := c.flavorByRef(str(in, "flavorRef"))
	if !found {
		novaFault(w, http.StatusBadRequest, fmt.Sprintf("Flavor %s could not be found.", str(in, "flavorRef")))
		return
	}
	bdms := anyMaps(in["block_device_mapping_v2"])
	bootFromVolume := slices.ContainsFunc(bdms, func(b map[string]any) bool {
		return fmt.Sprint(b["boot_index"]) == "0" && str(b, "destination_type") == "volume"
	})
	imageID := str(in, "imageRef")
	if imageID == "" && !bootFromVolume {
		for _, b := range bdms {
			if fmt.Sprint(b["boot_index"]) == "0" && str(b, "source_type") == "image" {
				imageID = str(b, "uuid")
			}
		}
	}
	image, imageFound := c.imageByID(imageID)
	if imageID != "" && !imageFound {
		novaFault(w, http.StatusBadRequest, fmt.Sprintf("Image %s could not be found.", imageID))
		return
	}
	if imageID == "" && !bootFromVolume {
		novaFault(w, http.StatusBadRequest, "Block Device Mapping is Invalid: You specified more local devices than the limit allows")
		return
	}
	keyName := str(in, "key_name")
	if keyName != "" && !slices.ContainsFunc(c.seed.Keypairs, func(k Keypair) bool { return k.Name == keyName }) {
		novaFault(w, http.StatusBadRequest, "Invalid key_name provided.")
		return
	}
	az := str(in, "availability_zone")
	if az != "" && az != FakeAvailabilityZone {
		novaFault(w, http.StatusBadRequest, "The requested availability zone is not available")
		return
	}
	userData := str(in, "user_data")
	if len(userData) > maxUserData {
		novaFault(w, http.StatusBadRequest, invalidInput("user_data", "<"+strconv.Itoa(len(userData))+" bytes>",
			fmt.Sprintf("is longer than %d characters (Nova's limit on base64 user data)", maxUserData)))
		return
	}
	if userData != "" {
		if _, err := base64.StdEncoding.DecodeString(userData); err != nil {
			novaFault(w, http.StatusBadRequest, "User data needs to be valid base 64.")
			return
		}
	}
	tags := strList(in["tags"])
	if len(tags) > 0 && !v.atLeast(mvServerTags) {
		novaFault(w, http.StatusBadRequest, "Additional properties are not allowed ('tags' was unexpected)")
		return
	}
	hints, _ := top["os:scheduler_hints"].(map[string]any)
	groupID := str(hints, "group")
	if groupID != "" {
		if _, ok := c.groups.get(caller.ProjectID, groupID); !ok {
			novaFault(w, http.StatusBadRequest, fmt.Sprintf("Invalid input for field/attribute group. Value: %s. Instance group %s could not be found.", groupID, groupID))
			return
		}
	}
	id := newID()

	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	used := 0
	for _, s := range c.sim.coll("servers").all() {
		if str(s, "tenant_id") == caller.ProjectID {
			used++
		}
	}
	if quota := c.instanceQuotaLocked(caller.ProjectID); quota >= 0 && used+1 > quota {
		// nova.exception.TooManyInstances, answered 403 by the servers API.
		novaFault(w, http.StatusForbidden, fmt.Sprintf("Quota exceeded for instances: Requested 1, but already used %d of %d instances", used, quota))
		return
	}
	volumes, msg := c.checkVolumesLocked(bdms, caller.ProjectID)
	if msg != "" {
		novaFault(w, http.StatusBadRequest, msg)
		return
	}
	// Ports: CAPO creates them and passes {"port": id}; {"uuid": network} makes Nova create one.
	var portIDs, novaPorts []string
	nets, _ := in["networks"].([]any)
	for _, n := range nets {
		m, _ := n.(map[string]any)
		switch {
		case str(m, "port") != "":
			p, ok := c.ownLocked("ports", str(m, "port"), caller.ProjectID)
			if !ok {
				novaFault(w, http.StatusBadRequest, fmt.Sprintf("Port %s could not be found.", str(m, "port")))
				return
			}
			if str(p, "device_id") != "" {
				novaFault(w, http.StatusConflict, fmt.Sprintf("Port %s is still in use.", str(m, "port")))
				return
			}
			portIDs = append(portIDs, str(p, "id"))
		case str(m, "uuid") != "":
			p := base(doc{"network_id": str(m, "uuid")}, caller.ProjectID)
			if msg := c.fillPortLocked(p, caller.ProjectID); msg != "" {
				novaFault(w, http.StatusBadRequest, fmt.Sprintf("Network %s could not be found.", str(m, "uuid")))
				return
			}
			c.sim.coll("ports").put(cloneDoc(p))
			portIDs = append(portIDs, str(p, "id"))
			novaPorts = append(novaPorts, str(p, "id"))
		}
	}
	if az == "" {
		az = FakeAvailabilityZone
	}
	c.attachVolumesLocked(volumes, id)
	for _, pid := range portIDs {
		p := c.sim.coll("ports").docs[pid]
		p["device_id"], p["device_owner"], p["status"] = id, "compute:"+az, "ACTIVE"
		p["binding:host_id"], p["binding:vif_type"] = "fake-openstack-host", "ovs"
	}
	metadata, _ := in["metadata"].(map[string]any)
	if metadata == nil {
		metadata = map[string]any{}
	}
	server := doc{
		"id": id, "name": name, "tenant_id": caller.ProjectID, "user_id": caller.UserID,
		"status": "ACTIVE", "image_id": imageID, "flavor_id": flavor.ID, "key_name": nullable(keyName),
		"metadata": metadata, "user_data": nullable(userData), "tags": orEmpty(tags),
		"availability_zone": az, "server_group": groupID, "ports": portIDs, "nova_ports": orEmpty(novaPorts),
		"block_device_mapping_v2": bdms, "volumes": orEmptyAny(volumes), "config_drive": in["config_drive"],
		"created": now(), "updated": now(),
		"launched_at": time.Now().UTC().Format("2006-01-02T15:04:05.000000"), // Nova's format, no zone
	}
	c.sim.coll("servers").put(cloneDoc(server))
	if groupID != "" {
		c.groups.addMember(caller.ProjectID, groupID, id)
	}
	c.boot.start(id, name, userData, image)
	w.Header().Set("Location", "http://"+r.Host+"/v2.1/servers/"+id)
	writeJSON(w, http.StatusAccepted, map[string]any{"server": map[string]any{
		"id": id, "links": serverLinks(r, id), "OS-DCF:diskConfig": "MANUAL",
		"security_groups": []any{map[string]any{"name": "default"}}, "adminPass": "fake-openstack-no-password",
	}})
}

func serverLinks(r *http.Request, id string) []map[string]string {
	return []map[string]string{
		{"rel": "self", "href": "http://" + r.Host + "/v2.1/servers/" + id},
		{"rel": "bookmark", "href": "http://" + r.Host + "/servers/" + id},
	}
}

func (c *Cloud) flavorByRef(ref string) (Flavor, bool) {
	for _, f := range c.flavors() {
		if f.ID == ref {
			return f, true
		}
	}
	return Flavor{}, false
}

// serverDocLocked renders a server as Nova's detail view at microversion v.
func (c *Cloud) serverDocLocked(r *http.Request, s doc, v microversion) doc {
	id := str(s, "id")
	addresses := map[string]any{}
	var secGroups []any
	seenSG := map[string]bool{}
	for _, pid := range strList(s["ports"]) {
		p, ok := c.sim.coll("ports").docs[pid]
		if !ok {
			continue
		}
		netName := str(p, "network_id")
		if n, ok := c.networkLocked(netName); ok && str(n, "name") != "" {
			netName = str(n, "name")
		}
		list, _ := addresses[netName].([]any)
		for _, f := range fixedIPs(p) {
			version := 4
			if strings.Contains(fmt.Sprint(f["ip_address"]), ":") {
				version = 6
			}
			list = append(list, map[string]any{"addr": f["ip_address"], "version": version,
				"OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": p["mac_address"]})
			for _, fip := range c.sim.coll("floatingips").all() {
				if str(fip, "port_id") == pid && fip["fixed_ip_address"] == f["ip_address"] {
					list = append(list, map[string]any{"addr": fip["floating_ip_address"], "version": 4,
						"OS-EXT-IPS:type": "floating", "OS-EXT-IPS-MAC:mac_addr": p["mac_address"]})
				}
			}
		}
		addresses[netName] = list
		for _, sg := range strList(p["security_groups"]) {
			if g, ok := c.sim.coll("security-groups").docs[sg]; ok && !seenSG[sg] {
				seenSG[sg] = true
				secGroups = append(secGroups, map[string]any{"name": g["name"]})
			}
		}
	}
	var image any = ""
	if img := str(s, "image_id"); img != "" {
		image = map[string]any{"id": img, "links": []map[string]string{{"rel": "bookmark", "href": "http://" + r.Host + "/images/" + img}}}
	}
	f, _ := c.flavorByRef(str(s, "flavor_id"))
	var flavor any = map[string]any{"id": f.ID, "links": []map[string]string{{"rel": "bookmark", "href": "http://" + r.Host + "/flavors/" + f.ID}}}
	if v.atLeast(mvEmbeddedFlavor) {
		flavor = map[string]any{"original_name": f.Name, "vcpus": f.VCPUs, "ram": f.RAM, "disk": f.Disk,
			"ephemeral": f.Ephemeral, "swap": f.Swap, "extra_specs": map[string]any{}}
	}
	out := doc{
		"id": id, "name": s["name"], "status": s["status"], "tenant_id": s["tenant_id"], "user_id": s["user_id"],
		"metadata": s["metadata"], "key_name": s["key_name"], "image": image, "flavor": flavor,
		"addresses": addresses, "links": serverLinks(r, id), "hostId": "fake-openstack-host-id",
		"created": s["created"], "updated": s["updated"], "progress": 0, "accessIPv4": "", "accessIPv6": "",
		"config_drive": fmt.Sprint(s["config_drive"] == true), "OS-DCF:diskConfig": "MANUAL",
		"OS-EXT-AZ:availability_zone": s["availability_zone"], "OS-EXT-STS:power_state": 1,
		"OS-EXT-STS:task_state": nil, "OS-EXT-STS:vm_state": "active",
		"OS-SRV-USG:launched_at": s["launched_at"], "OS-SRV-USG:terminated_at": nil,
		"os-extended-volumes:volumes_attached": orEmptyAny(anySlice(s["volumes"])), "security_groups": orEmptyAny(secGroups),
		// Nova shows user_data (2.3+) to admins only; the simulator shows it to the project so that
		// tests and operators can read what a machine would have booted with.
		"OS-EXT-SRV-ATTR:user_data": s["user_data"],
	}
	if v.atLeast(mvServerTags) {
		out["tags"] = s["tags"]
	}
	if v.atLeast(mvServerGroups) {
		groups := []string{}
		if g := str(s, "server_group"); g != "" {
			groups = append(groups, g)
		}
		out["server_groups"] = groups
	}
	return out
}

func orEmptyAny(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

func (c *Cloud) listServers(detail bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, v, ok := c.computeRequest(w, r)
		if !ok {
			return
		}
		q := r.URL.Query()
		var nameRE *regexp.Regexp
		if n := q.Get("name"); n != "" {
			var err error
			if nameRE, err = regexp.Compile(n); err != nil {
				novaFault(w, http.StatusBadRequest, fmt.Sprintf("Invalid regular expression %q in name", n))
				return
			}
		}
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		docs := []doc{}
		for _, s := range c.sim.coll("servers").all() {
			if str(s, "tenant_id") != caller.ProjectID {
				continue
			}
			if nameRE != nil && !nameRE.MatchString(str(s, "name")) {
				continue
			}
			if st := q.Get("status"); st != "" && st != str(s, "status") {
				continue
			}
			if t := q.Get("tags"); t != "" && !matchesFilters(doc{"tags": s["tags"]}, map[string][]string{"tags": {t}}) {
				continue
			}
			if detail {
				docs = append(docs, c.serverDocLocked(r, s, v))
			} else {
				docs = append(docs, doc{"id": s["id"], "name": s["name"], "links": serverLinks(r, str(s, "id"))})
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"servers": docs})
	}
}

func (c *Cloud) ownServerLocked(w http.ResponseWriter, project, id string) (doc, bool) {
	s, ok := c.sim.coll("servers").docs[id]
	if !ok || str(s, "tenant_id") != project {
		novaFault(w, http.StatusNotFound, fmt.Sprintf("Instance %s could not be found.", id))
		return nil, false
	}
	return s, true
}

func (c *Cloud) getServer(w http.ResponseWriter, r *http.Request) {
	caller, v, ok := c.computeRequest(w, r)
	if !ok {
		return
	}
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	s, ok := c.ownServerLocked(w, caller.ProjectID, r.PathValue("id"))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"server": c.serverDocLocked(r, s, v)})
}

// deleteServer removes the server at once (Nova's deletion is asynchronous; CAPO polls until the
// server is gone, which it then is). Ports CAPO made are unbound and left to CAPO, ports Nova made
// are deleted, as in Nova.
func (c *Cloud) deleteServer(w http.ResponseWriter, r *http.Request) {
	caller, _, ok := c.computeRequest(w, r)
	if !ok {
		return
	}
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	s, ok := c.ownServerLocked(w, caller.ProjectID, r.PathValue("id"))
	if !ok {
		return
	}
	for _, pid := range strList(s["ports"]) {
		if slices.Contains(strList(s["nova_ports"]), pid) {
			c.deleteNeutronLocked("ports", pid)
			continue
		}
		if p, ok := c.sim.coll("ports").docs[pid]; ok {
			p["device_id"], p["device_owner"], p["status"], p["binding:host_id"] = "", "", "DOWN", ""
		}
	}
	c.detachVolumesLocked(s)
	if g := str(s, "server_group"); g != "" {
		c.groups.removeMember(caller.ProjectID, g, str(s, "id"))
	}
	c.sim.coll("servers").remove(str(s, "id"))
	c.boot.stop(str(s, "id"))
	w.WriteHeader(http.StatusNoContent)
}

func (c *Cloud) listInterfaces(w http.ResponseWriter, r *http.Request) {
	caller, _, ok := c.computeRequest(w, r)
	if !ok {
		return
	}
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	s, ok := c.ownServerLocked(w, caller.ProjectID, r.PathValue("id"))
	if !ok {
		return
	}
	out := []any{}
	for _, pid := range strList(s["ports"]) {
		if p, ok := c.sim.coll("ports").docs[pid]; ok {
			out = append(out, map[string]any{"port_id": pid, "net_id": p["network_id"], "mac_addr": p["mac_address"],
				"port_state": p["status"], "fixed_ips": p["fixed_ips"]})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"interfaceAttachments": out})
}

func (c *Cloud) detachInterface(w http.ResponseWriter, r *http.Request) {
	caller, _, ok := c.computeRequest(w, r)
	if !ok {
		return
	}
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	s, ok := c.ownServerLocked(w, caller.ProjectID, r.PathValue("id"))
	if !ok {
		return
	}
	pid := r.PathValue("port")
	ports := strList(s["ports"])
	if !slices.Contains(ports, pid) {
		novaFault(w, http.StatusNotFound, fmt.Sprintf("Port %s is not attached", pid))
		return
	}
	s["ports"] = slices.DeleteFunc(ports, func(p string) bool { return p == pid })
	if p, ok := c.sim.coll("ports").docs[pid]; ok {
		p["device_id"], p["device_owner"], p["status"] = "", "", "DOWN"
	}
	w.WriteHeader(http.StatusAccepted)
}

// serverAction answers os-getConsoleOutput (CAPO reads it for a failed server): nothing booted.
func (c *Cloud) serverAction(w http.ResponseWriter, r *http.Request) {
	caller, _, ok := c.computeRequest(w, r)
	if !ok {
		return
	}
	body, err := readBody(r)
	var action map[string]any
	if err == nil {
		err = jsonUnmarshalStrict(body, &action)
	}
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	if _, ok := c.ownServerLocked(w, caller.ProjectID, r.PathValue("id")); !ok {
		return
	}
	if _, console := action["os-getConsoleOutput"]; err != nil || !console {
		novaFault(w, http.StatusBadRequest, "the fake OpenStack only simulates the os-getConsoleOutput server action")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"output": "fake-openstack: simulated server, nothing booted\n"})
}

// Quotas: GET for the project itself or an admin, PUT for an admin (Nova's default policy).
func (c *Cloud) quotaSetDoc(project string) map[string]any {
	return map[string]any{"id": project, "instances": c.instanceQuotaLocked(project),
		"server_groups": c.serverGroupQuota, "cores": -1, "ram": -1, "key_pairs": 100,
		"metadata_items": 128, "injected_files": 5, "injected_file_content_bytes": 10240,
		"injected_file_path_bytes": 255, "server_group_members": -1}
}

func (c *Cloud) getQuotaSet(w http.ResponseWriter, r *http.Request) {
	caller, _, ok := c.computeRequest(w, r)
	if !ok {
		return
	}
	project := r.PathValue("project")
	if project != caller.ProjectID && !caller.isAdmin() {
		novaFault(w, http.StatusForbidden, "Policy doesn't allow os_compute_api:os-quota-sets:show to be performed.")
		return
	}
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"quota_set": c.quotaSetDoc(project)})
}

func (c *Cloud) updateQuotaSet(w http.ResponseWriter, r *http.Request) {
	caller, _, ok := c.computeRequest(w, r)
	if !ok {
		return
	}
	if !caller.isAdmin() {
		novaFault(w, http.StatusForbidden, "Policy doesn't allow os_compute_api:os-quota-sets:update to be performed.")
		return
	}
	in, msg := decodeObject(r, "quota_set")
	if msg != "" {
		novaFault(w, http.StatusBadRequest, msg)
		return
	}
	project := r.PathValue("project")
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	for k, v := range in {
		if k == "force" {
			continue
		}
		if k != "instances" {
			novaFault(w, http.StatusBadRequest, fmt.Sprintf("the fake OpenStack enforces only the instances quota, not %q", k))
			return
		}
		n, err := strconv.Atoi(fmt.Sprint(v))
		if err != nil || n < -1 {
			novaFault(w, http.StatusBadRequest, invalidInput("instances", v, "must be an integer of at least -1"))
			return
		}
		if c.sim.quotas == nil {
			c.sim.quotas = map[string]map[string]int{}
		}
		if c.sim.quotas[project] == nil {
			c.sim.quotas[project] = map[string]int{}
		}
		c.sim.quotas[project]["instances"] = n
	}
	writeJSON(w, http.StatusOK, map[string]any{"quota_set": c.quotaSetDoc(project)})
}

func anySlice(v any) []any {
	l, _ := v.([]any)
	return l
}

// imageByID is the seed's image with that id.
func (c *Cloud) imageByID(id string) (Image, bool) {
	i := slices.IndexFunc(c.seed.Images, func(img Image) bool { return img.ID == id })
	if i < 0 {
		return Image{}, false
	}
	return c.seed.Images[i], true
}
