// Package logctx carries log attributes in a context: the RPC server stores the cluster, method and
// request id of the message being handled, and every line logged with that context (by the server,
// the conductor or client libraries) carries them. Handler adds them to each record; New builds the
// bridge's logger in the configured format.
package logctx

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

type attrsKey struct{}

// With returns ctx carrying attrs in addition to those it already carries (a later attribute with
// the same key replaces the earlier one).
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev := Attrs(ctx)
	merged := make([]slog.Attr, 0, len(prev)+len(attrs))
	for _, a := range prev {
		if !hasKey(attrs, a.Key) {
			merged = append(merged, a)
		}
	}
	merged = append(merged, attrs...)
	return context.WithValue(ctx, attrsKey{}, merged)
}

// Attrs returns the attributes ctx carries.
func Attrs(ctx context.Context) []slog.Attr {
	if ctx == nil {
		return nil
	}
	a, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	return a
}

// Value returns the string value of the attribute key, "" when ctx does not carry it.
func Value(ctx context.Context, key string) string {
	for _, a := range Attrs(ctx) {
		if a.Key == key {
			return a.Value.String()
		}
	}
	return ""
}

func hasKey(attrs []slog.Attr, key string) bool {
	for _, a := range attrs {
		if a.Key == key {
			return true
		}
	}
	return false
}

// Handler adds the context's attributes to every record, unless the record already has an
// attribute of the same key.
type Handler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h Handler) Handle(ctx context.Context, r slog.Record) error {
	attrs := Attrs(ctx)
	if len(attrs) > 0 {
		present := map[string]bool{}
		r.Attrs(func(a slog.Attr) bool { present[a.Key] = true; return true })
		for _, a := range attrs {
			if !present[a.Key] {
				r.AddAttrs(a)
			}
		}
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return Handler{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h Handler) WithGroup(name string) slog.Handler { return Handler{h.Handler.WithGroup(name)} }

// Formats are the values of [bridge] log_format.
var Formats = []string{"text", "json"}

// New returns a logger writing format ("text" or "json") at level (debug, info, warn, error) to w,
// with the context's attributes on every line.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch format {
	case "", "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: want text or json", format)
	}
	return slog.New(Handler{h}), nil
}
