package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/pyjson"
)

// Wire format, as oslo.messaging writes it. A request body is the envelope
//
//	{"oslo.version": "2.0", "oslo.message": "<inner message as a JSON string>"}
//
// whose inner message is {"method", "args", ["namespace"], ["version"], ["_msg_id", "_reply_q",
// "_timeout"], "_unique_id", "_context_<key>"…} in that order. A body that is an object without
// both envelope keys is an unenveloped 1.0 message and is used as is.

const (
	envelopeVersionKey = "oslo.version"
	envelopeMessageKey = "oslo.message"
	envelopeVersion    = "2.0"
	contextKeyPrefix   = "_context_"
)

// Message is a decoded RPC request (a cast, or a call when MsgID is set).
type Message struct {
	Method string
	// Args are the keyword arguments, raw (objects are decoded by internal/magnum).
	Args map[string]json.RawMessage
	// ArgsRaw is the args object exactly as received (key order included); when set, encoding
	// uses it instead of Args so that a re-encoded message is byte-identical.
	ArgsRaw json.RawMessage
	// Namespace and Version are the optional target fields (Magnum sets neither).
	Namespace, Version string
	HasNamespace       bool
	HasVersion         bool

	UniqueID string // _unique_id: duplicate suppression
	MsgID    string // _msg_id: set only on calls
	ReplyQ   string // _reply_q: the caller's reply queue (calls)
	// Timeout is _timeout, the call-monitor timeout in seconds; nil when null (always, for Magnum).
	Timeout *float64

	Context *Context

	// Envelope is "2.0", or "1.0" for an unenveloped body.
	Envelope string
	// Extra keeps unknown top-level keys of the inner message, in order.
	Extra []member
}

// IsCall reports whether the sender waits for a reply.
func (m *Message) IsCall() bool { return m.MsgID != "" }

// DecodeError describes a body that is not a usable RPC request. Partial holds what could be
// read (notably MsgID and ReplyQ, so that a call can still get a failure reply); it may be nil.
type DecodeError struct {
	Reason  string
	Partial *Message
}

func (e *DecodeError) Error() string { return "malformed RPC message: " + e.Reason }

func decodeErr(partial *Message, format string, a ...any) *DecodeError {
	return &DecodeError{Reason: fmt.Sprintf(format, a...), Partial: partial}
}

// unwrapEnvelope returns the members of the inner message and the envelope version. Each byte
// is validated once, by the pass that splits it: the body, then the inner message (unquoted by
// hand). json.Valid runs only on a refused input, to name what is wrong with it.
func unwrapEnvelope(body []byte) ([]member, string, error) {
	members, err := splitObject(body)
	if err != nil {
		if notAnObject(body, err) {
			return nil, "", errors.New("body is not a JSON object")
		}
		return nil, "", errors.New("body is not valid JSON")
	}
	var version, message json.RawMessage
	for _, m := range members {
		switch m.Key {
		case envelopeVersionKey:
			version = m.Value
		case envelopeMessageKey:
			message = m.Value
		}
	}
	if version == nil || message == nil {
		return members, "1.0", nil // unenveloped 1.0 message
	}
	v, ok := unquoteJSONString(version)
	if !ok {
		return nil, "", errors.New("oslo.version is not a string")
	}
	if !envelopeCompatible(string(v)) {
		return nil, "", fmt.Errorf("unsupported envelope version %q", v)
	}
	inner, ok := unquoteJSONString(message)
	if !ok {
		return nil, "", errors.New("oslo.message is not a JSON string")
	}
	if members, err = splitObject(inner); err != nil {
		if notAnObject(inner, err) {
			return nil, "", errors.New("oslo.message is not a JSON object")
		}
		return nil, "", errors.New("oslo.message is not valid JSON")
	}
	return members, string(v), nil
}

// envelopeCompatible mirrors oslo's version_is_compatible("2.0", v): same major version and a
// minor (and revision) no newer than ours.
func envelopeCompatible(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return false
	}
	nums := make([]int, 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return false
		}
		nums[i] = n
	}
	return nums[0] == 2 && nums[1] == 0 && nums[2] == 0
}

// DecodeMessage parses a request body (envelope 2.0, or 1.0 fallback).
func DecodeMessage(body []byte) (*Message, error) {
	members, version, err := unwrapEnvelope(body)
	if err != nil {
		return nil, decodeErr(nil, "%v", err)
	}
	m := &Message{Envelope: version, Context: &Context{}}
	var problems []string
	var methodRaw, argsRaw json.RawMessage
	for _, mem := range members {
		switch {
		case mem.Key == "method":
			methodRaw = mem.Value
		case mem.Key == "args":
			argsRaw = mem.Value
		case mem.Key == "namespace":
			m.HasNamespace = true
			if !isNull(mem.Value) && !decodeString(mem.Value, &m.Namespace) {
				problems = append(problems, "namespace is not a string")
			}
		case mem.Key == "version":
			m.HasVersion = true
			if !isNull(mem.Value) && !decodeString(mem.Value, &m.Version) {
				problems = append(problems, "version is not a string")
			}
		case mem.Key == "_unique_id":
			if !isNull(mem.Value) && !decodeString(mem.Value, &m.UniqueID) {
				problems = append(problems, "_unique_id is not a string")
			}
		case mem.Key == "_msg_id":
			if !isNull(mem.Value) && !decodeString(mem.Value, &m.MsgID) {
				problems = append(problems, "_msg_id is not a string")
			}
		case mem.Key == "_reply_q":
			if !isNull(mem.Value) && !decodeString(mem.Value, &m.ReplyQ) {
				problems = append(problems, "_reply_q is not a string")
			}
		case mem.Key == "_timeout":
			if !isNull(mem.Value) {
				var t float64
				if json.Unmarshal(mem.Value, &t) != nil {
					problems = append(problems, "_timeout is not a number")
				} else {
					m.Timeout = &t
				}
			}
		case strings.HasPrefix(mem.Key, contextKeyPrefix):
			m.Context.setContextKey(strings.TrimPrefix(mem.Key, contextKeyPrefix), mem.Value)
		default:
			m.Extra = append(m.Extra, mem)
		}
	}
	m.Context.finishDecode()
	if m.MsgID != "" && m.ReplyQ == "" {
		problems = append(problems, "call without _reply_q")
	}
	if methodRaw == nil || isNull(methodRaw) {
		problems = append(problems, "no method")
	} else if !decodeString(methodRaw, &m.Method) {
		problems = append(problems, "method is not a string")
	} else if m.Method == "" {
		problems = append(problems, "empty method")
	}
	// oslo uses message.get('args', {}): a missing args is an empty one.
	if argsRaw == nil {
		m.Args = map[string]json.RawMessage{}
	} else {
		argMembers, err := splitValidObject(argsRaw)
		if err != nil {
			problems = append(problems, "args is not a JSON object")
		} else {
			m.ArgsRaw = argsRaw
			m.Args = make(map[string]json.RawMessage, len(argMembers))
			for _, a := range argMembers {
				m.Args[a.Key] = a.Value
			}
		}
	}
	if len(problems) > 0 {
		return nil, &DecodeError{Reason: strings.Join(problems, "; "), Partial: m}
	}
	return m, nil
}

// decodeString sets *dst to the JSON string literal raw, as json.Unmarshal would, without its
// reflection (a decode sets half a dozen of them); it reports false if raw is not a string.
func decodeString(raw []byte, dst *string) bool {
	b, ok := unquoteJSONString(bytes.TrimSpace(raw))
	if ok {
		*dst = string(b)
	}
	return ok
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// EncodeMessage produces the request body exactly as oslo.messaging would: envelope 2.0, Python
// json.dumps formatting, keys in oslo's order. A call (MsgID set) carries "_timeout": null
// unless Timeout is set.
func EncodeMessage(m *Message) ([]byte, error) {
	inner, err := encodeInner(m)
	if err != nil {
		return nil, err
	}
	return wrapEnvelope(inner), nil
}

func encodeInner(m *Message) ([]byte, error) {
	if m.Method == "" {
		return nil, errors.New("rpc: message has no method")
	}
	if m.MsgID != "" && m.ReplyQ == "" {
		return nil, errors.New("rpc: call without reply queue")
	}
	buf := make([]byte, 0, 4096)
	buf = append(buf, `{"method": `...)
	buf = pyjson.AppendString(buf, m.Method)
	buf = append(buf, `, "args": `...)
	var err error
	switch {
	case m.ArgsRaw != nil:
		if _, e := splitObject(m.ArgsRaw); e != nil {
			return nil, errors.New("rpc: args is not a JSON object")
		}
		buf, err = pyjson.AppendValue(buf, m.ArgsRaw)
	default:
		buf, err = appendArgsMap(buf, m.Args)
	}
	if err != nil {
		return nil, fmt.Errorf("rpc: encode args: %w", err)
	}
	if m.HasNamespace || m.Namespace != "" {
		buf = append(buf, `, "namespace": `...)
		buf = pyjson.AppendString(buf, m.Namespace)
	}
	if m.HasVersion || m.Version != "" {
		buf = append(buf, `, "version": `...)
		buf = pyjson.AppendString(buf, m.Version)
	}
	// A call always carries all three keys (oslo's order); a cast carries none, unless the
	// decoded message had them (kept so that re-encoding does not lose anything).
	if m.MsgID != "" {
		buf = append(buf, `, "_msg_id": `...)
		buf = pyjson.AppendString(buf, m.MsgID)
	}
	if m.MsgID != "" || m.ReplyQ != "" {
		buf = append(buf, `, "_reply_q": `...)
		buf = pyjson.AppendString(buf, m.ReplyQ)
	}
	if m.MsgID != "" || m.Timeout != nil {
		buf = append(buf, `, "_timeout": `...)
		if m.Timeout == nil {
			buf = append(buf, "null"...)
		} else {
			buf = strconv.AppendFloat(buf, *m.Timeout, 'g', -1, 64)
		}
	}
	if m.UniqueID != "" {
		buf = append(buf, `, "_unique_id": `...)
		buf = pyjson.AppendString(buf, m.UniqueID)
	}
	for _, c := range m.Context.members() {
		buf = append(buf, ", "...)
		buf = pyjson.AppendString(buf, contextKeyPrefix+c.Key)
		buf = append(buf, ": "...)
		if buf, err = pyjson.AppendValue(buf, c.Value); err != nil {
			return nil, fmt.Errorf("rpc: encode context key %s: %w", c.Key, err)
		}
	}
	for _, e := range m.Extra {
		buf = append(buf, ", "...)
		buf = pyjson.AppendString(buf, e.Key)
		buf = append(buf, ": "...)
		if buf, err = pyjson.AppendValue(buf, e.Value); err != nil {
			return nil, fmt.Errorf("rpc: encode key %s: %w", e.Key, err)
		}
	}
	return append(buf, '}'), nil
}

// appendArgsMap writes an args map with sorted keys (a Go map has no order).
func appendArgsMap(buf []byte, args map[string]json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = pyjson.AppendString(buf, k)
		buf = append(buf, ": "...)
		v := args[k]
		if v == nil {
			v = json.RawMessage("null")
		}
		var err error
		if buf, err = pyjson.AppendValue(buf, v); err != nil {
			return nil, fmt.Errorf("arg %s: %w", k, err)
		}
	}
	return append(buf, '}'), nil
}

// wrapEnvelope builds {"oslo.version": "2.0", "oslo.message": "<inner>"} as kombu's json
// serializer writes it.
func wrapEnvelope(inner []byte) []byte {
	out := make([]byte, 0, len(inner)+len(inner)/4+48)
	out = append(out, `{"oslo.version": "2.0", "oslo.message": `...)
	out = pyjson.AppendString(out, string(inner))
	return append(out, '}')
}

// ---- replies --------------------------------------------------------------------------------

// Reply is the inner message of a reply.
type Reply struct {
	// Result is the raw JSON result (null when absent).
	Result json.RawMessage
	// Failure is the remote exception, nil on success.
	Failure *RemoteError
	// Ending is true on the final reply; false marks a call-monitor heartbeat.
	Ending   bool
	MsgID    string
	UniqueID string
	// HasResult distinguishes an absent "result" key (old two-message replies) from null.
	HasResult bool
}

// EncodeReply builds a reply body: {"result", "failure", "ending", "_msg_id", "_unique_id"},
// where failure is itself a JSON-encoded string.
func EncodeReply(r *Reply) ([]byte, error) {
	buf := make([]byte, 0, 256+len(r.Result))
	buf = append(buf, `{"result": `...)
	if len(r.Result) == 0 {
		buf = append(buf, "null"...)
	} else {
		var err error
		if buf, err = pyjson.AppendValue(buf, r.Result); err != nil {
			return nil, fmt.Errorf("rpc: encode result: %w", err)
		}
	}
	buf = append(buf, `, "failure": `...)
	if r.Failure == nil {
		buf = append(buf, "null"...)
	} else {
		f, err := r.Failure.encode()
		if err != nil {
			return nil, err
		}
		buf = pyjson.AppendString(buf, string(f))
	}
	if r.Ending {
		buf = append(buf, `, "ending": true`...)
	} else {
		buf = append(buf, `, "ending": false`...)
	}
	buf = append(buf, `, "_msg_id": `...)
	buf = pyjson.AppendString(buf, r.MsgID)
	buf = append(buf, `, "_unique_id": `...)
	buf = pyjson.AppendString(buf, r.UniqueID)
	buf = append(buf, '}')
	return wrapEnvelope(buf), nil
}

// DecodeReply parses a reply body.
func DecodeReply(body []byte) (*Reply, error) {
	members, _, err := unwrapEnvelope(body)
	if err != nil {
		return nil, fmt.Errorf("malformed reply: %w", err)
	}
	r := &Reply{}
	for _, m := range members {
		switch m.Key {
		case "result":
			r.HasResult = true
			r.Result = m.Value
		case "failure":
			if isNull(m.Value) {
				continue
			}
			var s string
			if err := json.Unmarshal(m.Value, &s); err != nil {
				return nil, errors.New("malformed reply: failure is not a string")
			}
			f, err := decodeFailure([]byte(s))
			if err != nil {
				return nil, err
			}
			r.Failure = f
		case "ending":
			if json.Unmarshal(m.Value, &r.Ending) != nil {
				return nil, errors.New("malformed reply: ending is not a boolean")
			}
		case "_msg_id":
			if json.Unmarshal(m.Value, &r.MsgID) != nil {
				return nil, errors.New("malformed reply: _msg_id is not a string")
			}
		case "_unique_id":
			_ = json.Unmarshal(m.Value, &r.UniqueID)
		}
	}
	if r.MsgID == "" {
		return nil, errors.New("malformed reply: no _msg_id")
	}
	return r, nil
}
