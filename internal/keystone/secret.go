package keystone

import (
	"fmt"
	"io"
	"log/slog"
)

const (
	redacted   = "[REDACTED]"
	emptyValue = "[EMPTY]"
)

// Secret holds an application credential secret, a password or a token. Every way the value could
// reach a log — fmt verbs including %v, %+v, %#v, %s, %q and %x, slog, encoding/json and
// encoding.TextMarshaler users such as YAML encoders — prints "[REDACTED]" instead. Reveal returns
// the value for the few places that must send it: the Keystone request and the rendered clouds.yaml.
//
// The value sits in an unexported field so that reflection-based printers cannot reach it either.
type Secret struct {
	value string
}

// NewSecret wraps a sensitive string.
func NewSecret(value string) Secret { return Secret{value: value} }

// Reveal returns the sensitive value. Call it only where the value leaves the process on purpose.
func (s Secret) Reveal() string { return s.value }

// IsZero reports whether no value is held.
func (s Secret) IsZero() bool { return s.value == "" }

func (s Secret) placeholder() string {
	if s.value == "" {
		return emptyValue
	}
	return redacted
}

// String implements fmt.Stringer.
func (s Secret) String() string { return s.placeholder() }

// GoString implements fmt.GoStringer, used by %#v.
func (s Secret) GoString() string { return "keystone.Secret(" + s.placeholder() + ")" }

// Format implements fmt.Formatter so that every verb, not only %s and %v, is redacted.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, s.placeholder())
}

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.placeholder()) }

// MarshalJSON keeps the value out of JSON (and of sigs.k8s.io/yaml, which goes through JSON).
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.placeholder() + `"`), nil }

// MarshalText keeps the value out of text encoders.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.placeholder()), nil }
