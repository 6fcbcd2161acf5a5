// Package pyjson writes JSON the way Python's json.dumps does with its defaults, which is what
// oslo.messaging (oslo_serialization.jsonutils.dumps) and kombu put on the wire and what
// Magnum's JSONEncodedDict/JSONEncodedList columns hold:
//
//   - separators ", " and ": " (no newlines, no indentation);
//   - ensure_ascii=True: every character outside printable ASCII (0x20..0x7e) is written as a
//     lowercase \uXXXX escape (a surrogate pair above U+FFFF), and \b \f \n \r \t \" \\ use
//     their short forms; "/" is not escaped;
//   - object keys in their original order, numbers exactly as written.
//
// Working on raw JSON (not on decoded Go values) is what keeps the key order of the original
// and makes the output byte-identical to what the Python services write for the same value.
package pyjson

import (
	"encoding/json"
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrInvalid is returned for input that is not a single valid JSON value.
var ErrInvalid = errors.New("invalid JSON")

// Reencode returns raw (any valid JSON) re-encoded in Python's json.dumps style.
func Reencode(raw []byte) ([]byte, error) {
	if !json.Valid(raw) {
		return nil, ErrInvalid
	}
	return AppendValue(make([]byte, 0, len(raw)+len(raw)/8), raw)
}

// AppendValue appends the Python-style form of raw, which must already be valid JSON.
func AppendValue(dst, raw []byte) ([]byte, error) {
	s := scanner{src: raw}
	s.skipSpace()
	out, err := s.value(dst)
	if err != nil {
		return nil, err
	}
	s.skipSpace()
	if s.pos != len(s.src) {
		return nil, ErrInvalid
	}
	return out, nil
}

// AppendString appends s as a Python ensure_ascii JSON string literal.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			dst = appendASCII(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		// Invalid UTF-8 decodes to U+FFFD, as Go's encoding/json does; Python strings cannot
		// hold undecodable bytes at all, so no valid input takes this path differently.
		dst = appendRune(dst, r)
		i += size
	}
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// shortEscape holds the characters json.dumps writes as a backslash and a letter.
var shortEscape = [utf8.RuneSelf]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// appendASCII appends one ASCII character, escaped as json.dumps escapes it.
func appendASCII(dst []byte, c byte) []byte {
	if e := shortEscape[c]; e != 0 {
		return append(dst, '\\', e)
	}
	if c < 0x20 || c == 0x7f {
		return appendUnicodeEscape(dst, uint16(c))
	}
	return append(dst, c)
}

func appendUnicodeEscape(dst []byte, u uint16) []byte {
	return append(dst, '\\', 'u', hexDigits[u>>12&0xf], hexDigits[u>>8&0xf], hexDigits[u>>4&0xf], hexDigits[u&0xf])
}

func appendRune(dst []byte, r rune) []byte {
	if r < utf8.RuneSelf {
		return appendASCII(dst, byte(r))
	}
	if r > 0xffff {
		r1, r2 := utf16.EncodeRune(r)
		dst = appendUnicodeEscape(dst, uint16(r1))
		return appendUnicodeEscape(dst, uint16(r2))
	}
	return appendUnicodeEscape(dst, uint16(r))
}

// scanner walks valid JSON and writes it back in Python style. It relies on json.Valid
// having accepted the input, but still refuses to run off the end of malformed input.
type scanner struct {
	src []byte
	pos int
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value(dst []byte) ([]byte, error) {
	if s.pos >= len(s.src) {
		return nil, ErrInvalid
	}
	switch c := s.src[s.pos]; {
	case c == '{':
		return s.object(dst)
	case c == '[':
		return s.array(dst)
	case c == '"':
		return s.str(dst)
	default:
		// Literal (true/false/null) or number: copy verbatim up to the next delimiter.
		start := s.pos
		for s.pos < len(s.src) && !isDelimiter(s.src[s.pos]) {
			s.pos++
		}
		if start == s.pos {
			return nil, ErrInvalid
		}
		return append(dst, s.src[start:s.pos]...), nil
	}
}

func (s *scanner) object(dst []byte) ([]byte, error) { return s.container(dst, '{', '}', s.member) }

func (s *scanner) array(dst []byte) ([]byte, error) { return s.container(dst, '[', ']', s.value) }

// container writes an object or an array: open and closing are its brackets, element writes
// one member or item; ", " goes between them.
func (s *scanner) container(dst []byte, open, closing byte, element func([]byte) ([]byte, error)) ([]byte, error) {
	s.pos++ // open
	dst = append(dst, open)
	s.skipSpace()
	if s.pos < len(s.src) && s.src[s.pos] == closing {
		s.pos++
		return append(dst, closing), nil
	}
	for first := true; ; first = false {
		if !first {
			dst = append(dst, ',', ' ')
		}
		s.skipSpace()
		var err error
		if dst, err = element(dst); err != nil {
			return nil, err
		}
		s.skipSpace()
		if s.pos >= len(s.src) {
			return nil, ErrInvalid
		}
		switch s.src[s.pos] {
		case ',':
			s.pos++
		case closing:
			s.pos++
			return append(dst, closing), nil
		default:
			return nil, ErrInvalid
		}
	}
}

// member writes one "key": value pair of an object.
func (s *scanner) member(dst []byte) ([]byte, error) {
	dst, err := s.str(dst)
	if err != nil {
		return nil, err
	}
	s.skipSpace()
	if s.pos >= len(s.src) || s.src[s.pos] != ':' {
		return nil, ErrInvalid
	}
	s.pos++
	dst = append(dst, ':', ' ')
	s.skipSpace()
	return s.value(dst)
}

// str re-escapes one string literal. Escapes in the input are decoded to UTF-16 code units
// and written the way Python would write that code unit, so lone surrogates (which Python
// accepts and re-emits) survive unchanged.
func (s *scanner) str(dst []byte) ([]byte, error) {
	if s.pos >= len(s.src) || s.src[s.pos] != '"' {
		return nil, ErrInvalid
	}
	s.pos++
	dst = append(dst, '"')
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == '"':
			s.pos++
			return append(dst, '"'), nil
		case c == '\\':
			if s.pos+1 >= len(s.src) {
				return nil, ErrInvalid
			}
			e := s.src[s.pos+1]
			s.pos += 2
			switch e {
			case '"', '\\', '/':
				dst = appendASCII(dst, e)
			case 'b', 'f', 'n', 'r', 't':
				dst = append(dst, '\\', e) // Python writes these short forms too
			case 'u':
				if s.pos+4 > len(s.src) {
					return nil, ErrInvalid
				}
				u, ok := parseHex4(s.src[s.pos : s.pos+4])
				if !ok {
					return nil, ErrInvalid
				}
				s.pos += 4
				if u < utf8.RuneSelf {
					dst = appendASCII(dst, byte(u))
				} else {
					dst = appendUnicodeEscape(dst, u)
				}
			default:
				return nil, ErrInvalid
			}
		case c < utf8.RuneSelf:
			dst = appendASCII(dst, c)
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.src[s.pos:])
			dst = appendRune(dst, r)
			s.pos += size
		}
	}
	return nil, ErrInvalid
}

func parseHex4(b []byte) (uint16, bool) {
	var u uint16
	for _, c := range b {
		u <<= 4
		switch {
		case c >= '0' && c <= '9':
			u |= uint16(c - '0')
		case c >= 'a' && c <= 'f':
			u |= uint16(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			u |= uint16(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return u, true
}

func isDelimiter(c byte) bool {
	switch c {
	case ',', '}', ']', ':', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}
