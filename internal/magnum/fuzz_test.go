package magnum

import (
	"bytes"
	"testing"
)

// FuzzDecodeObject: no input makes decoding panic or hang; whatever decodes encodes, and
// decoding that encoding gives the same bytes again; typed views never panic either.
//
//	go test ./internal/magnum -run '^$' -fuzz FuzzDecodeObject -fuzztime 30s
func FuzzDecodeObject(f *testing.F) {
	f.Add([]byte(loadedCluster))
	f.Add([]byte(`{"magnum_object.name":"NodeGroup","magnum_object.namespace":"magnum","magnum_object.version":"1.2","magnum_object.data":{"node_taints":[{"key":"a","value":"","effect":"NoSchedule"}]},"magnum_object.changes":["node_taints"]}`))
	f.Add([]byte(`{"magnum_object.name":"Cluster","magnum_object.namespace":"magnum","magnum_object.version":"1.23.1","magnum_object.data":{"cluster_template":{"magnum_object.name":"ClusterTemplate","magnum_object.namespace":"magnum","magnum_object.version":"1.20","magnum_object.data":{"coe":"kubernetes"}}}}`))
	f.Add([]byte(`{"magnum_object.name":"Certificate","magnum_object.namespace":"magnum","magnum_object.version":"1.2","magnum_object.data":{"pem":"\u00e9<>&"},"x":1}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	decoded, _, _ := fixtureObjects(f)
	for i, o := range decoded {
		if i%7 == 0 {
			f.Add([]byte(o.raw))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		obj, err := DecodeObject(in)
		if err != nil {
			return
		}
		enc, err := obj.Encode()
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		again, err := DecodeObject(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		enc2, err := again.Encode()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n%s (%v)", enc, enc2, err)
		}
		if view := newView(obj.Name); view != nil {
			if Decode(obj, view) == nil {
				_, _ = EncodeAt(view, obj.Version, nil)
				_, _ = Encode(view, NewVersions(nil))
			}
		}
		NewVersions(nil).Observe(obj)
	})
}
