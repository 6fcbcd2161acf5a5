package magnum

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
)

// ErrWrongClass: a primitive of another class than the view asked for.
var ErrWrongClass = errors.New("unexpected object class")

// field is implemented by *Opt[T]; the codec drives views through it.
type field interface {
	decodeField(raw json.RawMessage, changed bool) error
	encodeField(vs *Versions) (json.RawMessage, error)
	// equalsRaw: the field holds exactly what raw decodes to.
	equalsRaw(raw json.RawMessage) bool
	optState() optState
	isChanged() bool
}

type fieldInfo struct {
	name    string
	index   []int
	notNull bool
	since   Version // zero: all versions
	until   Version // zero: all versions
}

func (f fieldInfo) availableAt(v Version) bool {
	if !f.since.IsZero() && v.Less(f.since) {
		return false
	}
	if !f.until.IsZero() && f.until.Less(v) {
		return false
	}
	return true
}

var fieldCache sync.Map // reflect.Type -> []fieldInfo

var fieldType = reflect.TypeOf((*field)(nil)).Elem()

func viewFields(t reflect.Type) []fieldInfo {
	if fi, ok := fieldCache.Load(t); ok {
		return fi.([]fieldInfo)
	}
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("ovo")
		if !ok {
			continue
		}
		if !reflect.PointerTo(sf.Type).Implements(fieldType) {
			panic(fmt.Sprintf("magnum: %s.%s has an ovo tag but is not an Opt", t.Name(), sf.Name))
		}
		parts := strings.Split(tag, ",")
		info := fieldInfo{name: parts[0], index: sf.Index}
		for _, p := range parts[1:] {
			switch {
			case p == "notnull":
				info.notNull = true
			case strings.HasPrefix(p, "since="):
				info.since = MustVersion(strings.TrimPrefix(p, "since="))
			case strings.HasPrefix(p, "until="):
				info.until = MustVersion(strings.TrimPrefix(p, "until="))
			default:
				panic(fmt.Sprintf("magnum: %s.%s: unknown ovo tag option %q", t.Name(), sf.Name, p))
			}
		}
		out = append(out, info)
	}
	fieldCache.Store(t, out)
	return out
}

// Decode fills a typed view from an object primitive. Fields the view does not know are kept
// and re-emitted when the view is encoded at the version it came in; fields listed in the
// primitive's changes are marked changed.
func Decode(obj *Object, view View) error {
	if obj == nil {
		return malformed("no object")
	}
	if view == nil || reflect.ValueOf(view).IsNil() {
		return malformed("no view to decode %s into", obj.Name)
	}
	if err := obj.check(); err != nil {
		return err
	}
	if obj.Name != view.ObjectName() {
		return &ObjectError{Kind: ErrWrongClass, Class: obj.Name, Version: obj.versionString(),
			Detail: "expected " + view.ObjectName()}
	}
	rv := reflect.ValueOf(view).Elem()
	infos := viewFields(rv.Type())
	byName := make(map[string]fieldInfo, len(infos))
	for _, fi := range infos {
		byName[fi.name] = fi
	}
	b := view.base()
	*b = viewBase{version: obj.Version}
	changed := map[string]bool{}
	for _, c := range obj.changes {
		changed[c] = true
	}
	var unknown *Object
	b.raw = map[string]json.RawMessage{}
	for _, name := range obj.names {
		raw := obj.data[name]
		fi, ok := byName[name]
		if !ok {
			if unknown == nil {
				unknown = NewObject(obj.Name, obj.Version)
			}
			unknown.setRaw(name, raw)
			if changed[name] {
				unknown.markChanged(name)
			}
			continue
		}
		isNull := bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
		if isNull && fi.notNull {
			return &ObjectError{Kind: ErrInvalidField, Class: obj.Name, Version: obj.versionString(), Field: name,
				Detail: "null is not allowed (the field is not nullable)"}
		}
		f := rv.FieldByIndex(fi.index).Addr().Interface().(field)
		if err := f.decodeField(raw, changed[name]); err != nil {
			return &ObjectError{Kind: ErrInvalidField, Class: obj.Name, Version: obj.versionString(), Field: name, Err: err}
		}
		b.raw[name] = append(json.RawMessage(nil), raw...)
	}
	b.unknown = unknown
	b.order = append([]string(nil), obj.names...)
	b.changeOrder = append([]string(nil), obj.changes...)
	b.topOrder = append([]string(nil), obj.order...)
	return nil
}

// Encode turns a view into a primitive at the version vs gives for its class (a nil vs: each
// class's Zed version). Fields that do not exist at that version are left out, as Python's
// backport would; nested objects use vs too. Changed fields become the primitive's changes.
func Encode(view View, vs *Versions) (*Object, error) {
	ver, err := vs.For(view.ObjectName())
	if err != nil {
		return nil, err
	}
	return EncodeAt(view, ver, vs)
}

// EncodeAt encodes a view at an explicit version (nested objects still follow vs).
func EncodeAt(view View, ver Version, vs *Versions) (*Object, error) {
	name := view.ObjectName()
	cls, ok := classes[name]
	if !ok {
		return nil, &ObjectError{Kind: ErrUnknownClass, Class: name}
	}
	if ver.Major != cls.latest.Major || cls.latest.Less(ver) || ver.Less(cls.oldest) {
		return nil, &ObjectError{Kind: ErrIncompatibleVersion, Class: name, Version: ver.String(),
			Detail: fmt.Sprintf("this service writes %s %s to %s", name, cls.oldest, cls.latest)}
	}
	rv := reflect.ValueOf(view).Elem()
	infos := viewFields(rv.Type())
	b := view.base()
	obj := NewObject(name, ver)
	obj.order = b.topOrder

	byName := make(map[string]fieldInfo, len(infos))
	for _, fi := range infos {
		byName[fi.name] = fi
	}
	keepUnknown := b.unknown != nil && b.version == ver
	var changed []string
	emit := func(name string) error {
		if obj.Has(name) {
			return nil
		}
		fi, known := byName[name]
		if !known {
			if keepUnknown {
				if raw, ok := b.unknown.data[name]; ok {
					obj.setRaw(name, raw)
					if b.unknown.Changed(name) {
						changed = append(changed, name)
					}
				}
			}
			return nil
		}
		f := rv.FieldByIndex(fi.index).Addr().Interface().(field)
		if f.optState() == absent || !fi.availableAt(ver) {
			return nil
		}
		if f.optState() == null && fi.notNull {
			return &ObjectError{Kind: ErrInvalidField, Class: name, Version: ver.String(), Field: fi.name,
				Detail: "null is not allowed (the field is not nullable)"}
		}
		// The received bytes, if the value is unchanged and the version the same (a nested object
		// is always re-encoded: its version follows vs).
		if prev, ok := b.raw[fi.name]; ok && b.version == ver && fi.name != "cluster_template" && f.equalsRaw(prev) {
			obj.setRaw(fi.name, prev)
			if f.isChanged() {
				changed = append(changed, fi.name)
			}
			return nil
		}
		raw, err := f.encodeField(vs)
		if err != nil {
			return &ObjectError{Kind: ErrInvalidField, Class: obj.Name, Version: ver.String(), Field: fi.name, Err: err}
		}
		obj.setRaw(fi.name, raw)
		if f.isChanged() {
			changed = append(changed, fi.name)
		}
		return nil
	}
	for _, n := range b.order { // received order first, so a decoded view re-encodes alike
		if err := emit(n); err != nil {
			return nil, err
		}
	}
	for _, fi := range infos {
		if err := emit(fi.name); err != nil {
			return nil, err
		}
	}
	// Changes: received order first, then fields changed since.
	seen := map[string]bool{}
	isChanged := map[string]bool{}
	for _, c := range changed {
		isChanged[c] = true
	}
	for _, c := range append(append([]string(nil), b.changeOrder...), changed...) {
		if isChanged[c] && !seen[c] {
			seen[c] = true
			obj.changes = append(obj.changes, c)
		}
	}
	return obj, nil
}

// ReceivedJSON returns a field's JSON exactly as it was received, if the view still holds that
// value: the way to keep a dict's key order (e.g. labels, which Python stores in the order the
// user gave) when a view is written elsewhere, such as to the database.
func ReceivedJSON(view View, name string) (json.RawMessage, bool) {
	b := view.base()
	prev, ok := b.raw[name]
	if !ok {
		return nil, false
	}
	rv := reflect.ValueOf(view).Elem()
	for _, fi := range viewFields(rv.Type()) {
		if fi.name == name {
			if rv.FieldByIndex(fi.index).Addr().Interface().(field).equalsRaw(prev) {
				return prev, true
			}
			return nil, false
		}
	}
	return nil, false
}

// Changed lists a view's changed fields (the ones Python would persist on save()).
func Changed(view View) []string {
	rv := reflect.ValueOf(view).Elem()
	var out []string
	for _, fi := range viewFields(rv.Type()) {
		if rv.FieldByIndex(fi.index).Addr().Interface().(field).isChanged() {
			out = append(out, fi.name)
		}
	}
	return out
}

// ResetChanges clears every change mark (after the view was persisted).
func ResetChanges(view View) {
	rv := reflect.ValueOf(view).Elem()
	for _, fi := range viewFields(rv.Type()) {
		rv.FieldByIndex(fi.index).Addr().Interface().(interface{ resetChanged() }).resetChanged()
	}
	view.base().changeOrder = nil
}

// DecodeCluster decodes a Cluster primitive (with its nested cluster_template, if present).
func DecodeCluster(obj *Object) (*Cluster, error) {
	v := &Cluster{}
	return v, Decode(obj, v)
}

// DecodeClusterTemplate decodes a ClusterTemplate primitive.
func DecodeClusterTemplate(obj *Object) (*ClusterTemplate, error) {
	v := &ClusterTemplate{}
	return v, Decode(obj, v)
}

// DecodeNodeGroup decodes a NodeGroup primitive.
func DecodeNodeGroup(obj *Object) (*NodeGroup, error) {
	v := &NodeGroup{}
	return v, Decode(obj, v)
}

// DecodeCertificate decodes a Certificate primitive.
func DecodeCertificate(obj *Object) (*Certificate, error) {
	v := &Certificate{}
	return v, Decode(obj, v)
}

// --- Opt[T] codec ---

func (o *Opt[T]) optState() optState { return o.state }
func (o *Opt[T]) isChanged() bool    { return o.changed }
func (o *Opt[T]) resetChanged()      { o.changed = false }

func (o *Opt[T]) decodeField(raw json.RawMessage, changed bool) error {
	*o = Opt[T]{changed: changed}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		o.state = null
		return nil
	}
	if err := decodeValue(raw, &o.v); err != nil {
		return err
	}
	o.state = present
	return nil
}

func (o *Opt[T]) equalsRaw(raw json.RawMessage) bool {
	var prev Opt[T]
	if prev.decodeField(raw, false) != nil || prev.state != o.state {
		return false
	}
	return reflect.DeepEqual(prev.v, o.v)
}

func (o *Opt[T]) encodeField(vs *Versions) (json.RawMessage, error) {
	if o.state == null {
		return json.RawMessage("null"), nil
	}
	return encodeValue(o.v, vs)
}

// validator is implemented by the enum types.
type validator interface{ Valid() bool }

func decodeValue(raw json.RawMessage, ptr any) error {
	switch p := ptr.(type) {
	case *time.Time:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("a date-time must be a string: %w", err)
		}
		t, err := ParseDateTime(s)
		if err != nil {
			return err
		}
		*p = t
		return nil
	case **ClusterTemplate:
		obj, err := DecodeObject(raw)
		if err != nil {
			return err
		}
		ct := &ClusterTemplate{}
		if err := Decode(obj, ct); err != nil {
			return err
		}
		*p = ct
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(ptr); err != nil {
		return err
	}
	if v, ok := reflect.ValueOf(ptr).Elem().Interface().(validator); ok && !v.Valid() {
		return fmt.Errorf("%s is not a valid %T", raw, v)
	}
	return nil
}

func encodeValue(v any, vs *Versions) (json.RawMessage, error) {
	switch x := v.(type) {
	case time.Time:
		return marshalNoEscape(FormatDateTime(x))
	case *ClusterTemplate:
		if x == nil {
			return json.RawMessage("null"), nil
		}
		obj, err := Encode(x, vs)
		if err != nil {
			return nil, err
		}
		return obj.Encode()
	case Secret:
		return marshalNoEscape(string(x))
	case validator:
		if !x.Valid() {
			return nil, fmt.Errorf("%q is not a valid %T", x, x)
		}
	}
	return marshalNoEscape(v)
}

func marshalNoEscape(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
