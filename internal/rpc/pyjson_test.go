package rpc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestPyJSONMatchesPythonDumps(t *testing.T) {
	// Expected values are what Python 3.11 json.dumps(json.loads(input)) prints, except for
	// numbers: they are copied verbatim (Python would print 1.50e+3 as 1500.0), which is exact
	// for everything magnum-api sends because those numbers were printed by Python already.
	cases := []struct{ in, want string }{
		{`{"a":1,"b":[1,2,{"c":null}],"d":{}}`, `{"a": 1, "b": [1, 2, {"c": null}], "d": {}}`},
		{`[]`, `[]`},
		{` { "z" : true , "a" : false } `, `{"z": true, "a": false}`},
		{`"é"`, `"\u00e9"`},
		{`"😀"`, `"\ud83d\ude00"`},
		{`"\u00E9"`, `"\u00e9"`},
		{`"\ud800"`, `"\ud800"`}, // lone surrogate survives, as in Python
		{`"a\/b"`, `"a/b"`},
		{`"\u0041\n\u000a\t\u0007\u007f"`, `"A\n\n\t\u0007\u007f"`},
		{`"<>&'"`, `"<>&'"`},
		{`1.50e+3`, `1.50e+3`},
		{`-0`, `-0`},
		{`{"k":"line\r\nbreak \"q\" \\ back"}`, `{"k": "line\r\nbreak \"q\" \\ back"}`},
	}
	for _, c := range cases {
		got, err := pyJSON([]byte(c.in))
		if err != nil {
			t.Fatalf("pyJSON(%s): %v", c.in, err)
		}
		if string(got) != c.want {
			t.Errorf("pyJSON(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":}`, `[1,]`, `"x`, `{"a":1}x`, `nul`} {
		if _, err := pyJSON([]byte(bad)); err == nil {
			t.Errorf("pyJSON(%q) accepted invalid JSON", bad)
		}
	}
}

func TestAppendPyStringEscapesLikePython(t *testing.T) {
	got := string(appendPyString(nil, "tab\there \x01 ü € 𝄞 \"q\" /"))
	want := `"tab\there \u0001 \u00fc \u20ac \ud834\udd1e \"q\" /"`
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	// Invalid UTF-8 becomes U+FFFD, like encoding/json.
	if got := string(appendPyString(nil, "a\xffb")); got != `"a\ufffdb"` {
		t.Fatalf("invalid UTF-8: got %s", got)
	}
}

func TestSplitObjectKeepsOrderAndLastDuplicate(t *testing.T) {
	members, err := splitObject([]byte(`{"b": 1, "a": {"x": [1, "}"]}, "b": 3, "c": "\"}"}`))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, m := range members {
		keys = append(keys, m.Key+"="+string(m.Value))
	}
	want := []string{`b=3`, `a={"x": [1, "}"]}`, `c="\"}"`}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("got %v, want %v", keys, want)
	}
	if _, err := splitObject([]byte(`[1]`)); err == nil {
		t.Fatal("a list was accepted as an object")
	}
}

// pyJSON must be semantically neutral: same value after a round trip.
func TestPyJSONPreservesValues(t *testing.T) {
	in := []byte(`{"n": 12345678901234567890, "f": 1e400, "s": "\u2028x", "nested": {"a": [[], {}, [{"b": "c"}]]}}`)
	out, err := pyJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, in, out) {
		t.Fatalf("value changed: %s -> %s", in, out)
	}
	if !bytes.Contains(out, []byte(`12345678901234567890`)) || !bytes.Contains(out, []byte(`1e400`)) {
		t.Fatalf("numbers were not copied verbatim: %s", out)
	}
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var va, vb any
	da := json.NewDecoder(bytes.NewReader(a))
	da.UseNumber()
	db := json.NewDecoder(bytes.NewReader(b))
	db.UseNumber()
	if err := da.Decode(&va); err != nil {
		t.Fatalf("decode %s: %v", a, err)
	}
	if err := db.Decode(&vb); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}
