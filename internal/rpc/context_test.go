package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const (
	testToken    = "gAAAAAB-SECRET-TOKEN-do-not-log"
	testPassword = "hunter2-do-not-log"
	testTrust    = "trust-0123-do-not-log"
	testHMAC     = "hmac-secret-do-not-log"
)

func secretContext(t *testing.T) *Context {
	t.Helper()
	body := `{"oslo.version": "2.0", "oslo.message": ` + strconvQuote(`{"method": "cluster_delete", "args": {"uuid": "u"}, "_unique_id": "x",`+
		` "_context_user_id": "user-1", "_context_project_id": "proj-1", "_context_auth_token": "`+testToken+`",`+
		` "_context_auth_token_info": {"token": {"auth_token": "`+testToken+`", "catalog": []}},`+
		` "_context_password": "`+testPassword+`", "_context_trust_id": "`+testTrust+`",`+
		` "_context_trace_info": {"hmac_key": "`+testHMAC+`", "base_id": "b"}, "_context_roles": ["admin"],`+
		` "_context_request_id": "req-1", "_context_future_flag": "visible", "_context_is_admin": true}`) + `}`
	m, err := DecodeMessage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return m.Context
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestContextNeverPrintsSecrets(t *testing.T) {
	c := secretContext(t)
	if c.AuthToken != testToken || c.Password != testPassword || c.TrustID != testTrust || !c.IsAdmin {
		t.Fatalf("typed fields not decoded: %q %q %q", c.AuthToken, c.Password, c.TrustID)
	}
	if string(c.Extra["future_flag"]) != `"visible"` {
		t.Fatalf("unknown key not kept: %v", c.Extra)
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("ctx", "context", c, "value", *c)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("ctx", "context", c)
	req := &Request{Method: "m", Context: c, Args: map[string]json.RawMessage{"cluster": json.RawMessage(`{"trustee_password": "` + testPassword + `"}`)}}
	logger.Info("req", "request", req)
	mj, _ := json.Marshal(c)
	renderings := []string{
		fmt.Sprint(c), fmt.Sprintf("%v|%+v|%#v|%s|%q", c, c, c, c, c), fmt.Sprintf("%v %+v %#v", *c, *c, *c),
		c.String(), fmt.Sprint(c.MarshalLog()), string(mj), logs.String(),
		fmt.Sprintf("%v %+v %s", req, req, req), req.String(),
	}
	for _, r := range renderings {
		for _, secret := range []string{testToken, testPassword, testTrust, testHMAC} {
			if strings.Contains(r, secret) {
				t.Fatalf("secret %q leaked in: %s", secret, r)
			}
		}
	}
	all := strings.Join(renderings, "\n")
	for _, want := range []string{"user-1", "proj-1", "req-1", "admin", "future_flag"} {
		if !strings.Contains(all, want) {
			t.Errorf("log renderings lack the useful field %q", want)
		}
	}
}

func TestContextReencodesSameKeys(t *testing.T) {
	in := `{"_context_user": null, "_context_zeta": 1, "_context_roles": ["a"], "_context_is_admin": false, ` +
		`"_context_user_domain": "", "_context_auth_token_info": null, "method": "m", "args": {}}`
	m, err := DecodeMessage([]byte(in)) // unenveloped 1.0 message
	if err != nil {
		t.Fatal(err)
	}
	if m.Envelope != "1.0" {
		t.Fatalf("envelope %q", m.Envelope)
	}
	got := m.Context.members()
	want := []string{`user=null`, `zeta=1`, `roles=["a"]`, `is_admin=false`, `user_domain=""`, `auth_token_info=null`}
	if fmt.Sprint(renderMembers(got)) != fmt.Sprint(want) {
		t.Fatalf("members %v, want %v", renderMembers(got), want)
	}
	// Changing a field changes only that key; a new field is appended in to_dict order.
	m.Context.User = "u2"
	m.Context.RequestID = "req-9"
	m.Context.Roles = append(m.Context.Roles, "b")
	delete(m.Context.Extra, "zeta")
	want = []string{`user="u2"`, `roles=["a","b"]`, `is_admin=false`, `user_domain=""`, `auth_token_info=null`, `request_id="req-9"`}
	if got := renderMembers(m.Context.members()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	// A fresh context emits only what was set, in to_dict order.
	fresh := &Context{UserID: "u", ProjectID: "p", Roles: []string{"member"}, IsAdmin: true}
	want = []string{`project_id="p"`, `is_admin=true`, `roles=["member"]`, `user_id="u"`}
	if got := renderMembers(fresh.members()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fresh members %v, want %v", got, want)
	}
}

func TestContextWrongTypesAreSafe(t *testing.T) {
	in := `{"method": "m", "args": {}, "_context_is_admin": "true", "_context_roles": "admin", "_context_user_id": 5}`
	m, err := DecodeMessage([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Context
	if c.IsAdmin || c.Roles != nil || c.UserID != "" {
		t.Fatalf("ill-typed values must not turn into privileges: %+v", c)
	}
	// … but they survive re-encoding unchanged.
	if got := renderMembers(c.members()); fmt.Sprint(got) != fmt.Sprint([]string{`is_admin="true"`, `roles="admin"`, `user_id=5`}) {
		t.Fatalf("members %v", got)
	}
}

func renderMembers(ms []member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Key+"="+string(m.Value))
	}
	return out
}
