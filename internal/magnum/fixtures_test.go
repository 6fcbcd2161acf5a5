package magnum

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// foundObject is one object primitive found in a fixture file, with its exact bytes.
type foundObject struct {
	file, path string
	raw        json.RawMessage
}

// collectObjects walks a JSON value and returns every object primitive in it (not descending
// into objects: nested ones are covered by the typed views).
func collectObjects(t testing.TB, file, path string, raw json.RawMessage, out *[]foundObject) {
	t.Helper()
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	switch raw[0] {
	case '{':
		if IsPrimitive(raw) {
			*out = append(*out, foundObject{file, path, raw})
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: %v", file, path, err)
		}
		for k, v := range m {
			collectObjects(t, file, path+"."+k, v, out)
		}
	case '[':
		var l []json.RawMessage
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("%s %s: %v", file, path, err)
		}
		for i, v := range l {
			collectObjects(t, file, path+"["+strconv.Itoa(i)+"]", v, out)
		}
	}
}

// fixtureObjects returns every object in shared/fixtures/magnum-*/: from each *.decoded.json
// (args and replies, as parsed by the capture tool) and from each raw wire body *.json, whose
// oslo.message string holds the bytes exactly as magnum-api (or the reply probe) sent them.
func fixtureObjects(t testing.TB) (decoded, wire []foundObject, files int) {
	t.Helper()
	root := filepath.Join(testutil.SharedDir(t), "fixtures")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".props.json") {
			return err
		}
		if !strings.Contains(p, "magnum-15.0.1") && !strings.Contains(p, "magnum-23.0.0") {
			return nil
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files++
		if strings.HasSuffix(p, ".decoded.json") {
			collectObjects(t, rel, "", body, &decoded)
			return nil
		}
		var env map[string]json.RawMessage
		if err := json.Unmarshal(body, &env); err != nil {
			return nil // not an envelope (e.g. capture logs are .jsonl)
		}
		inner := env["oslo.message"]
		if len(inner) == 0 {
			collectObjects(t, rel, "", body, &wire)
			return nil
		}
		var s string
		if err := json.Unmarshal(inner, &s); err != nil {
			t.Fatalf("%s: oslo.message is not a string: %v", rel, err)
		}
		collectObjects(t, rel, "", json.RawMessage(s), &wire)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return decoded, wire, files
}

// TestFixtureObjectsRoundTrip: every object captured from magnum-api 15.0.1 and 23.0.0 (and every
// reply the probe sent) decodes, and encodes back to the same bytes (after json.Compact, since
// Python separates with ", " and ": ").
func TestFixtureObjectsRoundTrip(t *testing.T) {
	decoded, wire, files := fixtureObjects(t)
	if len(decoded) < 100 || len(wire) < 100 {
		t.Fatalf("found only %d decoded and %d wire objects in %d files: fixtures missing?", len(decoded), len(wire), files)
	}
	perClass := map[string]int{}
	for _, f := range append(append([]foundObject{}, decoded...), wire...) {
		obj, err := DecodeObject(f.raw)
		if err != nil {
			t.Errorf("%s %s: %v", f.file, f.path, err)
			continue
		}
		perClass[obj.Name+" "+obj.Version.String()]++
		got, err := obj.Encode()
		if err != nil {
			t.Errorf("%s %s: encode: %v", f.file, f.path, err)
			continue
		}
		var want bytes.Buffer
		if err := json.Compact(&want, f.raw); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s %s: round trip differs\n got: %s\nwant: %s", f.file, f.path, got, want.Bytes())
		}
	}
	// Both releases' versions of every class the API sends must have been seen.
	for _, k := range []string{"Cluster 1.23", "Cluster 1.24", "ClusterTemplate 1.20", "ClusterTemplate 1.21",
		"NodeGroup 1.1", "NodeGroup 1.2", "Certificate 1.2"} {
		if perClass[k] == 0 {
			t.Errorf("no %s object in the fixtures (seen: %v)", k, perClass)
		}
	}
	t.Logf("%d files, %d decoded + %d wire objects: %v", files, len(decoded), len(wire), perClass)
}

// TestFixtureObjectsTypedViews: every fixture object decodes into its typed view with no field
// left unknown, and the view encodes back, at the version it came in, to the same data and
// changes (values compared as JSON, nested cluster_template included).
func TestFixtureObjectsTypedViews(t *testing.T) {
	decoded, wire, _ := fixtureObjects(t)
	for _, f := range append(decoded, wire...) {
		obj, err := DecodeObject(f.raw)
		if err != nil {
			t.Fatalf("%s %s: %v", f.file, f.path, err)
		}
		view := newView(obj.Name)
		if view == nil {
			t.Errorf("%s %s: no typed view for %s", f.file, f.path, obj.Name)
			continue
		}
		if err := Decode(obj, view); err != nil {
			t.Errorf("%s %s: %v", f.file, f.path, err)
			continue
		}
		if u := view.base().unknown; u != nil {
			t.Errorf("%s %s: %s fields unknown to the view: %v", f.file, f.path, obj.Name, u.FieldNames())
		}
		if c, ok := view.(*Cluster); ok && c.ClusterTemplate.IsSet() {
			ct, _ := c.ClusterTemplate.Get()
			if ct.base().unknown != nil {
				t.Errorf("%s %s: nested ClusterTemplate fields unknown: %v", f.file, f.path, ct.base().unknown.FieldNames())
			}
		}
		back, err := EncodeAt(view, obj.Version, NewVersions(nil).Derive(obj))
		if err != nil {
			t.Errorf("%s %s: encode: %v", f.file, f.path, err)
			continue
		}
		assertSameData(t, f.file+" "+f.path, obj, back, true)
		// Dicts keep their order, so the typed view even reproduces the bytes.
		got, err := back.Encode()
		require.NoError(t, err)
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, f.raw))
		assert.Equal(t, want.String(), string(got), "%s %s", f.file, f.path)
	}
}

func newView(name string) View {
	switch name {
	case "Cluster":
		return &Cluster{}
	case "ClusterTemplate":
		return &ClusterTemplate{}
	case "NodeGroup":
		return &NodeGroup{}
	case "Certificate":
		return &Certificate{}
	case "X509KeyPair":
		return &X509KeyPair{}
	case "MagnumService":
		return &MagnumService{}
	}
	return nil
}

// assertSameData compares two primitives field by field as JSON values; with strictOrder the
// field and changes order must match too (Python's own changes are an unordered set).
func assertSameData(t *testing.T, where string, want, got *Object, strictOrder bool) {
	t.Helper()
	if want.Name != got.Name || want.Version != got.Version {
		t.Errorf("%s: got %s %s, want %s %s", where, got.Name, got.Version, want.Name, want.Version)
	}
	if !sameStrings(want.FieldNames(), got.FieldNames(), strictOrder) {
		t.Errorf("%s: fields\n got %v\nwant %v", where, got.FieldNames(), want.FieldNames())
	}
	for _, n := range want.FieldNames() {
		w, _ := want.Raw(n)
		g, _ := got.Raw(n)
		if IsPrimitive(w) {
			wo, err1 := DecodeObject(w)
			gotNested, err2 := DecodeObject(g)
			if err1 != nil || err2 != nil {
				t.Errorf("%s: nested %s: %v %v", where, n, err1, err2)
				continue
			}
			assertSameData(t, where+"."+n, wo, gotNested, strictOrder)
			continue
		}
		var wv, gv any
		_ = json.Unmarshal(w, &wv)
		_ = json.Unmarshal(g, &gv)
		if !reflect.DeepEqual(wv, gv) {
			t.Errorf("%s: field %s: got %s, want %s", where, n, g, w)
		}
	}
	if !sameStrings(want.Changes(), got.Changes(), strictOrder) {
		t.Errorf("%s: changes got %v, want %v", where, got.Changes(), want.Changes())
	}
}

func sameStrings(a, b []string, strictOrder bool) bool {
	if !strictOrder {
		a, b = append([]string(nil), a...), append([]string(nil), b...)
		sort.Strings(a)
		sort.Strings(b)
	}
	return reflect.DeepEqual(a, b)
}
