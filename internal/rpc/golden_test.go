package rpc

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
)

// fixture is one captured message: raw body, AMQP properties and the capture's own decoding.
type fixture struct {
	release string // "magnum-15.0.1" / "magnum-23.0.0"
	name    string
	body    []byte
	props   fixtureProps
	decoded map[string]any // the inner message as decoded by the capture tool
}

type fixtureProps struct {
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
	Properties struct {
		ContentType     string         `json:"content_type"`
		ContentEncoding string         `json:"content_encoding"`
		DeliveryMode    uint8          `json:"delivery_mode"`
		Expiration      *string        `json:"expiration"`
		Headers         map[string]any `json:"headers"`
		Priority        uint8          `json:"priority"`
		CorrelationID   *string        `json:"correlation_id"`
		ReplyTo         *string        `json:"reply_to"`
		MessageID       *string        `json:"message_id"`
	} `json:"properties"`
	// trace files use published_properties instead
	Published *struct {
		ContentType     string         `json:"content_type"`
		ContentEncoding string         `json:"content_encoding"`
		DeliveryMode    uint8          `json:"delivery_mode"`
		Expiration      *string        `json:"expiration"`
		Headers         map[string]any `json:"headers"`
		Priority        uint8          `json:"priority"`
	} `json:"published_properties"`
	RoutingKeys []string `json:"routing_keys"`
}

// loadFixtures reads every captured message of a kind ("request" = top-level <op>.json, "reply"
// = trace/*REPLY*.json) from both releases.
func loadFixtures(t testing.TB, kind string) []fixture {
	t.Helper()
	root := filepath.Join(testutil.SharedDir(t), "fixtures")
	var out []fixture
	for _, release := range []string{"magnum-15.0.1", "magnum-23.0.0"} {
		dir := filepath.Join(root, release)
		if kind == "reply" {
			dir = filepath.Join(dir, "trace")
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("read fixtures: %v", err)
		}
		for _, e := range entries {
			n := e.Name()
			if !strings.HasSuffix(n, ".json") || strings.HasSuffix(n, ".props.json") || strings.HasSuffix(n, ".decoded.json") {
				continue
			}
			if isReply := strings.Contains(n, "REPLY"); isReply != (kind == "reply") {
				continue
			}
			base := strings.TrimSuffix(n, ".json")
			f := fixture{release: release, name: base}
			f.body = mustRead(t, filepath.Join(dir, n))
			if err := json.Unmarshal(mustRead(t, filepath.Join(dir, base+".props.json")), &f.props); err != nil {
				t.Fatalf("%s props: %v", n, err)
			}
			var dec struct {
				Msg map[string]any `json:"oslo.message"`
			}
			if err := json.Unmarshal(mustRead(t, filepath.Join(dir, base+".decoded.json")), &dec); err != nil {
				t.Fatalf("%s decoded: %v", n, err)
			}
			f.decoded = dec.Msg
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s fixtures found under %s", kind, root)
	}
	return out
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestGoldenRequestsDecode: every captured request decodes into typed values that agree with
// the capture tool's own decoding, and re-encodes byte for byte.
func TestGoldenRequestsDecode(t *testing.T) {
	fixtures := loadFixtures(t, "request")
	releases := map[string]int{}
	for _, f := range fixtures {
		t.Run(f.release+"/"+f.name, func(t *testing.T) {
			releases[f.release]++
			m, err := DecodeMessage(f.body)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			d := f.decoded
			if m.Envelope != "2.0" {
				t.Errorf("envelope %q", m.Envelope)
			}
			if m.Method != str(d["method"]) {
				t.Errorf("method %q, capture says %q", m.Method, d["method"])
			}
			wantArgs := sortedKeys(d["args"].(map[string]any))
			if got := sortedKeys(m.Args); !reflect.DeepEqual(got, wantArgs) {
				t.Errorf("args %v, capture says %v", got, wantArgs)
			}
			for name, raw := range m.Args {
				if !jsonEqual(t, raw, mustJSON(t, d["args"].(map[string]any)[name])) {
					t.Errorf("arg %s differs from the capture", name)
				}
			}
			if m.UniqueID != str(d["_unique_id"]) || m.MsgID != str(d["_msg_id"]) || m.ReplyQ != str(d["_reply_q"]) {
				t.Errorf("ids: unique=%q msg=%q reply=%q", m.UniqueID, m.MsgID, m.ReplyQ)
			}
			if wantCall := d["_msg_id"] != nil; m.IsCall() != wantCall {
				t.Errorf("IsCall=%t, capture has _msg_id=%v", m.IsCall(), d["_msg_id"])
			}
			if m.Timeout != nil {
				t.Errorf("_timeout should be null, got %v", *m.Timeout)
			}

			// Context: every _context_ key, in wire order, with typed values.
			var wantKeys []string
			for _, mem := range mustSplit(t, innerOf(t, f.body)) {
				if strings.HasPrefix(mem.Key, "_context_") {
					wantKeys = append(wantKeys, strings.TrimPrefix(mem.Key, "_context_"))
				}
			}
			c := m.Context
			if got := c.Keys(); !reflect.DeepEqual(got, wantKeys) {
				t.Errorf("context keys\n got %v\nwant %v", got, wantKeys)
			}
			wantCount := map[string]int{"magnum-15.0.1": 29, "magnum-23.0.0": 25}[f.release]
			if len(wantKeys) != wantCount {
				t.Errorf("%d context keys, want %d for %s", len(wantKeys), wantCount, f.release)
			}
			ctxStr := func(k string) string { return str(d["_context_"+k]) }
			checks := map[string][2]string{
				"user_id":          {c.UserID, ctxStr("user_id")},
				"user":             {c.User, ctxStr("user")},
				"project_id":       {c.ProjectID, ctxStr("project_id")},
				"project":          {c.Project, ctxStr("project")},
				"request_id":       {c.RequestID, ctxStr("request_id")},
				"auth_token":       {c.AuthToken, ctxStr("auth_token")},
				"user_name":        {c.UserName, ctxStr("user_name")},
				"project_name":     {c.ProjectName, ctxStr("project_name")},
				"domain_id":        {c.DomainID, ctxStr("domain_id")},
				"user_domain_id":   {c.UserDomainID, ctxStr("user_domain_id")},
				"user_domain_name": {c.UserDomainName, ctxStr("user_domain_name")},
				"auth_url":         {c.AuthURL, ctxStr("auth_url")},
				"user_identity":    {c.UserIdentity, ctxStr("user_identity")},
			}
			for k, v := range checks {
				if v[0] != v[1] {
					t.Errorf("context %s = %q, capture %q", k, v[0], v[1])
				}
			}
			if c.UserID == "" || c.ProjectID == "" || c.AuthToken == "" || !strings.HasPrefix(c.RequestID, "req-") {
				t.Errorf("identity fields empty: %+v", c)
			}
			if c.IsAdmin != (d["_context_is_admin"] == true) || c.AllTenants != (d["_context_all_tenants"] == true) ||
				c.IsAdminProject != (d["_context_is_admin_project"] == true) {
				t.Errorf("booleans differ from the capture")
			}
			var wantRoles []string
			for _, r := range d["_context_roles"].([]any) {
				wantRoles = append(wantRoles, r.(string))
			}
			if !reflect.DeepEqual(c.Roles, wantRoles) {
				t.Errorf("roles %v, capture %v", c.Roles, wantRoles)
			}
			if !jsonEqual(t, c.AuthTokenInfo, mustJSON(t, d["_context_auth_token_info"])) {
				t.Errorf("auth_token_info differs")
			}
			if len(c.Extra) != 0 {
				t.Errorf("unexpected unknown context keys %v", sortedKeys(c.Extra))
			}

			// Re-encoding the decoded message gives the captured bytes back exactly.
			again, err := EncodeMessage(m)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(again, f.body) {
				t.Fatalf("re-encoded body differs from the capture\n got %.300s\nwant %.300s", again, f.body)
			}
			// And from typed values only (args as a map, context fields as set): equal JSON.
			fresh := &Message{Method: m.Method, Args: m.Args, UniqueID: m.UniqueID, MsgID: m.MsgID, ReplyQ: m.ReplyQ, Context: c.Clone()}
			rebuilt, err := EncodeMessage(fresh)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, innerOf(t, rebuilt), innerOf(t, f.body)) {
				t.Fatalf("message rebuilt from typed values is not equivalent")
			}

			// The AMQP properties the client would publish equal the captured ones.
			p := f.props.Properties
			var expiration time.Duration
			if p.Expiration != nil {
				expiration = mustDuration(t, *p.Expiration)
			}
			pub := requestProps(f.body, expiration)
			if pub.ContentType != p.ContentType || pub.ContentEncoding != p.ContentEncoding || pub.DeliveryMode != p.DeliveryMode ||
				pub.Priority != p.Priority || len(pub.Headers) != len(p.Headers) || pub.CorrelationId != "" || pub.ReplyTo != "" || pub.MessageId != "" {
				t.Errorf("properties %+v differ from captured %+v", pub, p)
			}
			if (p.Expiration == nil) != (pub.Expiration == "") || (p.Expiration != nil && *p.Expiration != pub.Expiration) {
				t.Errorf("expiration %q, captured %v", pub.Expiration, p.Expiration)
			}
			if m.IsCall() != (p.Expiration != nil) {
				t.Errorf("calls and only calls carry an expiration")
			}
			if f.props.Exchange != "magnum" || f.props.RoutingKey != "magnum-conductor" {
				t.Errorf("captured on %s/%s", f.props.Exchange, f.props.RoutingKey)
			}
		})
	}
	if releases["magnum-15.0.1"] < 15 || releases["magnum-23.0.0"] < 20 {
		t.Fatalf("too few fixtures: %v", releases)
	}
}

// TestGoldenRepliesRoundTrip: the captured (hand-built, accepted by oslo.messaging) replies
// decode, and EncodeReply reproduces the success replies byte for byte.
func TestGoldenRepliesRoundTrip(t *testing.T) {
	for _, f := range loadFixtures(t, "reply") {
		t.Run(f.release+"/"+f.name, func(t *testing.T) {
			r, err := DecodeReply(f.body)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Ending || r.MsgID != str(f.decoded["_msg_id"]) || r.UniqueID != str(f.decoded["_unique_id"]) {
				t.Fatalf("reply header fields wrong: %+v", r)
			}
			pp := f.props.Published
			if pp == nil || pp.ContentType != "application/json" || pp.ContentEncoding != "utf-8" || pp.DeliveryMode != 2 ||
				pp.Expiration != nil || len(f.props.RoutingKeys) != 1 || !strings.HasPrefix(f.props.RoutingKeys[0], "reply_") {
				t.Fatalf("captured reply properties unexpected: %+v", pp)
			}
			if fs, ok := f.decoded["failure"].(string); ok {
				if r.Failure == nil {
					t.Fatal("failure not decoded")
				}
				var want map[string]any
				_ = json.Unmarshal([]byte(fs), &want)
				if r.Failure.Class != want["class"] || r.Failure.Module != want["module"] || r.Failure.Message != want["message"] {
					t.Fatalf("failure %+v, capture %v", r.Failure, want)
				}
				// Re-encoded failure carries the same information.
				again, err := EncodeReply(r)
				if err != nil {
					t.Fatal(err)
				}
				r2, err := DecodeReply(again)
				if err != nil || !reflect.DeepEqual(r2.Failure, r.Failure) {
					t.Fatalf("failure does not survive a round trip: %+v vs %+v (%v)", r2.Failure, r.Failure, err)
				}
				return
			}
			if !jsonEqual(t, r.Result, mustJSON(t, f.decoded["result"])) {
				t.Fatalf("result differs")
			}
			again, err := EncodeReply(r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, f.body) {
				t.Fatalf("re-encoded reply differs\n got %s\nwant %s", again, f.body)
			}
		})
	}
}

func TestFailureEncodingMatchesOslo(t *testing.T) {
	e := NewMagnumError("NotSupported", 400, "Signing in this capture is not supported.", map[string]any{"operation": "Signing in this capture"})
	r := &Reply{Failure: e, Ending: true, MsgID: "m1", UniqueID: "u1"}
	body, err := EncodeReply(r)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal([]byte(env["oslo.message"]), &inner); err != nil {
		t.Fatal(err)
	}
	var failure string
	if err := json.Unmarshal(inner["failure"], &failure); err != nil {
		t.Fatalf("failure must be a JSON string: %v", err)
	}
	want := `{"class": "NotSupported", "module": "magnum.common.exception", "message": "Signing in this capture is not supported.", "tb": [], "args": ["Signing in this capture is not supported."], "kwargs": {"code": 400, "operation": "Signing in this capture"}}`
	if failure != want {
		t.Fatalf("failure\n got %s\nwant %s", failure, want)
	}
	back, err := DecodeReply(body)
	if err != nil {
		t.Fatal(err)
	}
	if back.Failure.Code != 400 || back.Failure.Kwargs["operation"] != "Signing in this capture" || back.Failure.Class != "NotSupported" {
		t.Fatalf("decoded failure %+v", back.Failure)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSplit(t testing.TB, raw []byte) []member {
	t.Helper()
	m, err := splitObject(raw)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// innerOf returns the inner oslo.message of an enveloped body.
func innerOf(t testing.TB, body []byte) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	s, ok := env["oslo.message"].(string)
	if !ok {
		t.Fatalf("no oslo.message string in %.100s", body)
	}
	return []byte(s)
}

func mustDuration(t testing.TB, ms string) time.Duration {
	t.Helper()
	var n int64
	if err := json.Unmarshal([]byte(ms), &n); err != nil {
		t.Fatalf("expiration %q: %v", ms, err)
	}
	return time.Duration(n) * time.Millisecond
}
