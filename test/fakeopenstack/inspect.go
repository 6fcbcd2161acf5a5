package fakeopenstack

import (
	"net/http"
	"slices"
	"strings"
)

// The inspection API (not OpenStack's): what the simulator holds and who asked it what, as JSON,
// for tests and operators. It is served on its own listener (fake-openstack --inspect-listen), so
// that no OpenStack client can reach it by accident; it shows ids, names and projects, never
// tokens.
//
//	GET /requests                      the recent requests, oldest first (?project_id= filters)
//	GET /projects/{project}/resources  every simulated resource of the project, by collection

// InspectHandler serves the inspection API.
func (c *Cloud) InspectHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /requests", func(w http.ResponseWriter, r *http.Request) {
		reqs := c.Requests()
		if p := r.URL.Query().Get("project_id"); p != "" {
			reqs = slices.DeleteFunc(reqs, func(x Request) bool { return x.ProjectID != p })
		}
		writeJSON(w, http.StatusOK, map[string]any{"requests": reqs})
	})
	mux.HandleFunc("GET /projects/{project}/resources", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, c.ProjectResources(r.PathValue("project")))
	})
	return mux
}

// ProjectResources lists the ids of every simulated resource a project owns, by collection
// ("networks", "servers", "server-groups", "lb:loadbalancers", …); empty collections are left out,
// so an empty map means the project holds nothing.
func (c *Cloud) ProjectResources(project string) map[string][]string {
	out := map[string][]string{}
	c.sim.mu.Lock()
	for name, coll := range c.sim.colls {
		for _, d := range coll.all() {
			owner := str(d, "project_id")
			switch name {
			case "servers":
				owner = str(d, "tenant_id")
			case "volumes":
				owner = str(d, "os-vol-tenant-attr:tenant_id")
			}
			if owner == project {
				out[name] = append(out[name], str(d, "id"))
			}
		}
	}
	c.sim.mu.Unlock()
	for _, g := range c.groups.list(project) {
		out["server-groups"] = append(out["server-groups"], g.id)
	}
	for k := range out {
		if strings.TrimSpace(k) == "" {
			delete(out, k)
		}
	}
	return out
}
