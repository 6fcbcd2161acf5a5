package rpc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/pyjson"
)

// FuzzDecodeMessage feeds arbitrary bodies through the envelope, inner message and context
// decoders. Whatever decodes must re-encode, decode again to the same values, and re-encode to
// the same bytes; nothing may panic. The seed corpus is every captured request and reply.
func FuzzDecodeMessage(f *testing.F) {
	for _, kind := range []string{"request", "reply"} {
		for _, fx := range loadFixtures(f, kind) {
			f.Add(fx.body)
		}
	}
	for _, s := range []string{
		`{}`, `[]`, `null`, `"x"`, `{"method": "m"}`, `{"method": "m", "args": {"a": [1, {"b": null}]}, "_context_roles": ["r"]}`,
		`{"oslo.version": "2.0", "oslo.message": "{\"method\": \"m\", \"args\": {}, \"_msg_id\": \"1\", \"_reply_q\": \"q\", \"_timeout\": 3.5}"}`,
		`{"oslo.version": "2.0", "oslo.message": "{\"method\": \"\\u00e9\", \"_context_user\": null, \"_context_user\": \"dup\"}"}`,
		`{"oslo.version": "2.1", "oslo.message": "{}"}`, `{"oslo.version": 2, "oslo.message": "{}"}`,
		`{"method": "m", "args": {}, "namespace": null, "version": "1.3", "_context_x": {"deep": [[[]]]}, "extra": 1}`,
	} {
		f.Add([]byte(s))
	}
	for _, s := range []string{`"plain"`, `"\ud83d\ude00 \u00e9 \n \/"`, `"\ud800x"`, `"\udc00\ud800"`, "\"\xff\xfe\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// The hand-written string decoder agrees with encoding/json.
		var want string
		if trimmed := bytes.TrimSpace(body); json.Unmarshal(trimmed, &want) == nil && len(trimmed) > 0 && trimmed[0] == '"' {
			got, ok := unquoteJSONString(trimmed)
			if !ok || string(got) != want {
				t.Fatalf("unquoteJSONString(%q) = %q, %t; encoding/json says %q", trimmed, got, ok, want)
			}
		}
		_, _ = DecodeReply(body)
		if json.Valid(body) {
			out, err := pyjson.Reencode(body)
			if err != nil {
				t.Fatalf("pyjson.Reencode refused valid JSON %q: %v", body, err)
			}
			if !json.Valid(out) || !jsonEqual(t, body, out) {
				t.Fatalf("pyjson.Reencode changed the value: %q -> %q", body, out)
			}
		}
		m, err := DecodeMessage(body)
		if err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		_ = m.Context.String()
		_ = m.Context.LogValue()
		enc, err := EncodeMessage(m)
		if err != nil {
			t.Fatalf("decoded message does not re-encode: %v (%q)", err, body)
		}
		m2, err := DecodeMessage(enc)
		if err != nil {
			t.Fatalf("re-encoded message does not decode: %v\n%q", err, enc)
		}
		if m2.Method != m.Method || m2.UniqueID != m.UniqueID || m2.MsgID != m.MsgID || m2.ReplyQ != m.ReplyQ ||
			m2.Namespace != m.Namespace || m2.Version != m.Version || !reflect.DeepEqual(m2.Timeout, m.Timeout) {
			t.Fatalf("header fields changed: %+v -> %+v", m, m2)
		}
		if !reflect.DeepEqual(sortedKeys(m.Args), sortedKeys(m2.Args)) {
			t.Fatalf("args changed: %v -> %v", sortedKeys(m.Args), sortedKeys(m2.Args))
		}
		for k, v := range m.Args {
			if !jsonEqual(t, v, m2.Args[k]) {
				t.Fatalf("arg %s changed: %s -> %s", k, v, m2.Args[k])
			}
		}
		if !reflect.DeepEqual(m.Context.Keys(), m2.Context.Keys()) {
			t.Fatalf("context keys changed: %v -> %v", m.Context.Keys(), m2.Context.Keys())
		}
		for _, k := range m.Context.Keys() {
			a, _ := m.Context.Raw(k)
			b, _ := m2.Context.Raw(k)
			if !jsonEqual(t, a, b) {
				t.Fatalf("context %s changed: %s -> %s", k, a, b)
			}
		}
		if m.Context.UserID != m2.Context.UserID || m.Context.AuthToken != m2.Context.AuthToken ||
			m.Context.IsAdmin != m2.Context.IsAdmin || !reflect.DeepEqual(m.Context.Roles, m2.Context.Roles) {
			t.Fatalf("typed context changed")
		}
		enc2, err := EncodeMessage(m2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable (%v):\n%q\n%q", err, enc, enc2)
		}
	})
}

// FuzzSplitObject holds the one-pass validation of splitObject to encoding/json's: it accepts
// exactly the objects json.Valid accepts, and each member it returns is the value encoding/json
// decodes for that key.
func FuzzSplitObject(f *testing.F) {
	for _, fx := range loadFixtures(f, "request") {
		f.Add(fx.body)
	}
	for _, s := range splitObjectCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkSplitObject(t, raw) })
}

// splitObjectCases are inputs where a hand-written validator typically goes wrong.
var splitObjectCases = []string{
	`{}`, ` {} `, `{} x`, `{}}`, `{`, `}`, `[]`, `{"a":1,}`, `{"a" 1}`, `{"a":}`, `{,}`, `{"a":1 "b":2}`,
	`{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`, `{"a":[]}`, `{"a":[[]],"b":{}}`, `{"a":{"b":{"c":[{}]}}}`,
	`{"a":01}`, `{"a":-}`, `{"a":-0}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":1e+}`, `{"a":1E-7}`, `{"a":-12.5e+3}`,
	`{"a":tru}`, `{"a":truex}`, `{"a":nul}`, `{"a":false}`, `{"a":null}`, `{"a":True}`,
	`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, `{"a":"\uABCD"}`, "{\"a\":\"\t\"}", "{\"a\":\"\x7f\xff\"}",
	`{"a":"\"}`, `{"a":"\\"}`, `{"a":"\/\b\f\n\r\t"}`, `{1:2}`, `{"a":1}{"b":2}`, `{"a":[}]}`, `{"a":{]}`,
	`{"a":1,"a":2}`, "{\n\t\"a\" :\r 1 }",
}

func TestSplitObjectAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range splitObjectCases {
		checkSplitObject(t, []byte(s))
	}
}

func checkSplitObject(t *testing.T, raw []byte) {
	t.Helper()
	members, err := splitObject(raw)
	var want map[string]json.RawMessage
	isObject := json.Valid(raw) && json.Unmarshal(raw, &want) == nil
	if (err == nil) != isObject {
		t.Fatalf("splitObject(%q): error %v; json.Valid %t", raw, err, json.Valid(raw))
	}
	if err != nil {
		return
	}
	if len(members) != len(want) {
		t.Fatalf("splitObject(%q): %d members, encoding/json %d", raw, len(members), len(want))
	}
	for _, m := range members {
		if !bytes.Equal(bytes.TrimSpace(m.Value), bytes.TrimSpace(want[m.Key])) {
			t.Fatalf("splitObject(%q): %s = %s, encoding/json %s", raw, m.Key, m.Value, want[m.Key])
		}
	}
}
