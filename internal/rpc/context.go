package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
)

// Context is the request context magnum-api packs into every message as one top-level
// `_context_<key>` entry per key: the caller's identity, roles, request ids and, for
// acting as the user, its Keystone token and token body.
//
// The typed fields cover the keys Magnum 15.0.1 … 23.0.0 send. Keys this type does not know are
// kept in Extra, and the wire order of all keys is remembered, so a decoded context re-encodes to
// the same keys, in the same order, with the same values (null stays null). Fields set in code on
// a fresh Context are encoded only when non-zero, in magnum's to_dict() order.
//
// A Context is safe to log: String, Format (%v %+v %#v %s %q), GoString, MarshalLog (logr),
// LogValue (slog) and MarshalJSON all leave out AuthToken, AuthTokenInfo, Password, TrustID and
// every unknown key whose name looks like a secret. The wire form is produced only by the
// message codec (EncodeMessage / Client).
type Context struct {
	User            string   // user: the user id (oslo.context)
	UserID          string   // user_id (magnum)
	UserName        string   // user_name
	ProjectID       string   // project_id
	Project         string   // project (= project id; oslo.context's tenant)
	ProjectName     string   // project_name
	SystemScope     string   // system_scope ("all" for system-scoped tokens)
	Domain          string   // domain (= domain_id on Zed)
	UserDomain      string   // user_domain
	ProjectDomain   string   // project_domain
	DomainID        string   // domain_id (Zed / 2023.1 only)
	DomainName      string   // domain_name (Zed / 2023.1 only)
	UserDomainID    string   // user_domain_id (17.0.0+)
	UserDomainName  string   // user_domain_name (17.0.0+)
	IsAdmin         bool     // is_admin
	IsAdminProject  bool     // is_admin_project
	ReadOnly        bool     // read_only
	ShowDeleted     bool     // show_deleted
	AllTenants      bool     // all_tenants
	Roles           []string // roles
	RequestID       string   // request_id: "req-<uuid>"
	GlobalRequestID string   // global_request_id
	ResourceUUID    string   // resource_uuid
	UserIdentity    string   // user_identity: "user project domain user_domain project_domain"
	AuthURL         string   // auth_url: Keystone v3 endpoint

	// Secrets: never logged.
	AuthToken     string          // auth_token: the caller's Keystone token
	AuthTokenInfo json.RawMessage // auth_token_info: the whole token body incl. catalog
	TrustID       string          // trust_id (null from the API; removed on master)
	Password      string          // password (null from the API; removed on master)

	// Extra holds every `_context_*` key not listed above (e.g. trace_info), raw.
	Extra map[string]json.RawMessage

	// keys is the wire order of all keys (without the `_context_` prefix) as decoded.
	keys []string
	// raw is every decoded value, so untouched fields re-encode byte-for-byte (null vs "").
	raw map[string]json.RawMessage
	// decoded is a copy of the typed fields right after decoding; a field that still equals it
	// is re-encoded from raw.
	decoded *contextFields
}

// contextFields is the comparable snapshot of the typed fields.
type contextFields struct {
	strs  map[string]string
	bools map[string]bool
	roles []string
	info  json.RawMessage
}

// contextKeyOrder is RequestContext.to_dict() order in Magnum 15.0.1 (a superset of later
// releases' keys), used for keys set in code that were not decoded from the wire.
var contextKeyOrder = []string{
	"user", "project_id", "system_scope", "project", "domain", "user_domain", "project_domain",
	"is_admin", "read_only", "show_deleted", "auth_token", "request_id", "global_request_id",
	"resource_uuid", "roles", "user_identity", "is_admin_project", "auth_url", "domain_id",
	"domain_name", "user_domain_id", "user_domain_name", "user_name", "user_id", "project_name",
	"trust_id", "auth_token_info", "password", "all_tenants",
}

var knownContextKeys = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range contextKeyOrder {
		m[k] = true
	}
	return m
}()

func (c *Context) strField(key string) *string {
	switch key {
	case "user":
		return &c.User
	case "user_id":
		return &c.UserID
	case "user_name":
		return &c.UserName
	case "project_id":
		return &c.ProjectID
	case "project":
		return &c.Project
	case "project_name":
		return &c.ProjectName
	case "system_scope":
		return &c.SystemScope
	case "domain":
		return &c.Domain
	case "user_domain":
		return &c.UserDomain
	case "project_domain":
		return &c.ProjectDomain
	case "domain_id":
		return &c.DomainID
	case "domain_name":
		return &c.DomainName
	case "user_domain_id":
		return &c.UserDomainID
	case "user_domain_name":
		return &c.UserDomainName
	case "request_id":
		return &c.RequestID
	case "global_request_id":
		return &c.GlobalRequestID
	case "resource_uuid":
		return &c.ResourceUUID
	case "user_identity":
		return &c.UserIdentity
	case "auth_url":
		return &c.AuthURL
	case "auth_token":
		return &c.AuthToken
	case "trust_id":
		return &c.TrustID
	case "password":
		return &c.Password
	}
	return nil
}

func (c *Context) boolField(key string) *bool {
	switch key {
	case "is_admin":
		return &c.IsAdmin
	case "is_admin_project":
		return &c.IsAdminProject
	case "read_only":
		return &c.ReadOnly
	case "show_deleted":
		return &c.ShowDeleted
	case "all_tenants":
		return &c.AllTenants
	}
	return nil
}

func (c *Context) snapshot() *contextFields {
	f := &contextFields{strs: map[string]string{}, bools: map[string]bool{}}
	for _, k := range contextKeyOrder {
		if p := c.strField(k); p != nil {
			f.strs[k] = *p
		} else if b := c.boolField(k); b != nil {
			f.bools[k] = *b
		}
	}
	f.roles = slices.Clone(c.Roles)
	f.info = bytes.Clone(c.AuthTokenInfo)
	return f
}

// setContextKey stores one decoded `_context_<key>` value. A value of an unexpected JSON type
// (say, roles sent as a string) leaves the typed field at its zero value, which is the safe
// reading for is_admin and friends, but is kept raw and re-encoded unchanged.
func (c *Context) setContextKey(key string, value json.RawMessage) {
	if c.raw == nil {
		c.raw = map[string]json.RawMessage{}
	}
	if _, seen := c.raw[key]; !seen {
		c.keys = append(c.keys, key)
	}
	c.raw[key] = value
	switch {
	case c.strField(key) != nil:
		if s, ok := unquoteJSONString(value); ok {
			*c.strField(key) = string(s)
		}
	case c.boolField(key) != nil:
		switch string(value) {
		case "true":
			*c.boolField(key) = true
		case "false":
			*c.boolField(key) = false
		}
	case key == "roles":
		var roles []string
		if json.Unmarshal(value, &roles) == nil {
			c.Roles = roles
		}
	case key == "auth_token_info":
		if !bytes.Equal(value, []byte("null")) {
			c.AuthTokenInfo = bytes.Clone(value)
		}
	default:
		if c.Extra == nil {
			c.Extra = map[string]json.RawMessage{}
		}
		c.Extra[key] = value
	}
}

// finishDecode records the decoded state so unchanged fields re-encode from the raw bytes.
func (c *Context) finishDecode() { c.decoded = c.snapshot() }

// Keys returns the context keys in wire order (without the `_context_` prefix), followed by any
// key set in code since.
func (c *Context) Keys() []string {
	var out []string
	for _, m := range c.members() {
		out = append(out, m.Key)
	}
	return out
}

// Raw returns the raw JSON of one key as it would be encoded, and whether it is present.
func (c *Context) Raw(key string) (json.RawMessage, bool) {
	for _, m := range c.members() {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// members returns the (key, JSON value) pairs to put on the wire, in order.
func (c *Context) members() []member {
	if c == nil {
		return nil
	}
	var out []member
	emitted := map[string]bool{}
	for _, k := range c.keys {
		if v, ok := c.encodeKey(k, true); ok {
			out = append(out, member{k, v})
			emitted[k] = true
		}
	}
	for _, k := range contextKeyOrder {
		if emitted[k] {
			continue
		}
		if v, ok := c.encodeKey(k, false); ok {
			out = append(out, member{k, v})
			emitted[k] = true
		}
	}
	var extra []string
	for k := range c.Extra {
		if !emitted[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		out = append(out, member{k, c.Extra[k]})
	}
	return out
}

// encodeKey returns the JSON for key. For a key that was on the wire (present=true) the raw
// value is reused unless the typed field changed; a key not on the wire is emitted only when its
// field is non-zero.
func (c *Context) encodeKey(key string, present bool) (json.RawMessage, bool) {
	raw, hadRaw := c.raw[key]
	unchanged := func(cur, orig bool) bool { return present && hadRaw && cur == orig }
	marshal := func(v any) json.RawMessage {
		b, _ := json.Marshal(v) // strings, bools and []string always marshal
		return b
	}
	switch {
	case c.strField(key) != nil:
		v := *c.strField(key)
		if c.decoded != nil && unchanged(true, v == c.decoded.strs[key]) {
			return raw, true
		}
		if !present && v == "" {
			return nil, false
		}
		return marshal(v), true
	case c.boolField(key) != nil:
		v := *c.boolField(key)
		if c.decoded != nil && unchanged(true, v == c.decoded.bools[key]) {
			return raw, true
		}
		if !present && !v {
			return nil, false
		}
		return marshal(v), true
	case key == "roles":
		if c.decoded != nil && unchanged(true, slices.Equal(c.Roles, c.decoded.roles)) {
			return raw, true
		}
		if !present && c.Roles == nil {
			return nil, false
		}
		if c.Roles == nil {
			return json.RawMessage("[]"), true
		}
		return marshal(c.Roles), true
	case key == "auth_token_info":
		if c.decoded != nil && unchanged(true, bytes.Equal(c.AuthTokenInfo, c.decoded.info)) {
			return raw, true
		}
		if len(c.AuthTokenInfo) == 0 {
			if !present {
				return nil, false
			}
			return json.RawMessage("null"), true
		}
		return c.AuthTokenInfo, true
	default:
		if v, ok := c.Extra[key]; ok {
			return v, true
		}
		if present && hadRaw {
			// Deleted from Extra by the caller: drop it.
			return nil, false
		}
		return nil, false
	}
}

// Clone returns a deep copy.
func (c *Context) Clone() *Context {
	if c == nil {
		return nil
	}
	n := *c
	n.Roles = slices.Clone(c.Roles)
	n.AuthTokenInfo = bytes.Clone(c.AuthTokenInfo)
	n.keys = slices.Clone(c.keys)
	if c.Extra != nil {
		n.Extra = make(map[string]json.RawMessage, len(c.Extra))
		for k, v := range c.Extra {
			n.Extra[k] = bytes.Clone(v)
		}
	}
	if c.raw != nil {
		n.raw = make(map[string]json.RawMessage, len(c.raw))
		for k, v := range c.raw {
			n.raw[k] = v
		}
	}
	if c.decoded != nil {
		d := *c.decoded
		n.decoded = &d
	}
	return &n
}

// ---- redacted views -------------------------------------------------------------------------

// secretKeyMarkers flag unknown context keys whose values must not be logged.
var secretKeyMarkers = []string{"token", "password", "secret", "passwd", "credential", "trust", "key", "trace_info", "cert"}

func isSecretContextKey(key string) bool {
	k := strings.ToLower(key)
	for _, m := range secretKeyMarkers {
		if strings.Contains(k, m) {
			return true
		}
	}
	return false
}

// safeAttrs are the fields that may appear in logs.
func (c Context) safeAttrs() []slog.Attr {
	attrs := []slog.Attr{}
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	add("request_id", c.RequestID)
	add("global_request_id", c.GlobalRequestID)
	userID := c.UserID
	if userID == "" {
		userID = c.User
	}
	add("user_id", userID)
	add("user_name", c.UserName)
	projectID := c.ProjectID
	if projectID == "" {
		projectID = c.Project
	}
	add("project_id", projectID)
	add("project_name", c.ProjectName)
	if c.UserDomainID != "" {
		add("user_domain_id", c.UserDomainID)
	} else {
		add("domain_id", c.DomainID)
	}
	add("system_scope", c.SystemScope)
	if len(c.Roles) > 0 {
		attrs = append(attrs, slog.String("roles", strings.Join(c.Roles, ",")))
	}
	if c.IsAdmin {
		attrs = append(attrs, slog.Bool("is_admin", true))
	}
	if c.AllTenants {
		attrs = append(attrs, slog.Bool("all_tenants", true))
	}
	if c.AuthToken != "" {
		attrs = append(attrs, slog.String("auth_token", "***"))
	}
	var extra []string
	for k := range c.Extra {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	for _, k := range extra {
		if isSecretContextKey(k) {
			attrs = append(attrs, slog.String(k, "***"))
			continue
		}
		v := string(c.Extra[k])
		if len(v) > 64 {
			v = v[:64] + "…"
		}
		attrs = append(attrs, slog.String(k, v))
	}
	return attrs
}

// LogValue implements slog.LogValuer with the non-secret fields only.
func (c Context) LogValue() slog.Value { return slog.GroupValue(c.safeAttrs()...) }

// MarshalLog implements logr.Marshaler (used by controller-runtime / klog) the same way.
func (c Context) MarshalLog() any {
	m := map[string]any{}
	for _, a := range c.safeAttrs() {
		m[a.Key] = a.Value.Any()
	}
	return m
}

// The redacted views use value receivers so that a Context printed by value is redacted too.

// String gives "Context{request_id=… user_id=… …}" without secrets.
func (c Context) String() string {
	var b strings.Builder
	b.WriteString("Context{")
	for i, a := range c.safeAttrs() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", a.Key, a.Value.Any())
	}
	b.WriteByte('}')
	return b.String()
}

// GoString keeps %#v redacted too.
func (c Context) GoString() string { return "rpc." + c.String() }

// Format makes every fmt verb use the redacted String.
func (c Context) Format(f fmt.State, verb rune) {
	switch verb {
	case 'q':
		fmt.Fprintf(f, "%q", c.String())
	default:
		_, _ = f.Write([]byte(c.String()))
	}
}

// MarshalJSON is redacted as well, so a Context passed to a JSON logger cannot leak the token.
// The wire encoding does not use it.
func (c Context) MarshalJSON() ([]byte, error) { return json.Marshal(c.MarshalLog()) }
