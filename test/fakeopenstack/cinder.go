package fakeopenstack

import (
	"fmt"
	"net/http"
	"time"
)

// Simulated Cinder (block-storage v3), the calls CAPO v0.14 makes for a machine's root volume and
// additional volumes (pkg/cloud/services/compute/instance.go): list by name, create, get (CAPO waits
// for "available"), delete. A volume is "available" at once, "in-use" while a server boots from or
// attaches it, and deleted with the server when its block device mapping says
// delete_on_termination, as Nova does.

// VolumeService is Cinder, named by its Keystone catalog type.
const VolumeService Service = "block-storage"

// cinderTime is Cinder's timestamp format (microseconds, no zone), which gophercloud parses.
func cinderTime() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000000") }

func cinderError(w http.ResponseWriter, status int, message string) {
	name := map[int]string{http.StatusBadRequest: "badRequest", http.StatusNotFound: "itemNotFound",
		http.StatusForbidden: "forbidden"}[status]
	writeJSON(w, status, map[string]any{name: map[string]any{"code": status, "message": message}})
}

func (c *Cloud) volumeRoutes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v3/{project}/volumes", c.listVolumes)
	mux.HandleFunc("GET /v3/{project}/volumes/detail", c.listVolumes)
	mux.HandleFunc("POST /v3/{project}/volumes", c.createVolume)
	mux.HandleFunc("GET /v3/{project}/volumes/{id}", c.getVolume)
	mux.HandleFunc("DELETE /v3/{project}/volumes/{id}", c.deleteVolume)
	mux.HandleFunc("GET /v3/{project}/types", c.listVolumeTypes)
	// Version discovery: openstacksdk (magnum-capi-helm's Cinder client) asks the catalog's URL, then
	// the root, before its first call.
	mux.HandleFunc("GET /{$}", volumeVersions(http.StatusMultipleChoices))
	mux.HandleFunc("GET /v3", volumeVersions(http.StatusOK))
	mux.HandleFunc("GET /v3/{$}", volumeVersions(http.StatusOK))
	mux.HandleFunc("GET /v3/{project}", volumeVersions(http.StatusOK))
	mux.HandleFunc("GET /v3/{project}/{$}", volumeVersions(http.StatusOK))
	return mux
}

// defaultVolumeTypeID is the id of the one volume type, Cinder's own "__DEFAULT__" (every Cinder has it).
const defaultVolumeTypeID = "9b1c0e7a-0000-4000-8000-0000000000c1"

// listVolumeTypes answers the volume type list (magnum-capi-helm makes a StorageClass of each).
func (c *Cloud) listVolumeTypes(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.volumeCaller(w, r); !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"volume_types": []map[string]any{{
		"id": defaultVolumeTypeID, "name": "__DEFAULT__", "description": "Default Volume Type",
		"is_public": true, "extra_specs": map[string]string{}, "qos_specs_id": nil}}})
}

// volumeCaller authenticates and checks the URL's project is the token's, as Cinder does.
func (c *Cloud) volumeCaller(w http.ResponseWriter, r *http.Request) (Caller, bool) {
	caller, ok := c.authenticate(w, r)
	if !ok {
		return Caller{}, false
	}
	if r.PathValue("project") != caller.ProjectID {
		cinderError(w, http.StatusBadRequest, "Malformed request url")
		return Caller{}, false
	}
	return caller, true
}

func (c *Cloud) listVolumes(w http.ResponseWriter, r *http.Request) {
	caller, ok := c.volumeCaller(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	filters := map[string][]string{}
	for _, k := range []string{"name", "status"} {
		if v, ok := q[k]; ok {
			filters[k] = v
		}
	}
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	docs := []doc{}
	for _, v := range c.sim.coll("volumes").all() {
		if str(v, "os-vol-tenant-attr:tenant_id") == caller.ProjectID && matchesFilters(v, filters) {
			docs = append(docs, cloneDoc(v))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"volumes": docs})
}

func (c *Cloud) ownVolumeLocked(w http.ResponseWriter, project, id string) (doc, bool) {
	v, ok := c.sim.coll("volumes").docs[id]
	if !ok || str(v, "os-vol-tenant-attr:tenant_id") != project {
		cinderError(w, http.StatusNotFound, fmt.Sprintf("Volume %s could not be found.", id))
		return nil, false
	}
	return v, true
}

func (c *Cloud) getVolume(w http.ResponseWriter, r *http.Request) {
	caller, ok := c.volumeCaller(w, r)
	if !ok {
		return
	}
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	if v, ok := c.ownVolumeLocked(w, caller.ProjectID, r.PathValue("id")); ok {
		writeJSON(w, http.StatusOK, map[string]any{"volume": cloneDoc(v)})
	}
}

func (c *Cloud) createVolume(w http.ResponseWriter, r *http.Request) {
	caller, ok := c.volumeCaller(w, r)
	if !ok {
		return
	}
	in, msg := decodeObject(r, "volume")
	if msg != "" {
		cinderError(w, http.StatusBadRequest, msg)
		return
	}
	size := toInt(in["size"])
	if size < 1 {
		cinderError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input received: 'size' parameter must be an integer of at least 1, got %v", in["size"]))
		return
	}
	imageID := str(in, "imageRef")
	var imageMeta any = nil
	if imageID != "" {
		img, ok := c.imageByID(imageID)
		if !ok {
			cinderError(w, http.StatusBadRequest, fmt.Sprintf("Invalid image identifier or unable to access requested image. (%s)", imageID))
			return
		}
		if img.MinDisk > size {
			cinderError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input received: Volume size %dGB cannot be smaller than the image minDisk size %dGB.", size, img.MinDisk))
			return
		}
		imageMeta = map[string]any{"image_id": imageID, "image_name": img.Name}
	}
	az := orDefault(str(in, "availability_zone"), FakeAvailabilityZone)
	if az != FakeAvailabilityZone {
		cinderError(w, http.StatusBadRequest, fmt.Sprintf("Invalid input received: Availability zone '%s' is invalid.", az))
		return
	}
	metadata, _ := in["metadata"].(map[string]any)
	if metadata == nil {
		metadata = map[string]any{}
	}
	v := doc{
		"id": newID(), "name": str(in, "name"), "description": str(in, "description"), "size": size,
		"status": "available", "availability_zone": az, "volume_type": orDefault(str(in, "volume_type"), "__DEFAULT__"),
		"bootable": fmt.Sprint(imageID != ""), "multiattach": false, "encrypted": false, "attachments": []any{},
		"metadata": metadata, "volume_image_metadata": imageMeta, "snapshot_id": nil, "source_volid": nil,
		"os-vol-tenant-attr:tenant_id": caller.ProjectID, "user_id": caller.UserID,
		"created_at": cinderTime(), "updated_at": nil,
	}
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	c.sim.coll("volumes").put(cloneDoc(v))
	writeJSON(w, http.StatusAccepted, map[string]any{"volume": v})
}

func (c *Cloud) deleteVolume(w http.ResponseWriter, r *http.Request) {
	caller, ok := c.volumeCaller(w, r)
	if !ok {
		return
	}
	c.sim.mu.Lock()
	defer c.sim.mu.Unlock()
	v, ok := c.ownVolumeLocked(w, caller.ProjectID, r.PathValue("id"))
	if !ok {
		return
	}
	if str(v, "status") == "in-use" {
		cinderError(w, http.StatusBadRequest, "Invalid volume: Volume status must be available or error or error_restoring or error_extending or error_managing and must not be migrating, attached, belong to a group, have snapshots, awaiting a transfer, or be disassociated from snapshots after volume transfer.")
		return
	}
	c.sim.coll("volumes").remove(str(v, "id"))
	w.WriteHeader(http.StatusAccepted)
}

// checkVolumesLocked checks the volumes of a server's block device mapping; it reports the volume
// ids and whether each is deleted with the server, for attachVolumesLocked.
func (c *Cloud) checkVolumesLocked(bdms []map[string]any, project string) ([]any, string) {
	var attached []any
	for _, b := range bdms {
		if str(b, "source_type") != "volume" {
			continue
		}
		id := str(b, "uuid")
		v, ok := c.sim.coll("volumes").docs[id]
		if !ok || str(v, "os-vol-tenant-attr:tenant_id") != project {
			return nil, fmt.Sprintf("Block Device Mapping is Invalid: failed to get volume %s.", id)
		}
		if str(v, "status") != "available" {
			return nil, fmt.Sprintf("Invalid volume: volume %s status must be 'available', not '%s'", id, str(v, "status"))
		}
		attached = append(attached, map[string]any{"id": id, "delete_on_termination": b["delete_on_termination"] == true})
	}
	return attached, ""
}

// attachVolumesLocked marks checked volumes in use by the server.
func (c *Cloud) attachVolumesLocked(attached []any, serverID string) {
	for _, a := range attached {
		v := c.sim.coll("volumes").docs[a.(map[string]any)["id"].(string)]
		v["status"] = "in-use"
		v["attachments"] = []any{map[string]any{"server_id": serverID, "volume_id": v["id"], "attachment_id": newID()}}
	}
}

// detachVolumesLocked releases a deleted server's volumes, deleting those marked so.
func (c *Cloud) detachVolumesLocked(server doc) {
	for _, a := range anyMaps(server["volumes"]) {
		id := str(a, "id")
		v, ok := c.sim.coll("volumes").docs[id]
		if !ok {
			continue
		}
		if a["delete_on_termination"] == true {
			c.sim.coll("volumes").remove(id)
			continue
		}
		v["status"], v["attachments"] = "available", []any{}
	}
}
