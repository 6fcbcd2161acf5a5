package magnum

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Dict is a DictOfStringsField value (labels, health_status_reason, node_labels) that keeps its
// keys in order. Python dicts keep insertion order and json.dumps writes them in it, so the
// labels magnum-api sends come back out of the DB in the order the user gave them; keeping that
// order end to end makes the rows the bridge writes identical to the ones Python writes.
//
// The zero value is an empty dict ready to use.
type Dict struct {
	keys []string
	vals map[string]string
}

// NewDict builds a Dict from key, value pairs in order; an odd trailing key gets "".
func NewDict(kv ...string) Dict {
	var d Dict
	for i := 0; i < len(kv); i += 2 {
		v := ""
		if i+1 < len(kv) {
			v = kv[i+1]
		}
		d.Set(kv[i], v)
	}
	return d
}

// DictFromMap builds a Dict from a Go map, keys sorted (a map has no order to keep).
func DictFromMap(m map[string]string) Dict {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var d Dict
	for _, k := range keys {
		d.Set(k, m[k])
	}
	return d
}

// Get returns the value of key.
func (d Dict) Get(key string) (string, bool) {
	v, ok := d.vals[key]
	return v, ok
}

// Set adds or replaces a key; a new key goes last.
func (d *Dict) Set(key, value string) {
	if d.vals == nil {
		d.vals = map[string]string{}
	}
	if _, ok := d.vals[key]; !ok {
		d.keys = append(d.keys, key)
	}
	d.vals[key] = value
}

// Delete removes a key.
func (d *Dict) Delete(key string) {
	if _, ok := d.vals[key]; !ok {
		return
	}
	delete(d.vals, key)
	d.keys = removeString(d.keys, key)
}

// Keys lists the keys in order.
func (d Dict) Keys() []string { return append([]string(nil), d.keys...) }

// Len is the number of keys.
func (d Dict) Len() int { return len(d.keys) }

// Map returns the dict as a Go map (a copy).
func (d Dict) Map() map[string]string {
	m := make(map[string]string, len(d.vals))
	for k, v := range d.vals {
		m[k] = v
	}
	return m
}

// Equal compares keys and values, ignoring order.
func (d Dict) Equal(o Dict) bool {
	if len(d.keys) != len(o.keys) {
		return false
	}
	for k, v := range d.vals {
		if ov, ok := o.vals[k]; !ok || ov != v {
			return false
		}
	}
	return true
}

// String prints the dict as JSON.
func (d Dict) String() string {
	b, _ := d.MarshalJSON()
	return string(b)
}

// MarshalJSON writes the keys in order, without HTML escaping.
func (d Dict) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range d.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, k)
		b.WriteByte(':')
		writeJSONString(&b, d.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a JSON object of strings, keeping key order. Other value types are
// refused: DictOfStringsField primitives only ever hold strings.
func (d *Dict) UnmarshalJSON(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	fields, err := readOrderedObject(dec)
	if err != nil {
		return err
	}
	*d = Dict{}
	for _, f := range fields {
		var s string
		if err := json.Unmarshal(f.raw, &s); err != nil {
			return fmt.Errorf("value of %q must be a string, got %s", f.key, f.raw)
		}
		d.Set(f.key, s)
	}
	return nil
}
