// Package magnum holds what the bridge shares with Magnum's Python code: the oslo.versionedobjects
// primitives that travel in RPC messages (a generic, lossless Object plus typed views such as
// Cluster and NodeGroup), the status enumerations, and the magnum.common.exception classes that
// magnum-api turns into HTTP errors.
//
// On the wire (oslo.versionedobjects' primitive form) an object is
//
//	{"magnum_object.name": "Cluster", "magnum_object.namespace": "magnum",
//	 "magnum_object.version": "1.23", "magnum_object.data": {...only set fields...},
//	 "magnum_object.changes": [...]}
//
// where a field that is not set is absent from data, which is not the same as a field set to null.
package magnum

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Keys of an object primitive (OBJ_SERIAL_NAMESPACE "magnum_object").
const (
	KeyName      = "magnum_object.name"
	KeyNamespace = "magnum_object.namespace"
	KeyVersion   = "magnum_object.version"
	KeyData      = "magnum_object.data"
	KeyChanges   = "magnum_object.changes"

	// ProjectNamespace is OBJ_PROJECT_NAMESPACE; a receiver refuses any other.
	ProjectNamespace = "magnum"
)

var primitiveOrder = []string{KeyName, KeyNamespace, KeyVersion, KeyData, KeyChanges}

// Errors for objects this service cannot accept. They are wrapped in an *ObjectError, so test
// with errors.Is.
var (
	ErrMalformedObject     = errors.New("malformed object primitive")
	ErrUnknownClass        = errors.New("unknown object class")
	ErrWrongNamespace      = errors.New("object from another namespace")
	ErrIncompatibleVersion = errors.New("incompatible object version")
	ErrInvalidField        = errors.New("invalid object field")
)

// ObjectError says which object (and field) could not be decoded or encoded, and why.
type ObjectError struct {
	Kind      error // one of the Err* values above
	Class     string
	Namespace string
	Version   string
	Field     string
	Detail    string
	// Err is the underlying error, e.g. a nested object's own *ObjectError.
	Err error
}

func (e *ObjectError) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Error())
	if e.Class != "" {
		fmt.Fprintf(&b, " %s", e.Class)
		if e.Version != "" {
			fmt.Fprintf(&b, " %s", e.Version)
		}
	}
	if e.Namespace != "" && errors.Is(e.Kind, ErrWrongNamespace) {
		fmt.Fprintf(&b, " (namespace %q, want %q)", e.Namespace, ProjectNamespace)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %s", e.Field)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *ObjectError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

func malformed(format string, args ...any) error {
	return &ObjectError{Kind: ErrMalformedObject, Detail: fmt.Sprintf(format, args...)}
}

// Object is one oslo.versionedobjects primitive, kept losslessly: data fields stay raw JSON in
// their received order, "absent" and "null" stay distinct, and unknown top-level keys survive.
// Encode(DecodeObject(b)) equals b after json.Compact.
//
// Setting a field (Set, SetRaw, SetNull) adds it to the changes, as assigning an attribute does
// in Python; Python persists exactly the changed fields when it saves.
type Object struct {
	Name      string
	Namespace string
	Version   Version

	versionText string // as received, so "1.23.0" is re-emitted as is
	names       []string
	data        map[string]json.RawMessage

	changes        []string
	changesPresent bool // "magnum_object.changes" was in the primitive (even if empty)

	order []string                   // top-level keys in received order
	extra map[string]json.RawMessage // top-level keys other than the five known ones
}

// NewObject starts an empty object of a known class at the given version.
func NewObject(name string, version Version) *Object {
	return &Object{Name: name, Namespace: ProjectNamespace, Version: version, data: map[string]json.RawMessage{}}
}

// IsPrimitive reports whether a JSON value looks like an object primitive (a dict holding
// "magnum_object.name"), the test oslo's serializer applies when walking RPC arguments.
func IsPrimitive(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil {
		return false
	}
	_, ok := probe[KeyName]
	return ok
}

// DecodeObject parses a primitive and checks that this service may accept it: namespace
// "magnum", a class it knows, and a major version it speaks. Newer minors of a known class are
// accepted (their unknown fields are kept raw), which is more lenient than Python's receiver, so
// nothing a newer magnum-api adds is lost on the way through.
func DecodeObject(raw []byte) (*Object, error) {
	o, err := parseObject(raw)
	if err != nil {
		return nil, err
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	return o, nil
}

// UnmarshalJSON is DecodeObject.
func (o *Object) UnmarshalJSON(raw []byte) error {
	d, err := DecodeObject(raw)
	if err != nil {
		return err
	}
	*o = *d
	return nil
}

func (o *Object) check() error {
	if o.Namespace != ProjectNamespace {
		return &ObjectError{Kind: ErrWrongNamespace, Class: o.Name, Namespace: o.Namespace, Version: o.versionString()}
	}
	cls, ok := classes[o.Name]
	if !ok {
		return &ObjectError{Kind: ErrUnknownClass, Class: o.Name, Version: o.versionString(),
			Detail: "this service knows " + strings.Join(knownClassNames(), ", ")}
	}
	if o.Version.Major != cls.latest.Major {
		return &ObjectError{Kind: ErrIncompatibleVersion, Class: o.Name, Version: o.versionString(),
			Detail: fmt.Sprintf("this service speaks %s %d.x (up to %s)", o.Name, cls.latest.Major, cls.latest)}
	}
	return nil
}

func (o *Object) versionString() string {
	if o.versionText != "" {
		return o.versionText
	}
	return o.Version.String()
}

// parseObject reads the primitive without judging class or version.
func parseObject(raw []byte) (*Object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	top, err := readOrderedObject(dec)
	if err != nil {
		return nil, malformed("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("trailing data after the object")
	}
	o := &Object{data: map[string]json.RawMessage{}}
	seen := map[string]bool{}
	for _, kv := range top {
		o.order = append(o.order, kv.key)
		switch kv.key {
		case KeyName:
			if err := json.Unmarshal(kv.raw, &o.Name); err != nil || o.Name == "" {
				return nil, malformed("%s must be a non-empty string", KeyName)
			}
		case KeyNamespace:
			if err := json.Unmarshal(kv.raw, &o.Namespace); err != nil {
				return nil, malformed("%s must be a string", KeyNamespace)
			}
		case KeyVersion:
			if err := json.Unmarshal(kv.raw, &o.versionText); err != nil {
				return nil, malformed("%s must be a string", KeyVersion)
			}
			if o.Version, err = ParseVersion(o.versionText); err != nil {
				return nil, malformed("%v", err)
			}
		case KeyData:
			dd := json.NewDecoder(bytes.NewReader(kv.raw))
			fields, err := readOrderedObject(dd)
			if err != nil {
				return nil, malformed("%s: %v", KeyData, err)
			}
			for _, f := range fields {
				o.names = append(o.names, f.key)
				o.data[f.key] = f.raw
			}
		case KeyChanges:
			var ch []string
			if err := json.Unmarshal(kv.raw, &ch); err != nil {
				return nil, malformed("%s must be a list of strings", KeyChanges)
			}
			o.changes, o.changesPresent = ch, true
		default:
			if o.extra == nil {
				o.extra = map[string]json.RawMessage{}
			}
			o.extra[kv.key] = kv.raw
		}
		seen[kv.key] = true
	}
	for _, k := range []string{KeyName, KeyNamespace, KeyVersion, KeyData} {
		if !seen[k] {
			return nil, malformed("%s is missing", k)
		}
	}
	return o, nil
}

type keyRaw struct {
	key string
	raw json.RawMessage
}

// readOrderedObject reads one JSON object keeping key order and raw values. Duplicate keys are
// refused: Python would silently keep the last one, which hides a broken sender.
func readOrderedObject(dec *json.Decoder) ([]keyRaw, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected a JSON object, got %v", tok)
	}
	var out []keyRaw
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("expected a key, got %v", tok)
		}
		if seen[key] {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("value of %q: %w", key, err)
		}
		out = append(out, keyRaw{key, raw})
	}
	if _, err := dec.Token(); err != nil { // closing '}'
		return nil, err
	}
	return out, nil
}

// Encode returns the primitive as compact JSON. Values keep their received spelling (including
// \u escapes); nothing is HTML-escaped. "magnum_object.changes" is written when there are
// changes, or when the received primitive had the key.
func (o *Object) Encode() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	writeKey := func(k string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONString(&b, k)
		b.WriteByte(':')
	}
	order := o.order
	if len(order) == 0 {
		order = primitiveOrder
	}
	written := map[string]bool{}
	emit := func(k string) error {
		if written[k] {
			return nil
		}
		written[k] = true
		switch k {
		case KeyName:
			writeKey(k)
			writeJSONString(&b, o.Name)
		case KeyNamespace:
			writeKey(k)
			writeJSONString(&b, o.Namespace)
		case KeyVersion:
			writeKey(k)
			v := o.Version.String()
			if pv, err := ParseVersion(o.versionText); err == nil && pv == o.Version {
				v = o.versionText
			}
			writeJSONString(&b, v)
		case KeyData:
			writeKey(k)
			b.WriteByte('{')
			for i, name := range o.names {
				if i > 0 {
					b.WriteByte(',')
				}
				writeJSONString(&b, name)
				b.WriteByte(':')
				if err := json.Compact(&b, o.data[name]); err != nil {
					return &ObjectError{Kind: ErrInvalidField, Class: o.Name, Field: name, Detail: err.Error()}
				}
			}
			b.WriteByte('}')
		case KeyChanges:
			if len(o.changes) == 0 && !o.changesPresent {
				return nil
			}
			writeKey(k)
			b.WriteByte('[')
			for i, c := range o.changes {
				if i > 0 {
					b.WriteByte(',')
				}
				writeJSONString(&b, c)
			}
			b.WriteByte(']')
		default:
			raw, ok := o.extra[k]
			if !ok {
				return nil
			}
			writeKey(k)
			if err := json.Compact(&b, raw); err != nil {
				return malformed("%s: %v", k, err)
			}
		}
		return nil
	}
	for _, k := range order {
		if err := emit(k); err != nil {
			return nil, err
		}
	}
	for _, k := range primitiveOrder { // keys an object built in Go may add to a received one
		if err := emit(k); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// MarshalJSON is Encode. (encoding/json HTML-escapes what a Marshaler returns; the result is the
// same JSON value, which is all magnum-api's json.loads cares about.)
func (o *Object) MarshalJSON() ([]byte, error) { return o.Encode() }

// writeJSONString writes s as a JSON string without HTML escaping.
func writeJSONString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // Encoder appends a newline
}

// FieldNames lists the set fields in order.
func (o *Object) FieldNames() []string { return append([]string(nil), o.names...) }

// Has reports whether a field is set (possibly to null).
func (o *Object) Has(name string) bool { _, ok := o.data[name]; return ok }

// IsNull reports whether a field is set to null.
func (o *Object) IsNull(name string) bool {
	raw, ok := o.data[name]
	return ok && bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// Raw returns a field's raw JSON value and whether it is set.
func (o *Object) Raw(name string) (json.RawMessage, bool) {
	raw, ok := o.data[name]
	return raw, ok
}

// Get decodes a set, non-null field into v; ok is false when the field is absent or null.
func (o *Object) Get(name string, v any) (ok bool, err error) {
	raw, set := o.data[name]
	if !set || o.IsNull(name) {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, &ObjectError{Kind: ErrInvalidField, Class: o.Name, Field: name, Detail: err.Error()}
	}
	return true, nil
}

// Set stores v (JSON-encoded, without HTML escaping) and marks the field changed.
func (o *Object) Set(name string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return &ObjectError{Kind: ErrInvalidField, Class: o.Name, Field: name, Detail: err.Error()}
	}
	return o.SetRaw(name, bytes.TrimRight(b.Bytes(), "\n"))
}

// SetNull sets a field to null and marks it changed.
func (o *Object) SetNull(name string) { _ = o.SetRaw(name, json.RawMessage("null")) }

// SetRaw stores a raw JSON value and marks the field changed.
func (o *Object) SetRaw(name string, raw json.RawMessage) error {
	if !json.Valid(raw) {
		return &ObjectError{Kind: ErrInvalidField, Class: o.Name, Field: name, Detail: "not valid JSON"}
	}
	o.setRaw(name, append(json.RawMessage(nil), raw...))
	o.markChanged(name)
	return nil
}

func (o *Object) setRaw(name string, raw json.RawMessage) {
	if o.data == nil {
		o.data = map[string]json.RawMessage{}
	}
	if _, ok := o.data[name]; !ok {
		o.names = append(o.names, name)
	}
	o.data[name] = raw
}

// Unset removes a field (and its change mark): it becomes absent, as after `delattr` in Python.
func (o *Object) Unset(name string) {
	if _, ok := o.data[name]; !ok {
		return
	}
	delete(o.data, name)
	o.names = removeString(o.names, name)
	o.changes = removeString(o.changes, name)
}

func (o *Object) markChanged(name string) {
	for _, c := range o.changes {
		if c == name {
			return
		}
	}
	o.changes = append(o.changes, name)
}

// Changes lists the changed fields (the "magnum_object.changes" list).
func (o *Object) Changes() []string { return append([]string(nil), o.changes...) }

// Changed reports whether a field is in the changes.
func (o *Object) Changed(name string) bool {
	for _, c := range o.changes {
		if c == name {
			return true
		}
	}
	return false
}

// ResetChanges empties the changes, as obj_reset_changes() does after a save.
func (o *Object) ResetChanges() { o.changes = nil }

// Clone returns a deep copy.
func (o *Object) Clone() *Object {
	c := *o
	c.names = append([]string(nil), o.names...)
	c.changes = append([]string(nil), o.changes...)
	c.order = append([]string(nil), o.order...)
	c.data = make(map[string]json.RawMessage, len(o.data))
	for k, v := range o.data {
		c.data[k] = append(json.RawMessage(nil), v...)
	}
	if o.extra != nil {
		c.extra = make(map[string]json.RawMessage, len(o.extra))
		for k, v := range o.extra {
			c.extra[k] = append(json.RawMessage(nil), v...)
		}
	}
	return &c
}

// secretFields never appear in String(): Cluster.trustee_password is sent in clear text by
// Magnum up to 22.x, and X509KeyPair carries private keys.
var secretFields = map[string]bool{
	"trustee_password": true, "private_key": true, "private_key_passphrase": true, "password": true,
}

// String shows the object for logs with secrets redacted.
func (o *Object) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s {", o.Name, o.versionString())
	for i, n := range o.names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
		b.WriteString(": ")
		if secretFields[n] && !o.IsNull(n) {
			b.WriteString(`"<redacted>"`)
		} else {
			b.Write(o.data[n])
		}
	}
	b.WriteString("}")
	return b.String()
}

// GoString keeps %#v from printing secrets.
func (o *Object) GoString() string { return "magnum.Object(" + o.String() + ")" }

func removeString(list []string, s string) []string {
	out := list[:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
