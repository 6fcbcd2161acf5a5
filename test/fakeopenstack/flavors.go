package fakeopenstack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/google/uuid"
)

// Flavors can be added and removed at run time (Nova's POST /flavors and DELETE /flavors/{id}, which
// real Nova allows admins only; the fake trusts its loopback callers), so that a test can show a new
// flavor reaching whoever lists flavors, e.g. the bridge's discovery document. They live in memory:
// a restart of the fake serves the seed again.

func (c *Cloud) flavors() []Flavor {
	c.flavorsMu.RLock()
	defer c.flavorsMu.RUnlock()
	return slices.Clone(c.seed.Flavors)
}

func (c *Cloud) createFlavor(w http.ResponseWriter, r *http.Request) {
	echoMicroversion(w, r)
	var body struct {
		Flavor struct {
			Name      string  `json:"name"`
			ID        *string `json:"id"`
			VCPUs     int     `json:"vcpus"`
			RAM       int     `json:"ram"`
			Disk      int     `json:"disk"`
			Ephemeral int     `json:"OS-FLV-EXT-DATA:ephemeral"`
			Swap      any     `json:"swap"`
			IsPublic  *bool   `json:"os-flavor-access:is_public"`
		} `json:"flavor"`
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err == nil {
		err = json.Unmarshal(data, &body)
	}
	if err != nil {
		badRequest(w, "Malformed request body: "+err.Error())
		return
	}
	in := body.Flavor
	f := Flavor{Name: in.Name, VCPUs: in.VCPUs, RAM: in.RAM, Disk: in.Disk, Ephemeral: in.Ephemeral,
		Private: in.IsPublic != nil && !*in.IsPublic}
	if swap, ok := in.Swap.(float64); ok {
		f.Swap = int(swap)
	}
	if in.ID != nil && *in.ID != "" {
		f.ID = *in.ID
	} else {
		f.ID = uuid.NewString()
	}
	c.flavorsMu.Lock()
	next := Seed{Flavors: append(slices.Clone(c.seed.Flavors), f)}
	if err := next.Validate(); err != nil {
		c.flavorsMu.Unlock()
		writeJSON(w, http.StatusConflict, map[string]any{"conflictingRequest": map[string]any{"code": 409,
			"message": fmt.Sprintf("Flavor %q cannot be created: %v", f.Name, err)}})
		return
	}
	c.seed.Flavors = next.Flavors
	c.flavorsMu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"flavor": flavorDoc(r, f, true)})
}

func (c *Cloud) deleteFlavor(w http.ResponseWriter, r *http.Request) {
	echoMicroversion(w, r)
	id := r.PathValue("id")
	c.flavorsMu.Lock()
	i := slices.IndexFunc(c.seed.Flavors, func(f Flavor) bool { return f.ID == id })
	if i >= 0 {
		c.seed.Flavors = slices.Delete(slices.Clone(c.seed.Flavors), i, i+1)
	}
	c.flavorsMu.Unlock()
	if i < 0 {
		notFound(w, ComputeService, fmt.Sprintf("Flavor %s could not be found.", id), "")
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
