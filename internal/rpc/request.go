package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Handler runs one RPC method. The returned result is JSON-marshalled into the reply of a call
// (json.RawMessage and json.Marshaler values are used as they are; nil becomes null) and
// ignored for a cast. An error is reported to the caller as an oslo remote exception: see
// OsloFailure, RemoteError, InvalidArgs; errors wrapped with Retry are retried instead.
type Handler func(ctx context.Context, req *Request) (result any, err error)

// Request is one decoded RPC message handed to a Handler.
type Request struct {
	Method string
	// Args are the keyword arguments, raw JSON (objects are decoded by internal/magnum).
	Args    map[string]json.RawMessage
	Context *Context

	UniqueID string // _unique_id
	MsgID    string // _msg_id (calls)
	ReplyQ   string // _reply_q (calls)
	IsCall   bool
	// Deadline is when the caller stops waiting: receipt time + the message's AMQP expiration
	// (calls only; zero for casts). The broker drops calls that expire while still queued.
	Deadline time.Time
	// Redelivered is the broker's flag: an earlier delivery was not acknowledged (a consumer
	// died or the connection dropped), so the handler may have run before.
	Redelivered bool
	// Attempt counts handler runs for this delivery (1, then 2… after Retry errors).
	Attempt int
	// FirstAttempt is when the handler first ran for this delivery: how long it has been held.
	FirstAttempt time.Time
	// Queue is the queue the message came from.
	Queue string
	// Cluster is the uuid of the cluster the message names (its "uuid" argument or its cluster
	// object's), "" when it names none; logs carry it.
	Cluster string

	Namespace, Version string
}

type requestKey struct{}

// WithRequest returns ctx carrying r, as the server's handler contexts do.
func WithRequest(ctx context.Context, r *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestFrom returns the request a handler's context belongs to (nil outside a handler): code
// below the handler (store wrappers, notifications) learns the caller's context from it.
func RequestFrom(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// ArgNames returns the argument names, sorted.
func (r Request) ArgNames() []string {
	names := make([]string, 0, len(r.Args))
	for k := range r.Args {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Arg decodes one argument into v; a missing argument leaves v untouched and returns false.
func (r *Request) Arg(name string, v any) (bool, error) {
	raw, ok := r.Args[name]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, InvalidArgs("argument %s: %v", name, err)
	}
	return true, nil
}

// The views below use value receivers so that a Request printed by value is covered too.

// LogValue gives the loggable view: method, ids, argument names (never values: a Zed cluster
// object carries trustee_password) and the redacted context.
func (r Request) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("method", r.Method),
	}
	if r.Cluster != "" {
		attrs = append(attrs, slog.String("cluster", r.Cluster))
	}
	attrs = append(attrs,
		slog.String("unique_id", r.UniqueID),
		slog.Bool("call", r.IsCall),
		slog.String("args", strings.Join(r.ArgNames(), ",")),
	)
	if r.MsgID != "" {
		attrs = append(attrs, slog.String("msg_id", r.MsgID))
	}
	if r.Redelivered {
		attrs = append(attrs, slog.Bool("redelivered", true))
	}
	if r.Attempt > 1 {
		attrs = append(attrs, slog.Int("attempt", r.Attempt))
	}
	if r.Context != nil {
		attrs = append(attrs, slog.Any("context", r.Context.LogValue()))
	}
	return slog.GroupValue(attrs...)
}

// String is the same view as LogValue.
func (r Request) String() string {
	ctx := "<nil>"
	if r.Context != nil {
		ctx = r.Context.String()
	}
	return fmt.Sprintf("Request{method=%s unique_id=%s call=%t args=[%s] %s}", r.Method, r.UniqueID, r.IsCall,
		strings.Join(r.ArgNames(), ","), ctx)
}

// Format makes every fmt verb (including %+v, which would print Args) use String.
func (r Request) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(r.String())) }

// DefaultKeyFunc serialises work per cluster: the "uuid" argument (cluster_delete), else the
// uuid inside the "cluster" object argument (every other cluster and nodegroup method).
// Requests without either run independently.
func DefaultKeyFunc(r *Request) string {
	if r.Cluster != "" {
		return r.Cluster // the server named it on arrival
	}
	return clusterOf(r)
}

// clusterOf finds the cluster uuid of DefaultKeyFunc. The arguments were validated with the
// message, so the members are only split, not decoded: the cluster object is most of a message.
func clusterOf(r *Request) string {
	if raw, ok := r.Args["uuid"]; ok {
		if s, ok := unquoteJSONString(raw); ok && len(s) > 0 {
			return string(s)
		}
	}
	if raw, ok := r.Args["cluster"]; ok {
		if data, ok := memberOf(raw, "magnum_object.data"); ok {
			if id, ok := memberOf(data, "uuid"); ok {
				if s, ok := unquoteJSONString(id); ok {
					return string(s)
				}
			}
		}
	}
	return ""
}

// memberOf is the value of an object's member (splitObject keeps the last of duplicates, as
// encoding/json does).
func memberOf(object []byte, key string) ([]byte, bool) {
	members, err := splitObject(object)
	if err != nil {
		return nil, false
	}
	for _, m := range members {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}
