package fakeopenstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Service is one of the three APIs; each is served on its own listener, as the Keystone catalog of
// the local stack lists them under their own endpoint.
type Service string

// The services the fake offers, named by their Keystone catalog type.
const (
	ImageService   Service = "image"
	ComputeService Service = "compute"
	NetworkService Service = "network"
)

// Services lists every service in a fixed order.
var Services = []Service{ImageService, ComputeService, NetworkService, LoadBalancerService, VolumeService}

// Cloud serves one seed on the three APIs.
type Cloud struct {
	seed     Seed
	log      *requestLog
	created  string
	handlers map[Service]http.Handler

	// The stateful compute routes (servergroups.go).
	callers          CallerFunc
	computeMaxRaw    string
	computeMax       microversion
	serverGroupQuota int
	instanceQuota    int
	groups           serverGroups

	// The simulated Neutron, Nova server and Octavia resources (simstate.go).
	sim simState
	// What servers boot into (booting.go); nil: nothing boots.
	boot *booting

	// flavorsMu guards seed.Flavors, which POST/DELETE /flavors change (flavors.go).
	flavorsMu sync.RWMutex
}

// Option configures a Cloud.
type Option func(*Cloud)

// WithRequestLog streams every request as one JSON line to w.
func WithRequestLog(w io.Writer) Option { return func(c *Cloud) { c.log.sink = w } }

// WithHistory sets how many recent requests Requests returns (default 1000).
func WithHistory(n int) Option { return func(c *Cloud) { c.log.keep = n } }

// New validates the seed and builds the handlers.
func New(seed Seed, opts ...Option) (*Cloud, error) {
	if err := seed.Validate(); err != nil {
		return nil, fmt.Errorf("fakeopenstack: %w", err)
	}
	c := &Cloud{
		seed:             seed,
		log:              &requestLog{keep: 1000},
		created:          time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339),
		callers:          sharedCaller,
		computeMaxRaw:    DefaultComputeMaxMicroversion,
		serverGroupQuota: DefaultServerGroupQuota,
		instanceQuota:    DefaultInstanceQuota,
	}
	for _, o := range opts {
		o(c)
	}
	mv, err := parseMicroversion(c.computeMaxRaw)
	if err != nil || !mv.atLeast(mvMin) || mv.major != 2 {
		return nil, fmt.Errorf("fakeopenstack: compute max microversion %q is not a 2.N microversion of at least 2.1", c.computeMaxRaw)
	}
	c.computeMax = mv
	if c.callers == nil {
		c.callers = sharedCaller
	}
	c.handlers = map[Service]http.Handler{
		ImageService:        c.wrap(ImageService, c.imageRoutes()),
		ComputeService:      c.wrap(ComputeService, c.computeRoutes()),
		NetworkService:      c.wrap(NetworkService, c.networkRoutes()),
		LoadBalancerService: c.wrap(LoadBalancerService, c.loadBalancerRoutes()),
		VolumeService:       c.wrap(VolumeService, c.volumeRoutes()),
	}
	return c, nil
}

// Handler returns the http.Handler of one service. It panics on an unknown service, which is a
// programming error.
func (c *Cloud) Handler(s Service) http.Handler {
	h, ok := c.handlers[s]
	if !ok {
		panic(fmt.Sprintf("fakeopenstack: unknown service %q", s))
	}
	return h
}

// Requests returns the most recent requests, oldest first.
func (c *Cloud) Requests() []Request { return c.log.snapshot() }

// statusRecorder remembers the status code for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// wrap answers unknown routes (and known paths with another method) with the service's own 404 and
// logs every request.
func (c *Cloud) wrap(svc Service, mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		audit := &Caller{}
		r = r.WithContext(context.WithValue(r.Context(), auditKey{}, audit))
		_, route := mux.Handler(r)
		if route == "" {
			notFound(rec, svc, "The resource could not be found.", "HTTPNotFound")
		} else {
			// ServeHTTP (not the handler returned above) fills in the request's path values.
			mux.ServeHTTP(rec, r)
		}
		c.log.add(Request{
			Time: time.Now().UTC(), Service: svc, Method: r.Method, Path: r.URL.Path,
			Query: r.URL.RawQuery, Route: route, Status: rec.status,
			Token: r.Header.Get("X-Auth-Token") != "", UserAgent: r.UserAgent(),
			ProjectID: audit.ProjectID, UserID: audit.UserID, AuthMethods: audit.AuthMethods,
			ApplicationCredentialID: audit.ApplicationCredentialID,
		})
	})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The only failure left here is a gone client; nothing useful can be done about it.
	_ = json.NewEncoder(w).Encode(body)
}

// notFound answers in the error format of the service, because the Python clients parse it for the
// message they show (e.g. "Unable to find keypair").
func notFound(w http.ResponseWriter, svc Service, message, neutronType string) {
	switch svc {
	case ComputeService:
		writeJSON(w, http.StatusNotFound, map[string]any{
			"itemNotFound": map[string]any{"code": http.StatusNotFound, "message": message}})
	case NetworkService:
		writeJSON(w, http.StatusNotFound, map[string]any{
			"NeutronError": map[string]any{"type": neutronType, "message": message, "detail": ""}})
	default:
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, "404 Not Found\n\n%s\n\n", message)
	}
}

func badRequest(w http.ResponseWriter, message string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{
		"badRequest": map[string]any{"code": http.StatusBadRequest, "message": message}})
}

// pageParams reads limit and marker, the pagination parameters Glance and Nova share.
func pageParams(q url.Values) (limit int, marker string, err error) {
	marker = q.Get("marker")
	if v := q.Get("limit"); v != "" {
		limit, err = strconv.Atoi(v)
		if err != nil || limit < 0 {
			return 0, "", fmt.Errorf("invalid limit %q: must be a non-negative integer", v)
		}
	}
	return limit, marker, nil
}

// page applies marker and limit to ids in seed order. It reports the marker for the next page, or ""
// when the page is the last one.
func page[T any](items []T, id func(T) string, limit int, marker string) (out []T, next string, found bool) {
	start := 0
	if marker != "" {
		i := slices.IndexFunc(items, func(it T) bool { return id(it) == marker })
		if i < 0 {
			return nil, "", false
		}
		start = i + 1
	}
	out = items[start:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
		next = id(out[len(out)-1])
	}
	return out, next, true
}

// ---------------------------------------------------------------------------------------------------
// Image (Glance v2)

// Fields of a Glance image document; custom properties must not reuse them.
var reservedImageFields = map[string]bool{
	"id": true, "name": true, "status": true, "visibility": true, "protected": true, "os_hidden": true,
	"checksum": true, "os_hash_algo": true, "os_hash_value": true, "owner": true, "size": true,
	"virtual_size": true, "min_ram": true, "min_disk": true, "disk_format": true,
	"container_format": true, "created_at": true, "updated_at": true, "tags": true, "self": true,
	"file": true, "schema": true, "os_distro": true, "locations": true, "direct_url": true,
}

// Query parameters of GET /v2/images that are not filters.
var imageListControls = map[string]bool{
	"limit": true, "marker": true, "sort": true, "sort_key": true, "sort_dir": true, "member_status": true,
}

func (c *Cloud) imageRoutes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/images", c.listImages)
	mux.HandleFunc("GET /v2/images/{id}", c.getImage)
	mux.HandleFunc("GET /v2/schemas/image", imageSchema)
	mux.HandleFunc("GET /{$}", imageVersions)
	return mux
}

func (c *Cloud) imageDoc(img Image) map[string]any {
	doc := map[string]any{
		"id": img.ID, "name": img.Name, "status": orDefault(img.Status, "active"),
		"visibility": orDefault(img.Visibility, "public"), "protected": false, "os_hidden": false,
		"checksum": nil, "os_hash_algo": nil, "os_hash_value": nil, "owner": orDefault(img.Owner, fakeOwner),
		"size": nil, "virtual_size": nil, "min_ram": img.MinRAM, "min_disk": img.MinDisk,
		"disk_format": orDefault(img.DiskFormat, "qcow2"), "container_format": orDefault(img.ContainerFormat, "bare"),
		"created_at": c.created, "updated_at": c.created, "tags": orEmpty(img.Tags),
		"self": "/v2/images/" + img.ID, "file": "/v2/images/" + img.ID + "/file", "schema": "/v2/schemas/image",
	}
	if img.Size > 0 {
		doc["size"] = img.Size
	}
	if img.OSDistro != "" {
		doc["os_distro"] = img.OSDistro
	}
	for k, v := range img.Properties {
		doc[k] = v
	}
	return doc
}

// imageMatches applies Glance's equality filters: a field or custom property must equal the value; a
// property the image lacks never matches, as in Glance.
func (c *Cloud) imageMatches(img Image, q url.Values) bool {
	doc := c.imageDoc(img)
	for key, values := range q {
		if imageListControls[key] {
			continue
		}
		if key == "tag" { // repeated: the image must carry every tag (CAPO's image filter by tags)
			for _, want := range values {
				if !slices.Contains(img.Tags, want) {
					return false
				}
			}
			continue
		}
		got, ok := doc[key]
		if !ok || got == nil {
			return false
		}
		if !slices.Contains(values, fmt.Sprint(got)) {
			return false
		}
	}
	return true
}

func (c *Cloud) listImages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, marker, err := pageParams(q)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	var matching []Image
	for _, img := range c.seed.Images {
		if c.imageMatches(img, q) {
			matching = append(matching, img)
		}
	}
	pageItems, next, found := page(matching, func(i Image) string { return i.ID }, limit, marker)
	if !found {
		badRequest(w, fmt.Sprintf("marker %q not found", marker))
		return
	}
	docs := make([]map[string]any, 0, len(pageItems))
	for _, img := range pageItems {
		docs = append(docs, c.imageDoc(img))
	}
	body := map[string]any{"images": docs, "first": "/v2/images", "schema": "/v2/schemas/images"}
	if next != "" {
		nq := url.Values{}
		for k, v := range q {
			nq[k] = v
		}
		nq.Set("marker", next)
		body["next"] = "/v2/images?" + nq.Encode()
	}
	writeJSON(w, http.StatusOK, body)
}

func (c *Cloud) getImage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if img, ok := c.imageByID(id); ok {
		writeJSON(w, http.StatusOK, c.imageDoc(img))
		return
	}
	notFound(w, ImageService, fmt.Sprintf("No image found with ID %s", id), "")
}

// imageSchema is what glanceclient builds its model from after every image fetch; it validates each
// image against it, so every non-string field of imageDoc must be declared here.
func imageSchema(w http.ResponseWriter, _ *http.Request) {
	str := map[string]any{"type": "string"}
	nullableStr := map[string]any{"type": []string{"null", "string"}}
	nullableInt := map[string]any{"type": []string{"null", "integer"}}
	writeJSON(w, http.StatusOK, map[string]any{
		"name": "image",
		"properties": map[string]any{
			"id": str, "name": nullableStr, "status": str, "visibility": str,
			"protected": map[string]any{"type": "boolean"}, "os_hidden": map[string]any{"type": "boolean"},
			"checksum": nullableStr, "os_hash_algo": nullableStr, "os_hash_value": nullableStr,
			"owner": nullableStr, "size": nullableInt, "virtual_size": nullableInt,
			"min_ram": map[string]any{"type": "integer"}, "min_disk": map[string]any{"type": "integer"},
			"disk_format": nullableStr, "container_format": nullableStr,
			"created_at": str, "updated_at": str, "self": str, "file": str, "schema": str,
			"tags":      map[string]any{"type": "array", "items": str},
			"os_distro": str,
		},
		"additionalProperties": str,
		"links": []map[string]string{
			{"rel": "self", "href": "{self}"}, {"rel": "enclosure", "href": "{file}"},
			{"rel": "describedby", "href": "{schema}"},
		},
	})
}

// ---------------------------------------------------------------------------------------------------
// Compute (Nova v2.1)

func (c *Cloud) computeRoutes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2.1/flavors", c.listFlavors(false))
	mux.HandleFunc("GET /v2.1/flavors/detail", c.listFlavors(true))
	mux.HandleFunc("GET /v2.1/flavors/{id}", c.getFlavor)
	mux.HandleFunc("GET /v2.1/flavors/{id}/os-extra_specs", c.getFlavorExtraSpecs)
	mux.HandleFunc("GET /v2.1/os-keypairs", c.listKeypairs)
	mux.HandleFunc("POST /v2.1/flavors", c.createFlavor)
	mux.HandleFunc("DELETE /v2.1/flavors/{id}", c.deleteFlavor)
	mux.HandleFunc("GET /v2.1/os-keypairs/{name}", c.getKeypair)
	mux.HandleFunc("GET /v2.1/os-availability-zone", listAvailabilityZones)
	mux.HandleFunc("GET /v2.1/{$}", c.computeVersion)
	mux.HandleFunc("GET /v2.1", c.computeVersion)
	mux.HandleFunc("GET /v2.1/os-server-groups", c.listServerGroups)
	mux.HandleFunc("POST /v2.1/os-server-groups", c.createServerGroup)
	mux.HandleFunc("GET /v2.1/os-server-groups/{id}", c.getServerGroup)
	mux.HandleFunc("DELETE /v2.1/os-server-groups/{id}", c.deleteServerGroup)
	c.addServerRoutes(mux)
	return mux
}

// echoMicroversion answers with the microversion the client asked for, as Nova does; novaclient
// warns when a requested microversion is not echoed.
func echoMicroversion(w http.ResponseWriter, r *http.Request) {
	if v := r.Header.Get("X-OpenStack-Nova-API-Version"); v != "" {
		w.Header().Set("X-OpenStack-Nova-API-Version", v)
		w.Header().Add("Vary", "X-OpenStack-Nova-API-Version")
	}
	if v := r.Header.Get("OpenStack-API-Version"); v != "" {
		w.Header().Set("OpenStack-API-Version", v)
		w.Header().Add("Vary", "OpenStack-API-Version")
	}
}

func flavorLinks(r *http.Request, id string) []map[string]string {
	return []map[string]string{
		{"rel": "self", "href": "http://" + r.Host + "/v2.1/flavors/" + id},
		{"rel": "bookmark", "href": "http://" + r.Host + "/flavors/" + id},
	}
}

func flavorDoc(r *http.Request, f Flavor, detail bool) map[string]any {
	doc := map[string]any{"id": f.ID, "name": f.Name, "links": flavorLinks(r, f.ID), "description": nil}
	if !detail {
		return doc
	}
	// Before microversion 2.75 Nova reports "no swap" as an empty string.
	var swap any = ""
	if f.Swap > 0 {
		swap = f.Swap
	}
	doc["vcpus"] = f.VCPUs
	doc["ram"] = f.RAM
	doc["disk"] = f.Disk
	doc["swap"] = swap
	doc["OS-FLV-EXT-DATA:ephemeral"] = f.Ephemeral
	doc["OS-FLV-DISABLED:disabled"] = false
	doc["os-flavor-access:is_public"] = !f.Private
	doc["rxtx_factor"] = 1.0
	doc["extra_specs"] = map[string]string{}
	if f.ExtraSpecs != nil {
		doc["extra_specs"] = f.ExtraSpecs
	}
	return doc
}

func (c *Cloud) listFlavors(detail bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		echoMicroversion(w, r)
		q := r.URL.Query()
		limit, marker, err := pageParams(q)
		if err != nil {
			badRequest(w, err.Error())
			return
		}
		minDisk, err1 := atoiOrZero(q.Get("minDisk"))
		minRAM, err2 := atoiOrZero(q.Get("minRam"))
		if err1 != nil || err2 != nil {
			badRequest(w, "minDisk and minRam must be integers")
			return
		}
		var matching []Flavor
		for _, f := range c.flavors() {
			if f.Disk >= minDisk && f.RAM >= minRAM {
				matching = append(matching, f)
			}
		}
		pageItems, _, found := page(matching, func(f Flavor) string { return f.ID }, limit, marker)
		if !found {
			badRequest(w, fmt.Sprintf("marker [%s] not found", marker))
			return
		}
		docs := make([]map[string]any, 0, len(pageItems))
		for _, f := range pageItems {
			docs = append(docs, flavorDoc(r, f, detail))
		}
		writeJSON(w, http.StatusOK, map[string]any{"flavors": docs})
	}
}

func (c *Cloud) getFlavor(w http.ResponseWriter, r *http.Request) {
	echoMicroversion(w, r)
	id := r.PathValue("id")
	for _, f := range c.flavors() {
		if f.ID == id {
			writeJSON(w, http.StatusOK, map[string]any{"flavor": flavorDoc(r, f, true)})
			return
		}
	}
	notFound(w, ComputeService, fmt.Sprintf("Flavor %s could not be found.", id), "")
}

// getFlavorExtraSpecs serves a flavor's extra specs (`openstack flavor show` asks for them).
func (c *Cloud) getFlavorExtraSpecs(w http.ResponseWriter, r *http.Request) {
	echoMicroversion(w, r)
	id := r.PathValue("id")
	for _, f := range c.flavors() {
		if f.ID == id {
			specs := f.ExtraSpecs
			if specs == nil {
				specs = map[string]string{}
			}
			writeJSON(w, http.StatusOK, map[string]any{"extra_specs": specs})
			return
		}
	}
	notFound(w, ComputeService, fmt.Sprintf("Flavor %s could not be found.", id), "")
}

// getKeypair serves every keypair to every caller. Nova scopes keypairs to users; an admin may name the
// user with ?user_id=, which is echoed so the answer looks like Nova's.
func (c *Cloud) getKeypair(w http.ResponseWriter, r *http.Request) {
	echoMicroversion(w, r)
	name := r.PathValue("name")
	userID := orDefault(r.URL.Query().Get("user_id"), "fake-openstack-any-user")
	for i, k := range c.seed.Keypairs {
		if k.Name != name {
			continue
		}
		fingerprint, err := k.Fingerprint()
		if err != nil { // refused by Validate already; kept so a bad key can never become a panic
			writeJSON(w, http.StatusInternalServerError, map[string]any{"computeFault": map[string]any{
				"code": http.StatusInternalServerError, "message": err.Error()}})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"keypair": map[string]any{
			"id": i + 1, "name": k.Name, "public_key": k.PublicKey, "fingerprint": fingerprint,
			"type": orDefault(k.Type, "ssh"), "user_id": userID, "created_at": c.created,
			"updated_at": nil, "deleted": false, "deleted_at": nil,
		}})
		return
	}
	notFound(w, ComputeService, fmt.Sprintf("Keypair %s not found for user %s", name, userID), "")
}

// listKeypairs is Horizon's keypair list (the template dialog's choices): every keypair, in the
// list form Nova gives (each wrapped in {"keypair": …}, without id and dates).
func (c *Cloud) listKeypairs(w http.ResponseWriter, r *http.Request) {
	echoMicroversion(w, r)
	docs := make([]map[string]any, 0, len(c.seed.Keypairs))
	for _, k := range c.seed.Keypairs {
		fingerprint, err := k.Fingerprint()
		if err != nil { // refused by Validate already, as in getKeypair
			writeJSON(w, http.StatusInternalServerError, map[string]any{"computeFault": map[string]any{
				"code": http.StatusInternalServerError, "message": err.Error()}})
			return
		}
		docs = append(docs, map[string]any{"keypair": map[string]any{
			"name": k.Name, "public_key": k.PublicKey, "fingerprint": fingerprint, "type": orDefault(k.Type, "ssh"),
		}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"keypairs": docs})
}

// FakeAvailabilityZone is the one compute availability zone the fake cloud has, Nova's default name.
const FakeAvailabilityZone = "nova"

// listAvailabilityZones is what Horizon's Create Cluster dialog lists its zones from.
func listAvailabilityZones(w http.ResponseWriter, r *http.Request) {
	echoMicroversion(w, r)
	writeJSON(w, http.StatusOK, map[string]any{"availabilityZoneInfo": []map[string]any{
		{"zoneName": FakeAvailabilityZone, "zoneState": map[string]any{"available": true}, "hosts": nil}}})
}

// ---------------------------------------------------------------------------------------------------
// Network (Neutron v2.0)

func (c *Cloud) networkRoutes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2.0/networks", c.listNetworks)
	mux.HandleFunc("GET /v2.0/networks/{id}", c.getNetwork)
	mux.HandleFunc("GET /v2.0/subnets", c.listSubnets)
	mux.HandleFunc("GET /v2.0/subnets/{id}", c.getSubnet)
	mux.HandleFunc("GET /v2.0/extensions", listExtensions)
	mux.HandleFunc("GET /{$}", networkVersions)
	c.addNeutronRoutes(mux)
	return mux
}

// Query parameters of Neutron list calls that are not attribute filters.
var neutronListControls = map[string]bool{
	"fields": true, "limit": true, "marker": true, "page_reverse": true, "sort_key": true, "sort_dir": true,
}

func (c *Cloud) subnetIDs(networkID string) []string {
	ids := []string{}
	for _, s := range c.seed.Subnets {
		if s.NetworkID == networkID {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

func (c *Cloud) networkDoc(n Network) map[string]any {
	return map[string]any{
		"id": n.ID, "name": n.Name, "status": "ACTIVE", "admin_state_up": true,
		"router:external": n.External, "shared": n.Shared, "is_default": n.External,
		"subnets": c.subnetIDs(n.ID), "mtu": orDefaultInt(n.MTU, 1500),
		"project_id": orDefault(n.ProjectID, fakeOwner), "tenant_id": orDefault(n.ProjectID, fakeOwner),
		"availability_zones": []string{"nova"}, "availability_zone_hints": []string{},
		"description": "", "port_security_enabled": true, "ipv4_address_scope": nil,
		"ipv6_address_scope": nil, "tags": []string{}, "revision_number": 1,
		"created_at": c.created, "updated_at": c.created,
	}
}

func (c *Cloud) subnetDoc(s Subnet) map[string]any {
	return map[string]any{
		"id": s.ID, "name": s.Name, "network_id": s.NetworkID, "cidr": s.CIDR,
		"ip_version": orDefaultInt(s.IPVersion, 4), "gateway_ip": nullable(s.GatewayIP),
		"enable_dhcp": s.EnableDHCP, "dns_nameservers": orEmpty(s.DNSNameservers), "host_routes": []any{},
		"allocation_pools": []any{}, "ipv6_ra_mode": nil, "ipv6_address_mode": nil, "subnetpool_id": nil,
		"project_id": orDefault(s.ProjectID, fakeOwner), "tenant_id": orDefault(s.ProjectID, fakeOwner),
		"description": "", "service_types": []string{}, "tags": []string{}, "revision_number": 0,
		"created_at": c.created, "updated_at": c.created,
	}
}

// neutronMatches applies Neutron's attribute filters: each given attribute must equal one of the given
// values (repeated parameters mean OR). Booleans accept Python's "True"/"False" spelling, which is
// what neutronclient sends for router:external=True. Unknown attributes never match, as in Neutron's
// strict filter validation they would be refused.
func neutronMatches(doc map[string]any, q url.Values) bool {
	for key, values := range q {
		if neutronListControls[key] {
			continue
		}
		got, ok := doc[key]
		if !ok {
			return false
		}
		matched := false
		for _, want := range values {
			switch g := got.(type) {
			case bool:
				b, err := strconv.ParseBool(strings.ToLower(want))
				matched = err == nil && b == g
			default:
				matched = fmt.Sprint(g) == want
			}
			if matched {
				break
			}
		}
		if !matched {
			return false
		}
	}
	return true
}

func (c *Cloud) listNetworks(w http.ResponseWriter, r *http.Request) {
	docs := []map[string]any{}
	for _, n := range c.seed.Networks {
		if doc := c.networkDoc(n); matchesFilters(doc, r.URL.Query()) {
			docs = append(docs, doc)
		}
	}
	if caller, ok := c.optionalCaller(r); ok {
		for _, d := range c.simulatedDocs("networks", caller) {
			if matchesFilters(d, r.URL.Query()) {
				docs = append(docs, d)
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"networks": docs})
}

func (c *Cloud) getNetwork(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, n := range c.seed.Networks {
		if n.ID == id {
			writeJSON(w, http.StatusOK, map[string]any{"network": c.networkDoc(n)})
			return
		}
	}
	if caller, ok := c.optionalCaller(r); ok {
		if d, found := c.simulatedDoc("networks", id, caller); found {
			writeJSON(w, http.StatusOK, map[string]any{"network": d})
			return
		}
	}
	notFound(w, NetworkService, fmt.Sprintf("Network %s could not be found.", id), "NetworkNotFound")
}

func (c *Cloud) listSubnets(w http.ResponseWriter, r *http.Request) {
	docs := []map[string]any{}
	for _, s := range c.seed.Subnets {
		if doc := c.subnetDoc(s); matchesFilters(doc, r.URL.Query()) {
			docs = append(docs, doc)
		}
	}
	if caller, ok := c.optionalCaller(r); ok {
		for _, d := range c.simulatedDocs("subnets", caller) {
			if matchesFilters(d, r.URL.Query()) {
				docs = append(docs, d)
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"subnets": docs})
}

// listExtensions answers that the fake Neutron has no API extensions: Horizon asks before nearly
// every network call and then leaves out what extensions would add (ports, routers, quotas…).
func listExtensions(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"extensions": []any{}})
}

func (c *Cloud) getSubnet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for _, s := range c.seed.Subnets {
		if s.ID == id {
			writeJSON(w, http.StatusOK, map[string]any{"subnet": c.subnetDoc(s)})
			return
		}
	}
	if caller, ok := c.optionalCaller(r); ok {
		if d, found := c.simulatedDoc("subnets", id, caller); found {
			writeJSON(w, http.StatusOK, map[string]any{"subnet": d})
			return
		}
	}
	notFound(w, NetworkService, fmt.Sprintf("Subnet %s could not be found.", id), "SubnetNotFound")
}

// ---------------------------------------------------------------------------------------------------

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func orDefaultInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orEmpty(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func nullable(v string) any {
	if v == "" {
		return nil
	}
	return v
}

func atoiOrZero(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	return strconv.Atoi(v)
}
