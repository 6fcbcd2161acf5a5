package fakeopenstack

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// The simulation: the Neutron, Nova server and Octavia resources that Cluster API Provider
// OpenStack (CAPO) creates, kept in memory per project (lost on restart). Nothing boots and no
// packet moves: a server is ACTIVE with its ports' addresses the moment it is created, a load
// balancer is ACTIVE at once. Documents are kept as the JSON maps the APIs answer with, so that a
// filter on any attribute works the way Neutron's and Octavia's do.

type doc = map[string]any

// collection keeps documents in creation order, the order the APIs list them in.
type collection struct {
	order []string
	docs  map[string]doc
}

func (c *collection) put(d doc) {
	id := d["id"].(string)
	if _, ok := c.docs[id]; !ok {
		c.order = append(c.order, id)
	}
	c.docs[id] = d
}

func (c *collection) remove(id string) {
	delete(c.docs, id)
	c.order = slices.DeleteFunc(c.order, func(s string) bool { return s == id })
}

func (c *collection) all() []doc {
	out := make([]doc, 0, len(c.order))
	for _, id := range c.order {
		out = append(out, c.docs[id])
	}
	return out
}

// simState holds every simulated resource. One mutex: the fake serves a handful of controllers,
// and cross-resource checks (a port in use, a quota) must see one consistent state.
type simState struct {
	mu     sync.Mutex
	colls  map[string]*collection
	nextIP map[string]netip.Addr // subnet id -> next address to hand out
	// quotas[project][resource] overrides the defaults (Nova's os-quota-sets).
	quotas map[string]map[string]int
}

func (s *simState) coll(name string) *collection {
	if s.colls == nil {
		s.colls = map[string]*collection{}
	}
	c, ok := s.colls[name]
	if !ok {
		c = &collection{docs: map[string]doc{}}
		s.colls[name] = c
	}
	return c
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }

func newMAC() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("fa:16:3e:%02x:%02x:%02x", b[0], b[1], b[2])
}

// allocateIP hands out the next free address of a subnet's CIDR (after the gateway), as Neutron's
// IPAM does from its allocation pool.
func (s *simState) allocateIP(subnetID, cidr string, taken func(string) bool) (string, error) {
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("subnet %s has an invalid cidr %q", subnetID, cidr)
	}
	if s.nextIP == nil {
		s.nextIP = map[string]netip.Addr{}
	}
	next, ok := s.nextIP[subnetID]
	if !ok {
		next = prefix.Masked().Addr().Next().Next() // .0 network, .1 gateway
	}
	for addr := next; prefix.Contains(addr); addr = addr.Next() {
		if addr.Is4() && !prefix.Contains(addr.Next()) { // the broadcast address
			break
		}
		if !taken(addr.String()) {
			s.nextIP[subnetID] = addr.Next()
			return addr.String(), nil
		}
	}
	return "", fmt.Errorf("No more IP addresses available on subnet %s.", subnetID) // Neutron's wording
}

// decodeObject reads {"<key>": {...}} and returns the inner object.
func decodeObject(r *http.Request, key string) (doc, string) {
	body, err := readBody(r)
	if err != nil {
		return nil, "Request body too large or unreadable"
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, "Malformed request body: " + err.Error()
	}
	raw, ok := top[key]
	if !ok {
		return nil, fmt.Sprintf("Resource body required: '%s' is missing", key)
	}
	var inner doc
	if err := json.Unmarshal(raw, &inner); err != nil || inner == nil {
		return nil, fmt.Sprintf("'%s' is not an object", key)
	}
	return inner, ""
}

func str(d doc, key string) string {
	v, _ := d[key].(string)
	return v
}

func strList(v any) []string {
	switch l := v.(type) {
	case []string:
		return l
	case []any:
		out := make([]string, 0, len(l))
		for _, x := range l {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// cloneDoc copies a document one level deep plus its nested lists of maps, enough that a rendered
// answer never aliases the stored state.
func cloneDoc(d doc) doc {
	b, _ := json.Marshal(d)
	var out doc
	_ = json.Unmarshal(b, &out)
	return out
}

// matchesFilters applies Neutron's and Octavia's list filters: tags (all), tags-any, not-tags,
// not-tags-any (comma-separated), fixed_ips (ip_address=… / subnet_id=…), and equality on any
// other attribute (see neutronMatches).
func matchesFilters(d doc, q url.Values) bool {
	rest := url.Values{}
	tags := strList(d["tags"])
	for key, values := range q {
		switch key {
		case "tags", "tags-any", "not-tags", "not-tags-any":
			var want []string
			for _, v := range values {
				want = append(want, strings.Split(v, ",")...)
			}
			all, anyOf := true, false
			for _, t := range want {
				if slices.Contains(tags, t) {
					anyOf = true
				} else {
					all = false
				}
			}
			ok := map[string]bool{"tags": all, "tags-any": anyOf, "not-tags": !all, "not-tags-any": !anyOf}[key]
			if !ok {
				return false
			}
		case "fixed_ips":
			ips, _ := d["fixed_ips"].([]any)
			for _, v := range values {
				k, want, _ := strings.Cut(v, "=")
				found := false
				for _, ip := range ips {
					if m, ok := ip.(map[string]any); ok && fmt.Sprint(m[k]) == want {
						found = true
					}
				}
				if !found {
					return false
				}
			}
		default:
			rest[key] = values
		}
	}
	return neutronMatches(d, rest)
}

func newID() string { return uuid.NewString() }

func jsonUnmarshalStrict(raw []byte, v any) error { return json.Unmarshal(raw, v) }

// stringAttributes are attributes the APIs define as strings (or null); a body giving another type
// is refused the way Neutron's attribute validation refuses it, instead of being stored as is.
var stringAttributes = []string{"name", "description", "network_id", "subnet_id", "cidr", "gateway_ip",
	"device_id", "device_owner", "mac_address", "security_group_id", "direction", "ethertype", "protocol",
	"remote_ip_prefix", "remote_group_id", "floating_network_id", "floating_ip_address", "port_id",
	"vip_subnet_id", "vip_network_id", "vip_address", "loadbalancer_id", "listener_id", "pool_id",
	"lb_algorithm", "type", "address", "provider", "flavor_id", "availability_zone"}

// wrongTypes reports the first attribute of in whose JSON type is not what the API takes.
func wrongTypes(in doc) string {
	for _, k := range stringAttributes {
		if v, ok := in[k]; ok && v != nil {
			if _, isString := v.(string); !isString {
				return fmt.Sprintf("Invalid input for %s. Reason: '%v' is not a valid string.", k, v)
			}
		}
	}
	if v, ok := in["tags"]; ok && v != nil {
		list, isList := v.([]any)
		for _, t := range list {
			if _, isString := t.(string); !isString {
				isList = false
			}
		}
		if !isList {
			return fmt.Sprintf("Invalid input for tags. Reason: '%v' is not a list of strings.", v)
		}
	}
	return ""
}
