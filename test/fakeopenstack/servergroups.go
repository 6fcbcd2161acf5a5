package fakeopenstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// Nova server groups (os-server-groups) and the version document and microversion negotiation that
// clients such as gophercloud need to use them. Unlike everything else in the fake these routes
// keep state: in memory, per project, lost on restart. The project comes from the request's token
// (see CallerFunc), so a token is required, as Nova requires one.

// DefaultComputeMaxMicroversion is the newest compute microversion the fake advertises: Nova's in
// the Zed release, the release of the stack's Keystone and magnum-api.
const DefaultComputeMaxMicroversion = "2.93"

// DefaultServerGroupQuota is Nova's default `[quota] server_groups`.
const DefaultServerGroupQuota = 10

// Microversions where server groups change shape: 2.13 adds project_id and user_id, 2.15 the soft
// policies, 2.64 replaces the `policies` list (and the empty `metadata`) by `policy` and `rules`.
var (
	mvMin           = microversion{2, 1}
	mvProjectFields = microversion{2, 13}
	mvSoftPolicies  = microversion{2, 15}
	mvSinglePolicy  = microversion{2, 64}
)

// listMaxLimit is Nova's default `[api] max_limit`.
const listMaxLimit = 1000

// WithComputeMaxMicroversion sets the newest compute microversion the fake advertises and accepts
// ("2.N"), e.g. an older Nova's to exercise a client's fallback.
func WithComputeMaxMicroversion(v string) Option {
	return func(c *Cloud) { c.computeMaxRaw = v }
}

// WithServerGroupQuota sets how many server groups a project may have; negative means unlimited.
func WithServerGroupQuota(n int) Option { return func(c *Cloud) { c.serverGroupQuota = n } }

type microversion struct{ major, minor int }

func parseMicroversion(s string) (microversion, error) {
	major, minor, ok := strings.Cut(s, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil || ma < 0 || mi < 0 {
		return microversion{}, fmt.Errorf("API Version String %s is of invalid format. Must be of format MajorNum.MinorNum.", s) // Nova's wording
	}
	return microversion{ma, mi}, nil
}

func (v microversion) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

func (v microversion) atLeast(o microversion) bool {
	return v.major > o.major || (v.major == o.major && v.minor >= o.minor)
}

// requestedMicroversion reads the compute microversion as Nova does: `OpenStack-API-Version:
// compute X.Y` first, then the legacy `X-OpenStack-Nova-API-Version`; none means 2.1.
func (c *Cloud) requestedMicroversion(r *http.Request) (microversion, int, string) {
	raw := ""
	for _, h := range r.Header.Values("OpenStack-API-Version") {
		for _, part := range strings.Split(h, ",") {
			if svc, v, ok := strings.Cut(strings.TrimSpace(part), " "); ok && strings.EqualFold(svc, "compute") {
				raw = strings.TrimSpace(v)
			}
		}
	}
	if raw == "" {
		raw = strings.TrimSpace(r.Header.Get("X-OpenStack-Nova-API-Version"))
	}
	switch raw {
	case "":
		return mvMin, 0, ""
	case "latest":
		return c.computeMax, 0, ""
	}
	v, err := parseMicroversion(raw)
	if err != nil {
		return microversion{}, http.StatusBadRequest, err.Error()
	}
	if !v.atLeast(mvMin) || !c.computeMax.atLeast(v) {
		return microversion{}, http.StatusNotAcceptable, fmt.Sprintf(
			"Version %s is not supported by the API. Minimum is %s and maximum is %s.", v, mvMin, c.computeMax)
	}
	return v, 0, ""
}

func setMicroversion(w http.ResponseWriter, v microversion) {
	w.Header().Set("OpenStack-API-Version", "compute "+v.String())
	w.Header().Set("X-OpenStack-Nova-API-Version", v.String())
	w.Header().Add("Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version")
}

// novaFault answers in Nova's error format: {"<fault name>": {"code": …, "message": …}}.
func novaFault(w http.ResponseWriter, status int, message string) {
	name := map[int]string{
		http.StatusBadRequest: "badRequest", http.StatusForbidden: "forbidden",
		http.StatusNotFound: "itemNotFound", http.StatusConflict: "conflictingRequest",
	}[status]
	if name == "" {
		name = "computeFault"
	}
	writeJSON(w, status, map[string]any{name: map[string]any{"code": status, "message": message}})
}

// keystoneError answers like keystonemiddleware, which rejects a request before Nova sees it.
func keystoneError(w http.ResponseWriter, status int, title, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "title": title, "message": message}})
}

// computeVersion serves GET /v2.1/: the version document gophercloud's microversion discovery
// reads. Like Nova's it needs no token.
func (c *Cloud) computeVersion(w http.ResponseWriter, r *http.Request) {
	self := "http://" + r.Host + "/v2.1/"
	writeJSON(w, http.StatusOK, map[string]any{"version": map[string]any{
		"id": "v2.1", "status": "CURRENT", "version": c.computeMax.String(), "min_version": mvMin.String(),
		"updated": "2013-07-23T11:33:21Z",
		"links": []map[string]string{
			{"rel": "self", "href": self},
			{"rel": "describedby", "type": "text/html", "href": "http://docs.openstack.org/"},
		},
		"media-types": []map[string]string{
			{"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"},
		},
	}})
}

type serverGroup struct {
	id, name, policy  string
	maxServerPerHost  int // 0: no rule
	projectID, userID string
	members           []string // server ids, in the order they were created
}

// serverGroups is the fake's only mutable state: the groups of each project in creation order,
// which is also the order Nova lists them in.
type serverGroups struct {
	mu        sync.Mutex
	byProject map[string][]*serverGroup
}

func (s *serverGroups) list(project string) []serverGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]serverGroup, 0, len(s.byProject[project]))
	for _, g := range s.byProject[project] {
		out = append(out, *g)
	}
	return out
}

func (s *serverGroups) get(project, id string) (serverGroup, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.byProject[project] {
		if g.id == id {
			return *g, true
		}
	}
	return serverGroup{}, false
}

var errQuota = errors.New("Quota exceeded, too many server groups.") // Nova's wording

// add checks the quota and adds the group atomically, so concurrent creates cannot exceed it.
func (s *serverGroups) add(g *serverGroup, quota int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byProject == nil {
		s.byProject = map[string][]*serverGroup{}
	}
	if quota >= 0 && len(s.byProject[g.projectID]) >= quota {
		return errQuota
	}
	s.byProject[g.projectID] = append(s.byProject[g.projectID], g)
	return nil
}

func (s *serverGroups) addMember(project, id, server string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.byProject[project] {
		if g.id == id {
			g.members = append(g.members, server)
		}
	}
}

func (s *serverGroups) removeMember(project, id, server string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.byProject[project] {
		if g.id == id {
			g.members = slices.DeleteFunc(slices.Clone(g.members), func(m string) bool { return m == server })
		}
	}
}

func (s *serverGroups) remove(project, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	groups := s.byProject[project]
	i := slices.IndexFunc(groups, func(g *serverGroup) bool { return g.id == id })
	if i < 0 {
		return false
	}
	s.byProject[project] = slices.Delete(groups, i, i+1)
	return true
}

func serverGroupDoc(g serverGroup, v microversion) map[string]any {
	doc := map[string]any{"id": g.id, "name": g.name, "members": append([]string{}, g.members...)}
	if v.atLeast(mvSinglePolicy) {
		rules := map[string]any{}
		if g.maxServerPerHost > 0 {
			rules["max_server_per_host"] = g.maxServerPerHost
		}
		doc["policy"], doc["rules"] = g.policy, rules
	} else {
		doc["policies"], doc["metadata"] = []string{g.policy}, map[string]any{}
	}
	if v.atLeast(mvProjectFields) {
		doc["project_id"], doc["user_id"] = g.projectID, g.userID
	}
	return doc
}

// serverGroupRequest authenticates the request and negotiates its microversion, answering the
// error itself when either fails (authentication first, as keystonemiddleware runs before Nova).
func (c *Cloud) serverGroupRequest(w http.ResponseWriter, r *http.Request) (Caller, microversion, bool) {
	caller, ok := c.authenticate(w, r)
	if !ok {
		return Caller{}, microversion{}, false
	}
	v, status, msg := c.requestedMicroversion(r)
	if status != 0 {
		novaFault(w, status, msg)
		return Caller{}, microversion{}, false
	}
	setMicroversion(w, v)
	return caller, v, true
}

func (c *Cloud) listServerGroups(w http.ResponseWriter, r *http.Request) {
	caller, v, ok := c.serverGroupRequest(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit, offset := listMaxLimit, 0
	for key, dst := range map[string]*int{"limit": &limit, "offset": &offset} {
		if raw := q.Get(key); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 0 {
				novaFault(w, http.StatusBadRequest, fmt.Sprintf("Invalid input for query parameters %s. Value: %s. %q is not a non-negative integer", key, raw, raw))
				return
			}
			*dst = n
		}
	}
	limit = min(limit, listMaxLimit)
	// all_projects needs the admin role in Nova; the fake's callers never have it, so, as Nova does
	// for them, it lists the caller's own project only.
	groups := c.groups.list(caller.ProjectID)
	docs := []map[string]any{}
	for i := offset; i < len(groups) && len(docs) < limit; i++ {
		docs = append(docs, serverGroupDoc(groups[i], v))
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_groups": docs})
}

func (c *Cloud) getServerGroup(w http.ResponseWriter, r *http.Request) {
	caller, v, ok := c.serverGroupRequest(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	g, found := c.groups.get(caller.ProjectID, id)
	if !found {
		novaFault(w, http.StatusNotFound, fmt.Sprintf("Instance group %s could not be found.", id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_group": serverGroupDoc(g, v)})
}

func (c *Cloud) deleteServerGroup(w http.ResponseWriter, r *http.Request) {
	caller, _, ok := c.serverGroupRequest(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	// Another project's group is "not found" for a non-admin, as in Nova.
	if !c.groups.remove(caller.ProjectID, id) {
		novaFault(w, http.StatusNotFound, fmt.Sprintf("Instance group %s could not be found.", id))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func invalidInput(field string, value any, reason string) string {
	return fmt.Sprintf("Invalid input for field/attribute %s. Value: %v. %s", field, value, reason)
}

// parseServerGroup validates a create body against the schema of Nova's microversion v.
func parseServerGroup(body []byte, v microversion) (name, policy string, maxPerHost int, msg string) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return "", "", 0, "Malformed request body"
	}
	raw, ok := top["server_group"]
	if !ok {
		return "", "", 0, "Invalid input for field/attribute server_group. Value: None. 'server_group' is a required property"
	}
	for k := range top {
		if k != "server_group" {
			return "", "", 0, fmt.Sprintf("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	var sg map[string]any
	if err := json.Unmarshal(raw, &sg); err != nil || sg == nil {
		return "", "", 0, invalidInput("server_group", string(raw), "It is not of type 'object'")
	}
	allowed := []string{"name", "policies"}
	if v.atLeast(mvSinglePolicy) {
		allowed = []string{"name", "policy", "rules"}
	}
	for k := range sg {
		if !slices.Contains(allowed, k) {
			return "", "", 0, fmt.Sprintf("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	for _, k := range allowed[:2] {
		if _, ok := sg[k]; !ok {
			return "", "", 0, fmt.Sprintf("Invalid input for field/attribute server_group. Value: %s. '%s' is a required property", raw, k)
		}
	}
	name, ok = sg["name"].(string)
	if !ok || name == "" || len(name) > 255 || strings.TrimSpace(name) != name {
		return "", "", 0, invalidInput("name", sg["name"], "A name must be 1 to 255 characters without leading or trailing whitespace.")
	}
	enum := []string{"anti-affinity", "affinity"}
	if v.atLeast(mvSoftPolicies) {
		enum = append(enum, "soft-anti-affinity", "soft-affinity")
	}
	notOneOf := func(field string, p any) string {
		return invalidInput(field, p, fmt.Sprintf("'%v' is not one of ['%s']", p, strings.Join(enum, "', '")))
	}
	if !v.atLeast(mvSinglePolicy) {
		list, ok := sg["policies"].([]any)
		if !ok || len(list) != 1 {
			return "", "", 0, invalidInput("policies", sg["policies"], "exactly one policy is required")
		}
		p, _ := list[0].(string)
		if !slices.Contains(enum, p) {
			return "", "", 0, notOneOf("policies", list[0])
		}
		return name, p, 0, ""
	}
	policy, _ = sg["policy"].(string)
	if !slices.Contains(enum, policy) {
		return "", "", 0, notOneOf("policy", sg["policy"])
	}
	if rawRules, present := sg["rules"]; present {
		rules, ok := rawRules.(map[string]any)
		if !ok {
			return "", "", 0, invalidInput("rules", rawRules, "It is not of type 'object'")
		}
		for k, val := range rules {
			f, isNum := val.(float64)
			if k != "max_server_per_host" || !isNum || f < 1 || f != float64(int(f)) {
				return "", "", 0, invalidInput("rules", rawRules, "only max_server_per_host, a positive integer, is allowed")
			}
			maxPerHost = int(f)
		}
		if policy != "anti-affinity" && len(rules) > 0 {
			return "", "", 0, "Only anti-affinity policy supports rules."
		}
	}
	return name, policy, maxPerHost, ""
}

func (c *Cloud) createServerGroup(w http.ResponseWriter, r *http.Request) {
	caller, v, ok := c.serverGroupRequest(w, r)
	if !ok {
		return
	}
	body, err := readBody(r)
	if err != nil {
		novaFault(w, http.StatusBadRequest, "Malformed request body")
		return
	}
	name, policy, maxPerHost, msg := parseServerGroup(body, v)
	if msg != "" {
		novaFault(w, http.StatusBadRequest, msg)
		return
	}
	g := &serverGroup{id: uuid.NewString(), name: name, policy: policy, maxServerPerHost: maxPerHost,
		projectID: caller.ProjectID, userID: caller.UserID}
	if err := c.groups.add(g, c.serverGroupQuota); err != nil {
		novaFault(w, http.StatusForbidden, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"server_group": serverGroupDoc(*g, v)})
}

// maxBody bounds request bodies: a server create carries up to 64 KiB of base64 user data (Nova's
// limit, checked in servers.go) besides its other fields.
const maxBody = 1 << 20

func readBody(r *http.Request) ([]byte, error) {
	defer r.Body.Close()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(body) > maxBody {
		err = errors.New("request body too large")
	}
	return body, err
}
