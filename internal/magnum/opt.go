package magnum

import (
	"fmt"
	"time"
)

type optState uint8

const (
	absent optState = iota
	null
	present
)

// Opt is one field of a typed object view. It has three states, like an oslo object attribute:
// absent (not set, and not sent), null (set to None), and a value. It also remembers whether the
// field is in the object's changes: Set and SetNull mark it, decoding marks exactly the fields
// the sender listed in "magnum_object.changes".
type Opt[T any] struct {
	v       T
	state   optState
	changed bool
}

// Value returns a set field holding v. Like assigning an attribute in Python, it counts as a
// change.
func Value[T any](v T) Opt[T] { return Opt[T]{v: v, state: present, changed: true} }

// Null returns a field set to null (counted as a change).
func Null[T any]() Opt[T] { return Opt[T]{state: null, changed: true} }

// Get returns the value and true when the field holds a value (not absent, not null).
func (o Opt[T]) Get() (T, bool) { return o.v, o.state == present }

// Or returns the value, or def when absent or null.
func (o Opt[T]) Or(def T) T {
	if o.state == present {
		return o.v
	}
	return def
}

// IsSet reports whether the field is set, to a value or to null.
func (o Opt[T]) IsSet() bool { return o.state != absent }

// IsNull reports whether the field is set to null.
func (o Opt[T]) IsNull() bool { return o.state == null }

// Changed reports whether the field is in the changes.
func (o Opt[T]) Changed() bool { return o.changed }

// Set stores v and marks the field changed.
func (o *Opt[T]) Set(v T) { *o = Value(v) }

// SetNull sets the field to null and marks it changed.
func (o *Opt[T]) SetNull() { *o = Null[T]() }

// Unset makes the field absent again.
func (o *Opt[T]) Unset() { *o = Opt[T]{} }

// String prints the value (Secret values print redacted) or "<absent>"/"<null>".
func (o Opt[T]) String() string {
	switch o.state {
	case absent:
		return "<absent>"
	case null:
		return "<null>"
	}
	if t, ok := any(o.v).(time.Time); ok {
		return FormatDateTime(t)
	}
	return fmt.Sprint(o.v)
}

// GoString keeps %#v from bypassing String (and so from printing secrets).
func (o Opt[T]) GoString() string { return o.String() }

// Secret is a string that never prints: trustee passwords, private keys and their passphrases.
type Secret string

func (Secret) String() string   { return "<redacted>" }
func (Secret) GoString() string { return "<redacted>" }

// Reveal returns the secret's text, for the code that must use it.
func (s Secret) Reveal() string { return string(s) }
