package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/pyjson"
)

// Modules and classes of the oslo/Magnum exceptions this package produces itself.
const (
	MagnumExceptionModule = "magnum.common.exception"
	dispatcherModule      = "oslo_messaging.rpc.dispatcher"
	messagingExcModule    = "oslo_messaging.exceptions"

	// genericFailureMessage is MagnumException's own default message; plain Go errors are
	// reported with it so that nothing from the error text reaches the API user.
	genericFailureMessage = "An unknown exception occurred."
)

// OsloFailure is implemented by errors that choose the remote exception they are reported as.
// kwargs may be nil; a "code" entry is the HTTP status magnum-api answers with.
type OsloFailure interface {
	OsloFailure() (module, class string, kwargs map[string]any)
}

// RemoteError is an oslo remote exception: what a failed call's reply carries.
// Handlers may return one to pick the class; Client.Call returns one for a failure reply.
//
// Magnum's client re-raises classes of module magnum.common.exception as themselves (with the
// HTTP status from kwargs "code"); any other module becomes oslo_messaging.RemoteError → 500.
type RemoteError struct {
	Module  string
	Class   string
	Message string
	// Kwargs are the exception's keyword arguments; Code is merged in as "code" when non-zero.
	Kwargs map[string]any
	Code   int
	// Args are the exception's positional args; nil encodes as [Message], which is how
	// MagnumException(message) rebuilds itself on the client.
	Args []any
	// Traceback is the remote "tb" list; this package always sends an empty one.
	Traceback []string
}

// NewMagnumError builds a magnum.common.exception failure, e.g.
// NewMagnumError("NotSupported", 400, "Rotating the CA is not supported.", nil).
func NewMagnumError(class string, code int, message string, kwargs map[string]any) *RemoteError {
	return &RemoteError{Module: MagnumExceptionModule, Class: class, Message: message, Code: code, Kwargs: kwargs}
}

func (e *RemoteError) Error() string {
	if e.Module == "" {
		return e.Class + ": " + e.Message
	}
	return e.Module + "." + e.Class + ": " + e.Message
}

// OsloFailure lets a handler return a RemoteError as is.
func (e *RemoteError) OsloFailure() (string, string, map[string]any) {
	return e.Module, e.Class, e.kwargs()
}

func (e *RemoteError) kwargs() map[string]any {
	out := make(map[string]any, len(e.Kwargs)+1)
	for k, v := range e.Kwargs {
		out[k] = v
	}
	if e.Code != 0 {
		out["code"] = e.Code
	}
	return out
}

// encode produces the failure JSON (before it is embedded as a string in the reply), with
// Python's key order: class, module, message, tb, args, kwargs.
func (e *RemoteError) encode() ([]byte, error) {
	args := e.Args
	if args == nil {
		msg := e.Message
		if e.Module == MagnumExceptionModule {
			// MagnumException.__init__ applies `message % kwargs` even to a given message: a
			// literal % must arrive doubled to come out as written.
			msg = strings.ReplaceAll(msg, "%", "%%")
		}
		args = []any{msg}
	}
	tb := e.Traceback
	if tb == nil {
		tb = []string{}
	}
	kw := e.kwargs()
	buf := []byte(`{"class": `)
	buf = pyjson.AppendString(buf, e.Class)
	buf = append(buf, `, "module": `...)
	buf = pyjson.AppendString(buf, e.Module)
	buf = append(buf, `, "message": `...)
	buf = pyjson.AppendString(buf, e.Message)
	var err error
	for _, part := range []struct {
		key string
		val any
	}{{"tb", tb}, {"args", args}} {
		buf = append(buf, `, "`+part.key+`": `...)
		if buf, err = appendPyValue(buf, part.val); err != nil {
			return nil, fmt.Errorf("rpc: encode failure %s: %w", part.key, err)
		}
	}
	buf = append(buf, `, "kwargs": {`...)
	keys := make([]string, 0, len(kw))
	for k := range kw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = pyjson.AppendString(buf, k)
		buf = append(buf, ": "...)
		if buf, err = appendPyValue(buf, kw[k]); err != nil {
			return nil, fmt.Errorf("rpc: encode failure kwarg %s: %w", k, err)
		}
	}
	return append(buf, "}}"...), nil
}

func appendPyValue(buf []byte, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return pyjson.AppendValue(buf, raw)
}

func decodeFailure(data []byte) (*RemoteError, error) {
	var f struct {
		Class   string         `json:"class"`
		Module  string         `json:"module"`
		Message string         `json:"message"`
		TB      []string       `json:"tb"`
		Args    []any          `json:"args"`
		Kwargs  map[string]any `json:"kwargs"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, errors.New("malformed reply: failure is not a remote exception object")
	}
	e := &RemoteError{Module: f.Module, Class: f.Class, Message: f.Message, Args: f.Args, Traceback: f.TB}
	if len(f.Kwargs) > 0 {
		e.Kwargs = map[string]any{}
		for k, v := range f.Kwargs {
			if k == "code" {
				if n, ok := v.(float64); ok && n == math.Trunc(n) && math.Abs(n) < 1e9 {
					e.Code = int(n)
					continue
				}
			}
			e.Kwargs[k] = v
		}
	}
	return e, nil
}

// failureFor turns a handler error into the remote exception sent to the caller. Errors that
// implement OsloFailure choose their class and message; anything else is reported as a
// MagnumException 500 with Magnum's generic message, so internal details (which may quote
// configuration or credentials) never travel back to the API user.
func failureFor(err error) *RemoteError {
	var re *RemoteError
	if errors.As(err, &re) {
		return re
	}
	var of OsloFailure
	if errors.As(err, &of) {
		module, class, kwargs := of.OsloFailure()
		msg := err.Error()
		if m, ok := of.(interface{ OsloMessage() string }); ok {
			msg = m.OsloMessage()
		}
		r := &RemoteError{Module: module, Class: class, Message: msg}
		if len(kwargs) > 0 {
			r.Kwargs = map[string]any{}
			for k, v := range kwargs {
				if k == "code" {
					if n, ok := toInt(v); ok {
						r.Code = n
						continue
					}
				}
				r.Kwargs[k] = v
			}
		}
		return r
	}
	return NewMagnumError("MagnumException", 500, genericFailureMessage, nil)
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int32:
		return int(n), true
	case int64:
		return int(n), true
	case float64:
		if n == math.Trunc(n) {
			return int(n), true
		}
	}
	return 0, false
}

func noSuchMethod(method string) *RemoteError {
	msg := "Endpoint does not support RPC method " + method
	return &RemoteError{Module: dispatcherModule, Class: "NoSuchMethod", Message: msg}
}

func unsupportedVersion(version, method string) *RemoteError {
	msg := fmt.Sprintf("Endpoint does not support RPC version %s. Attempted method: %s", version, method)
	return &RemoteError{Module: dispatcherModule, Class: "UnsupportedVersion", Message: msg}
}

func expiredCall(method string) *RemoteError {
	msg := fmt.Sprintf("The call to %s expired before the conductor started it; it was not executed.", method)
	return &RemoteError{Module: messagingExcModule, Class: "MessagingTimeout", Message: msg}
}

func malformedRequest(reason string) *RemoteError {
	return NewMagnumError("MagnumException", 500, "Malformed RPC request: "+reason, nil)
}

// ---- error kinds a handler returns ----------------------------------------------------------

type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// Retry marks err as transient (database or Keystone unreachable, …): the server keeps the
// message unacknowledged and runs the handler again later with backoff, instead of reporting a
// failure. Retry(nil) is nil.
func Retry(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err}
}

// IsRetryable reports whether err was marked with Retry.
func IsRetryable(err error) bool {
	var r *retryableError
	return errors.As(err, &r)
}

// InvalidArgsError reports arguments a handler cannot use. A call gets an
// InvalidParameterValue (400) failure; a cast is parked for an operator to look at.
type InvalidArgsError struct{ Reason string }

// InvalidArgs builds an InvalidArgsError; the message goes back to the caller, so it must not
// quote secret argument values.
func InvalidArgs(format string, a ...any) error {
	return &InvalidArgsError{Reason: fmt.Sprintf(format, a...)}
}

func (e *InvalidArgsError) Error() string { return "invalid arguments: " + e.Reason }

// OsloFailure reports magnum.common.exception.InvalidParameterValue ("%(err)s", code 400).
func (e *InvalidArgsError) OsloFailure() (string, string, map[string]any) {
	return MagnumExceptionModule, "InvalidParameterValue", map[string]any{"err": e.Reason, "code": 400}
}

// OsloMessage is the message magnum formats for InvalidParameterValue: just the reason.
func (e *InvalidArgsError) OsloMessage() string { return e.Reason }
