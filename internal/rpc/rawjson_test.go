package rpc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

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
