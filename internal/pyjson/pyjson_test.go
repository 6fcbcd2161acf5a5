package pyjson

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReencodeMatchesPythonDumps(t *testing.T) {
	// Expected values are what Python 3.11 json.dumps(json.loads(input)) prints, except for
	// numbers: they are copied verbatim (Python would print 1.50e+3 as 1500.0), which is exact
	// for everything the Python services send because those numbers were printed by Python.
	cases := []struct{ in, want string }{
		{`{"a":1,"b":[1,2,{"c":null}],"d":{}}`, `{"a": 1, "b": [1, 2, {"c": null}], "d": {}}`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{` { "z" : true , "a" : false } `, `{"z": true, "a": false}`},
		{` {"nested": {"x": [ ]}} `, `{"nested": {"x": []}}`},
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
		// Magnum's JSON columns: labels, taints.
		{`{"kube_tag": "v1.24.16-rancher1", "container_runtime": "containerd"}`, `{"kube_tag": "v1.24.16-rancher1", "container_runtime": "containerd"}`},
		{`[{"key":"k","value":"","effect":"NoSchedule"}]`, `[{"key": "k", "value": "", "effect": "NoSchedule"}]`},
		{`{"a":"é","b":"\n\"x\"\\/<>&\t\u0001\u007f","n":[1,2.5,null,true]}`, `{"a": "\u00e9", "b": "\n\"x\"\\/<>&\t\u0001\u007f", "n": [1, 2.5, null, true]}`},
	}
	for _, c := range cases {
		got, err := Reencode([]byte(c.in))
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, string(got), c.in)
	}
}

func TestReencodeRefusesInvalidJSON(t *testing.T) {
	for _, bad := range []string{``, `{`, `{"a":}`, `[1,]`, `"x`, `{"a":1}x`, `nul`, `{"a":1} {}`, `{"a":1} ]`} {
		_, err := Reencode([]byte(bad))
		assert.ErrorIs(t, err, ErrInvalid, "%q", bad)
	}
}

func TestAppendValueAppends(t *testing.T) {
	got, err := AppendValue([]byte(`{"args": `), []byte(`{"a":[1,"é"]}`))
	require.NoError(t, err)
	assert.Equal(t, `{"args": {"a": [1, "\u00e9"]}`, string(got))
}

func TestAppendStringEscapesLikePython(t *testing.T) {
	cases := []struct{ in, want string }{
		{"tab\there \x01 ü € 𝄞 \"q\" /", `"tab\there \u0001 \u00fc \u20ac \ud834\udd1e \"q\" /"`},
		{"\b\f\r\\\x7f~ ", `"\b\f\r\\\u007f~ "`},
		{"", `""`},
		// Invalid UTF-8 becomes U+FFFD, like encoding/json.
		{"a\xffb", `"a\ufffdb"`},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, string(AppendString(nil, c.in)), "%q", c.in)
	}
}

// Reencode must be semantically neutral: same value after a round trip, big numbers verbatim.
func TestReencodePreservesValues(t *testing.T) {
	in := []byte(`{"n": 12345678901234567890, "f": 1e400, "s": "\u2028x", "nested": {"a": [[], {}, [{"b": "c"}]]}}`)
	out, err := Reencode(in)
	require.NoError(t, err)
	assert.Equal(t, decodeNumbers(t, in), decodeNumbers(t, out))
	assert.Contains(t, string(out), `12345678901234567890`)
	assert.Contains(t, string(out), `1e400`)
}

func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v), "%s", b)
	return v
}
