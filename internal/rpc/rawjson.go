package rpc

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// This file reads raw JSON without decoding it into Go values: the codec splits an object into
// its members in wire order and unquotes single strings, so that what it passes on or
// re-encodes keeps the bytes (and key order) the sender wrote. Writing is in package pyjson.

// errInvalidJSON is returned for input that is not a single valid JSON value.
var errInvalidJSON = errors.New("invalid JSON")

// rawScanner is a position in raw JSON.
type rawScanner struct {
	src []byte
	pos int
}

func (s *rawScanner) skipSpace() {
	for s.pos < len(s.src) && isSpace(s.src[s.pos]) {
		s.pos++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isDelimiter tells where a literal or number ends.
func isDelimiter(c byte) bool { return isSpace(c) || c == ',' || c == '}' || c == ']' || c == ':' }

// parseHex4 decodes the four hex digits of a \u escape.
func parseHex4(b []byte) (uint16, bool) {
	var u [2]byte
	if len(b) != 4 {
		return 0, false
	}
	if _, err := hex.Decode(u[:], b); err != nil {
		return 0, false
	}
	return uint16(u[0])<<8 | uint16(u[1]), true
}

// member is one key/value pair of a JSON object, in wire order.
type member struct {
	Key   string
	Value json.RawMessage
}

// splitObject returns the members of a JSON object in order, and refuses (with errInvalidJSON)
// anything json.Valid would refuse: the one pass over the bytes both validates and splits. Like
// Python's json.loads, a repeated key keeps its first position and its last value.
func splitObject(raw []byte) ([]member, error) { return split(raw, true) }

// splitValidObject is splitObject for bytes already validated as part of an enclosing value.
func splitValidObject(raw []byte) ([]member, error) { return split(raw, false) }

func split(raw []byte, validate bool) ([]member, error) {
	s := rawScanner{src: raw}
	s.skipSpace()
	if s.pos >= len(s.src) || s.src[s.pos] != '{' {
		return nil, errNotObject
	}
	s.pos++
	var out []member
	s.skipSpace()
	if s.pos < len(s.src) && s.src[s.pos] == '}' {
		s.pos++
		return out, s.end(validate)
	}
	skipString, skipValue := s.skipString, s.skipValue
	if validate {
		skipString, skipValue = s.scanString, s.scanValue
	}
	for {
		s.skipSpace()
		keyStart := s.pos
		if err := skipString(); err != nil {
			return nil, err
		}
		key, ok := decodeKey(s.src[keyStart:s.pos])
		if !ok {
			return nil, errInvalidJSON
		}
		s.skipSpace()
		if s.pos >= len(s.src) || s.src[s.pos] != ':' {
			return nil, errInvalidJSON
		}
		s.pos++
		s.skipSpace()
		valStart := s.pos
		if err := skipValue(); err != nil {
			return nil, err
		}
		val := json.RawMessage(s.src[valStart:s.pos])
		if i := memberIndex(out, key); i >= 0 {
			out[i].Value = val
		} else {
			out = append(out, member{Key: key, Value: val})
		}
		s.skipSpace()
		if s.pos >= len(s.src) {
			return nil, errInvalidJSON
		}
		switch s.src[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return out, s.end(validate)
		default:
			return nil, errInvalidJSON
		}
	}
}

// errNotObject is splitObject's answer for input that does not start with '{' (it may still be
// valid JSON: callers that report the difference ask json.Valid on this rare path).
var errNotObject = errors.New("not a JSON object")

// notAnObject tells, for an input splitObject refused with err, a valid JSON value that is not an
// object from invalid JSON (json.Valid runs only on this rare path).
func notAnObject(raw []byte, err error) bool {
	return errors.Is(err, errNotObject) && json.Valid(raw)
}

// end checks, when validating, that only white space follows the top-level value.
func (s *rawScanner) end(validate bool) error {
	if !validate {
		return nil
	}
	s.skipSpace()
	if s.pos != len(s.src) {
		return errInvalidJSON
	}
	return nil
}

// memberIndex finds key among the members so far: a message has a few dozen keys at most, where
// a linear scan beats a map.
func memberIndex(members []member, key string) int {
	for i := range members {
		if members[i].Key == key {
			return i
		}
	}
	return -1
}

func (s *rawScanner) skipString() error {
	if s.pos >= len(s.src) || s.src[s.pos] != '"' {
		return errInvalidJSON
	}
	for s.pos++; s.pos < len(s.src); s.pos++ {
		switch s.src[s.pos] {
		case '\\':
			s.pos++
		case '"':
			s.pos++
			return nil
		}
	}
	return errInvalidJSON
}

// skipValue advances over one value without copying or checking it (iteratively, so deep
// nesting cannot exhaust the stack). The input has been validated already.
func (s *rawScanner) skipValue() error {
	depth := 0
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case '"':
			if err := s.skipString(); err != nil {
				return err
			}
		case '{', '[':
			depth++
			s.pos++
			continue
		case '}', ']':
			if depth == 0 {
				return errInvalidJSON
			}
			depth--
			s.pos++
		default:
			if depth > 0 {
				s.pos++
				continue
			}
			// A literal or number: it ends at the next delimiter or space.
			start := s.pos
			for s.pos < len(s.src) && !isDelimiter(s.src[s.pos]) {
				s.pos++
			}
			if s.pos == start {
				return errInvalidJSON
			}
			return nil
		}
		if depth == 0 {
			return nil
		}
	}
	return errInvalidJSON
}

// scanValue advances over one value and checks the grammar json.Valid checks (like
// encoding/json it does not check UTF-8). Open containers are kept on a stack, not the Go
// stack, so deep nesting cannot exhaust it.
func (s *rawScanner) scanValue() error {
	var open []byte // '{' or '[' of each container entered
	for {
		s.skipSpace()
		if s.pos >= len(s.src) {
			return errInvalidJSON
		}
		var err error
		switch c := s.src[s.pos]; {
		case c == '{' || c == '[':
			s.pos++
			s.skipSpace()
			if s.pos < len(s.src) && s.src[s.pos] == c+2 { // '}' or ']'
				s.pos++
				break
			}
			open = append(open, c)
			if c == '{' {
				err = s.scanKey()
			}
			if err != nil {
				return err
			}
			continue // to the first element
		case c == '"':
			err = s.scanString()
		case c == '-' || (c >= '0' && c <= '9'):
			err = s.scanNumber()
		case c == 't':
			err = s.scanLiteral("true")
		case c == 'f':
			err = s.scanLiteral("false")
		case c == 'n':
			err = s.scanLiteral("null")
		default:
			return errInvalidJSON
		}
		if err != nil {
			return err
		}
		// A value ended: close the containers it ends, or go on to the next element.
		for next := false; !next; {
			if len(open) == 0 {
				return nil
			}
			s.skipSpace()
			if s.pos >= len(s.src) {
				return errInvalidJSON
			}
			top, c := open[len(open)-1], s.src[s.pos]
			s.pos++
			switch {
			case c == ',':
				if top == '{' {
					if err := s.scanKey(); err != nil {
						return err
					}
				}
				next = true
			case c == top+2:
				open = open[:len(open)-1]
			default:
				return errInvalidJSON
			}
		}
	}
}

// scanKey checks an object key and the colon after it.
func (s *rawScanner) scanKey() error {
	s.skipSpace()
	if err := s.scanString(); err != nil {
		return err
	}
	s.skipSpace()
	if s.pos >= len(s.src) || s.src[s.pos] != ':' {
		return errInvalidJSON
	}
	s.pos++
	return nil
}

// scanString checks a string literal: no raw control characters, only JSON's escapes.
func (s *rawScanner) scanString() error {
	if s.pos >= len(s.src) || s.src[s.pos] != '"' {
		return errInvalidJSON
	}
	for s.pos++; s.pos < len(s.src); s.pos++ {
		switch c := s.src[s.pos]; {
		case c == '"':
			s.pos++
			return nil
		case c < 0x20:
			return errInvalidJSON
		case c == '\\':
			if s.pos+1 >= len(s.src) {
				return errInvalidJSON
			}
			s.pos++
			switch s.src[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.pos+5 > len(s.src) {
					return errInvalidJSON
				}
				if _, ok := parseHex4(s.src[s.pos+1 : s.pos+5]); !ok {
					return errInvalidJSON
				}
				s.pos += 4
			default:
				return errInvalidJSON
			}
		}
	}
	return errInvalidJSON
}

// scanNumber checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *rawScanner) scanNumber() error {
	if s.src[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(s.src) && s.src[s.pos] == '0':
		s.pos++
	case !s.digits():
		return errInvalidJSON
	}
	if s.pos < len(s.src) && s.src[s.pos] == '.' {
		s.pos++
		if !s.digits() {
			return errInvalidJSON
		}
	}
	if s.pos < len(s.src) && (s.src[s.pos] == 'e' || s.src[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.src) && (s.src[s.pos] == '+' || s.src[s.pos] == '-') {
			s.pos++
		}
		if !s.digits() {
			return errInvalidJSON
		}
	}
	return nil
}

// digits advances over [0-9]+ and reports whether there was one.
func (s *rawScanner) digits() bool {
	start := s.pos
	for s.pos < len(s.src) && s.src[s.pos] >= '0' && s.src[s.pos] <= '9' {
		s.pos++
	}
	return s.pos > start
}

func (s *rawScanner) scanLiteral(lit string) error {
	if !bytes.HasPrefix(s.src[s.pos:], []byte(lit)) {
		return errInvalidJSON
	}
	s.pos += len(lit)
	return nil
}

// unquoteJSONString decodes a JSON string literal (already validated) exactly like
// encoding/json: invalid UTF-8 and unpaired surrogates become U+FFFD.
func unquoteJSONString(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return s, true
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			if c < utf8.RuneSelf {
				// Copy the run of plain ASCII up to the next escape in one append.
				j := i + 1
				for j < len(s) && s[j] != '\\' && s[j] < utf8.RuneSelf {
					j++
				}
				out = append(out, s[i:j]...)
				i = j
				continue
			}
			r, size := utf8.DecodeRune(s[i:])
			out = utf8.AppendRune(out, r) // RuneError for invalid bytes
			i += size
			continue
		}
		if i+1 >= len(s) {
			return nil, false
		}
		e := s[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+4 > len(s) {
				return nil, false
			}
			u, ok := parseHex4(s[i : i+4])
			if !ok {
				return nil, false
			}
			i += 4
			r := rune(u)
			if utf16.IsSurrogate(r) {
				r = utf8.RuneError
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if u2, ok := parseHex4(s[i+2 : i+6]); ok {
						if dec := utf16.DecodeRune(rune(u), rune(u2)); dec != utf8.RuneError {
							r = dec
							i += 6
						}
					}
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return out, true
}

// decodeKey decodes an object key, avoiding encoding/json for the common escape-free case.
func decodeKey(raw []byte) (string, bool) {
	b, ok := unquoteJSONString(raw)
	return string(b), ok
}
