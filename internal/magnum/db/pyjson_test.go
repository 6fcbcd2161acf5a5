package db

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Expected strings are Python 3's json.dumps output for the same values.
func TestPyJSON(t *testing.T) {
	cases := map[string]string{
		`{"a":"é","b":"\n\"x\"\\/<>&\t\u0001\u007f","emoji":"😀","n":[1,2.5,null,true]}`: `{"a": "\u00e9", "b": "\n\"x\"\\/<>&\t\u0001\u007f", "emoji": "\ud83d\ude00", "n": [1, 2.5, null, true]}`,
		`[{"key":"k","value":"","effect":"NoSchedule"}]`:                                `[{"key": "k", "value": "", "effect": "NoSchedule"}]`,
		`{"kube_tag": "v1.24.16-rancher1", "container_runtime": "containerd"}`:          `{"kube_tag": "v1.24.16-rancher1", "container_runtime": "containerd"}`,
		`{}`: `{}`, `[]`: `[]`, ` {"nested": {"x": [ ]}} `: `{"nested": {"x": []}}`,
	}
	for in, want := range cases {
		got, err := pyJSON([]byte(in))
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{`{"a":`, `{"a":1} {}`, ``} {
		_, err := pyJSON([]byte(bad))
		assert.Error(t, err, bad)
	}
}
