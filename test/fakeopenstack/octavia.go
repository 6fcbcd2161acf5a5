package fakeopenstack

import (
	"fmt"
	"net/http"
	"time"
)

// Simulated Octavia (load-balancer v2), the calls CAPO v0.14 makes for the API server load
// balancer (pkg/cloud/services/loadbalancer): load balancers (a VIP port is made in the simulated
// Neutron, as Octavia does, and removed with the cascade delete CAPO uses), listeners, pools,
// members and health monitors, the API versions (CAPO checks the newest for allowed_cidrs), the
// providers and flavors. Everything is ACTIVE/ONLINE at once.

// LoadBalancerService is Octavia, named by its Keystone catalog type.
const LoadBalancerService Service = "load-balancer"

// octaviaKinds maps each collection to its single-object key.
var octaviaKinds = map[string]string{
	"loadbalancers": "loadbalancer", "listeners": "listener", "pools": "pool",
	"healthmonitors": "healthmonitor", "members": "member",
}

// octaviaVersion is the newest Octavia API version the fake claims (Zed's): it has allowed_cidrs.
const octaviaVersion = "v2.26"

func octaviaNow() string { return time.Now().UTC().Format("2006-01-02T15:04:05") }

func octaviaError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{"faultcode": http.StatusText(status), "faultstring": message, "debuginfo": nil})
}

func (c *Cloud) loadBalancerRoutes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"versions": []map[string]any{
			{"id": "v2.0", "status": "SUPPORTED", "links": []map[string]string{{"rel": "self", "href": "http://" + r.Host + "/v2/"}}},
			{"id": octaviaVersion, "status": "CURRENT", "links": []map[string]string{{"rel": "self", "href": "http://" + r.Host + "/v2/"}}},
		}})
	})
	for _, v := range []string{"v2", "v2.0"} {
		p := "/" + v + "/lbaas/"
		for _, coll := range []string{"loadbalancers", "listeners", "pools", "healthmonitors"} {
			mux.HandleFunc("GET "+p+coll, c.octaviaList(coll))
			mux.HandleFunc("POST "+p+coll, c.octaviaCreate(coll))
			mux.HandleFunc("GET "+p+coll+"/{id}", c.octaviaGet(coll))
			mux.HandleFunc("PUT "+p+coll+"/{id}", c.octaviaUpdate(coll))
			mux.HandleFunc("DELETE "+p+coll+"/{id}", c.octaviaDelete(coll))
		}
		mux.HandleFunc("GET "+p+"pools/{pool}/members", c.octaviaList("members"))
		mux.HandleFunc("POST "+p+"pools/{pool}/members", c.octaviaCreate("members"))
		mux.HandleFunc("GET "+p+"pools/{pool}/members/{id}", c.octaviaGet("members"))
		mux.HandleFunc("DELETE "+p+"pools/{pool}/members/{id}", c.octaviaDelete("members"))
		mux.HandleFunc("GET "+p+"providers", func(w http.ResponseWriter, r *http.Request) {
			if _, ok := c.authenticate(w, r); ok {
				writeJSON(w, http.StatusOK, map[string]any{"providers": []map[string]string{
					{"name": "amphora", "description": "The Octavia Amphora driver (simulated)."}}})
			}
		})
		mux.HandleFunc("GET "+p+"flavors", func(w http.ResponseWriter, r *http.Request) {
			if _, ok := c.authenticate(w, r); ok {
				writeJSON(w, http.StatusOK, map[string]any{"flavors": []any{}})
			}
		})
	}
	return mux
}

func (c *Cloud) octaviaOwnLocked(coll, id, project, pool string) (doc, bool) {
	d, ok := c.sim.coll("lb:" + coll).docs[id]
	if !ok || str(d, "project_id") != project || (coll == "members" && str(d, "pool_id") != pool) {
		return nil, false
	}
	return d, true
}

func (c *Cloud) octaviaList(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		q := r.URL.Query()
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		if coll == "members" {
			if _, ok := c.octaviaOwnLocked("pools", r.PathValue("pool"), caller.ProjectID, ""); !ok {
				octaviaError(w, http.StatusNotFound, fmt.Sprintf("Pool %s not found.", r.PathValue("pool")))
				return
			}
		}
		docs := []doc{}
		for _, d := range c.sim.coll("lb:" + coll).all() {
			if str(d, "project_id") != caller.ProjectID || (coll == "members" && str(d, "pool_id") != r.PathValue("pool")) {
				continue
			}
			if matchesFilters(d, q) {
				docs = append(docs, c.octaviaRenderLocked(coll, d))
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{coll: docs})
	}
}

func (c *Cloud) octaviaGet(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		d, found := c.octaviaOwnLocked(coll, r.PathValue("id"), caller.ProjectID, r.PathValue("pool"))
		if !found {
			octaviaError(w, http.StatusNotFound, fmt.Sprintf("%s %s not found.", octaviaKinds[coll], r.PathValue("id")))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{octaviaKinds[coll]: c.octaviaRenderLocked(coll, d)})
	}
}

// octaviaRenderLocked adds the child references Octavia shows.
func (c *Cloud) octaviaRenderLocked(coll string, d doc) doc {
	out := cloneDoc(d)
	refs := func(child, field string) []any {
		list := []any{}
		for _, x := range c.sim.coll("lb:" + child).all() {
			if str(x, field) == str(d, "id") {
				list = append(list, map[string]any{"id": x["id"]})
			}
		}
		return list
	}
	switch coll {
	case "loadbalancers":
		out["listeners"], out["pools"] = refs("listeners", "loadbalancer_id"), refs("pools", "loadbalancer_id")
	case "listeners":
		out["loadbalancers"] = []any{map[string]any{"id": d["loadbalancer_id"]}}
	case "pools":
		out["members"] = refs("members", "pool_id")
		out["loadbalancers"] = []any{map[string]any{"id": d["loadbalancer_id"]}}
		out["listeners"] = []any{}
		if l := str(d, "listener_id"); l != "" {
			out["listeners"] = []any{map[string]any{"id": l}}
		}
		out["healthmonitor_id"] = nil
		for _, m := range c.sim.coll("lb:healthmonitors").all() {
			if str(m, "pool_id") == str(d, "id") {
				out["healthmonitor_id"] = m["id"]
			}
		}
	case "healthmonitors":
		out["pools"] = []any{map[string]any{"id": d["pool_id"]}}
	}
	return out
}

func (c *Cloud) octaviaCreate(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		in, msg := decodeObject(r, octaviaKinds[coll])
		if msg == "" {
			msg = wrongTypes(in)
		}
		if msg != "" {
			octaviaError(w, http.StatusBadRequest, msg)
			return
		}
		project := caller.ProjectID
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		d := base(in, project)
		delete(d, "revision_number")
		// Octavia's timestamps have no zone designator; gophercloud parses them that way.
		d["created_at"], d["updated_at"] = octaviaNow(), nil
		d["provisioning_status"], d["operating_status"] = "ACTIVE", "ONLINE"
		setDefault(d, "admin_state_up", true)
		missing := func(kind, id string) {
			octaviaError(w, http.StatusNotFound, fmt.Sprintf("%s %s not found.", kind, id))
		}
		switch coll {
		case "loadbalancers":
			subnetID := str(d, "vip_subnet_id")
			networkID := str(d, "vip_network_id")
			if subnetID != "" {
				sn, ok := c.subnetLocked(subnetID)
				if !ok || !c.visibleLocked("subnets", sn, project) {
					missing("Subnet", subnetID)
					return
				}
				networkID = str(sn, "network_id")
			}
			port := base(doc{"network_id": networkID, "name": "octavia-lb-" + str(d, "id"),
				"device_owner": "Octavia", "device_id": "lb-" + str(d, "id")}, project)
			if subnetID != "" || str(d, "vip_address") != "" {
				port["fixed_ips"] = []any{map[string]any{"subnet_id": subnetID, "ip_address": str(d, "vip_address")}}
			}
			if msg := c.fillPortLocked(port, project); msg != "" {
				if msg == "notfound" {
					missing("Network", networkID)
				} else {
					octaviaError(w, http.StatusConflict, msg)
				}
				return
			}
			port["status"] = "ACTIVE"
			c.sim.coll("ports").put(cloneDoc(port))
			ips := fixedIPs(port)
			d["vip_port_id"], d["vip_network_id"] = port["id"], networkID
			if len(ips) > 0 {
				d["vip_address"], d["vip_subnet_id"] = ips[0]["ip_address"], ips[0]["subnet_id"]
			}
			setDefault(d, "provider", "amphora")
			setDefault(d, "flavor_id", nil)
			setDefault(d, "availability_zone", nil)
		case "listeners":
			if _, ok := c.octaviaOwnLocked("loadbalancers", str(d, "loadbalancer_id"), project, ""); !ok {
				missing("Load Balancer", str(d, "loadbalancer_id"))
				return
			}
			setDefault(d, "allowed_cidrs", []string{})
			setDefault(d, "default_pool_id", nil)
		case "pools":
			if l := str(d, "listener_id"); l != "" {
				listener, ok := c.octaviaOwnLocked("listeners", l, project, "")
				if !ok {
					missing("Listener", l)
					return
				}
				d["loadbalancer_id"] = listener["loadbalancer_id"]
				listener["default_pool_id"] = d["id"]
			} else if _, ok := c.octaviaOwnLocked("loadbalancers", str(d, "loadbalancer_id"), project, ""); !ok {
				missing("Load Balancer", str(d, "loadbalancer_id"))
				return
			}
		case "healthmonitors":
			pool, ok := c.octaviaOwnLocked("pools", str(d, "pool_id"), project, "")
			if !ok {
				missing("Pool", str(d, "pool_id"))
				return
			}
			d["loadbalancer_id"] = pool["loadbalancer_id"]
		case "members":
			pool, ok := c.octaviaOwnLocked("pools", r.PathValue("pool"), project, "")
			if !ok {
				missing("Pool", r.PathValue("pool"))
				return
			}
			d["pool_id"], d["loadbalancer_id"] = pool["id"], pool["loadbalancer_id"]
			setDefault(d, "weight", 1)
			setDefault(d, "subnet_id", nil)
		}
		d = cloneDoc(d)
		c.sim.coll("lb:" + coll).put(d)
		writeJSON(w, http.StatusCreated, map[string]any{octaviaKinds[coll]: c.octaviaRenderLocked(coll, d)})
	}
}

func (c *Cloud) octaviaUpdate(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		in, msg := decodeObject(r, octaviaKinds[coll])
		if msg == "" {
			msg = wrongTypes(in)
		}
		if msg != "" {
			octaviaError(w, http.StatusBadRequest, msg)
			return
		}
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		d, found := c.octaviaOwnLocked(coll, r.PathValue("id"), caller.ProjectID, "")
		if !found {
			octaviaError(w, http.StatusNotFound, fmt.Sprintf("%s %s not found.", octaviaKinds[coll], r.PathValue("id")))
			return
		}
		d = cloneDoc(d)
		for k, v := range in {
			if k != "id" && k != "project_id" && k != "loadbalancer_id" && k != "pool_id" {
				d[k] = v
			}
		}
		d["updated_at"] = octaviaNow()
		d = cloneDoc(d)
		c.sim.coll("lb:" + coll).put(d)
		writeJSON(w, http.StatusOK, map[string]any{octaviaKinds[coll]: c.octaviaRenderLocked(coll, d)})
	}
}

// octaviaDelete deletes at once. A load balancer with children needs ?cascade=true (CAPO sends
// it), which removes the children and the VIP port; a pool takes its members and monitor along.
func (c *Cloud) octaviaDelete(coll string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		caller, ok := c.authenticate(w, r)
		if !ok {
			return
		}
		id := r.PathValue("id")
		c.sim.mu.Lock()
		defer c.sim.mu.Unlock()
		d, found := c.octaviaOwnLocked(coll, id, caller.ProjectID, r.PathValue("pool"))
		if !found {
			octaviaError(w, http.StatusNotFound, fmt.Sprintf("%s %s not found.", octaviaKinds[coll], id))
			return
		}
		removeWhere := func(child, field, value string) {
			for _, x := range c.sim.coll("lb:" + child).all() {
				if str(x, field) == value {
					c.sim.coll("lb:" + child).remove(str(x, "id"))
				}
			}
		}
		switch coll {
		case "loadbalancers":
			hasChildren := false
			for _, child := range []string{"listeners", "pools"} {
				for _, x := range c.sim.coll("lb:" + child).all() {
					hasChildren = hasChildren || str(x, "loadbalancer_id") == id
				}
			}
			if hasChildren && r.URL.Query().Get("cascade") != "true" {
				octaviaError(w, http.StatusBadRequest, fmt.Sprintf("Cannot delete Load Balancer %s - it has children", id))
				return
			}
			for _, child := range []string{"members", "healthmonitors", "pools", "listeners"} {
				removeWhere(child, "loadbalancer_id", id)
			}
			c.deleteNeutronLocked("ports", str(d, "vip_port_id"))
		case "pools":
			removeWhere("members", "pool_id", id)
			removeWhere("healthmonitors", "pool_id", id)
			for _, l := range c.sim.coll("lb:listeners").all() {
				if str(l, "default_pool_id") == id {
					l["default_pool_id"] = nil
				}
			}
		case "listeners":
			for _, p := range c.sim.coll("lb:pools").all() {
				if str(p, "listener_id") == id {
					octaviaError(w, http.StatusConflict, fmt.Sprintf("Listener %s is in use by pool %s", id, str(p, "id")))
					return
				}
			}
		}
		c.sim.coll("lb:" + coll).remove(id)
		w.WriteHeader(http.StatusNoContent)
	}
}
