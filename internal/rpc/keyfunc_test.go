package rpc

import (
	"encoding/json"
	"testing"
)

// referenceCluster decodes the arguments fully, as DefaultKeyFunc once did.
func referenceCluster(r *Request) string {
	var s string
	if raw, ok := r.Args["uuid"]; ok && json.Unmarshal(raw, &s) == nil && s != "" {
		return s
	}
	var obj struct {
		Data struct {
			UUID string `json:"uuid"`
		} `json:"magnum_object.data"`
	}
	if raw, ok := r.Args["cluster"]; ok && json.Unmarshal(raw, &obj) == nil {
		return obj.Data.UUID
	}
	return ""
}

func TestDefaultKeyFuncOnCapturedRequests(t *testing.T) {
	named := 0
	for _, f := range loadFixtures(t, "request") {
		m, err := DecodeMessage(f.body)
		if err != nil {
			t.Fatalf("%s/%s: %v", f.release, f.name, err)
		}
		r := &Request{Method: m.Method, Args: m.Args}
		want := referenceCluster(r)
		if got := DefaultKeyFunc(r); got != want {
			t.Errorf("%s/%s: key %q, want %q", f.release, f.name, got, want)
		}
		if want != "" {
			named++
		}
	}
	if named == 0 {
		t.Fatal("no captured request named a cluster: the fixtures were not read")
	}
}

func TestDefaultKeyFuncArguments(t *testing.T) {
	for name, tc := range map[string]struct {
		args map[string]string
		want string
	}{
		"uuid argument":               {map[string]string{"uuid": `"c-1"`}, "c-1"},
		"uuid wins over the object":   {map[string]string{"uuid": `"c-1"`, "cluster": `{"magnum_object.data": {"uuid": "c-2"}}`}, "c-1"},
		"empty uuid, the object":      {map[string]string{"uuid": `""`, "cluster": `{"magnum_object.data": {"uuid": "c-2"}}`}, "c-2"},
		"uuid not a string":           {map[string]string{"uuid": `7`}, ""},
		"escaped uuid":                {map[string]string{"uuid": `"c\u002d3"`}, "c-3"},
		"duplicate members, the last": {map[string]string{"cluster": `{"magnum_object.data": {"uuid": "a", "uuid": "b"}}`}, "b"},
		"object without data":         {map[string]string{"cluster": `{"magnum_object.name": "Cluster"}`}, ""},
		"cluster not an object":       {map[string]string{"cluster": `"c-4"`}, ""},
		"nothing":                     {map[string]string{"nodegroup": `{}`}, ""},
	} {
		r := &Request{Args: map[string]json.RawMessage{}}
		for k, v := range tc.args {
			r.Args[k] = json.RawMessage(v)
		}
		if got, ref := DefaultKeyFunc(r), referenceCluster(r); got != tc.want || got != ref {
			t.Errorf("%s: key %q, want %q (full decode: %q)", name, got, tc.want, ref)
		}
	}
}
