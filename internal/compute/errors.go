package compute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
)

// Sentinels to test with errors.Is; they match an *Error, also inside an errors.Join.
var (
	// ErrNotFound: Keystone or Nova answered 404 (when authenticating: the credential is gone).
	ErrNotFound = errors.New("not found")
	// ErrForbidden: 403, e.g. Nova's "Quota exceeded, too many server groups." or a policy refusal.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthorized: 401, the credential's secret is wrong, it expired or its owner lost access.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrPolicyMismatch: a server group of that name exists with another policy. Nova cannot
	// change a group's policy, and deleting it would orphan the machines in it: a person decides.
	ErrPolicyMismatch = errors.New("server group exists with another policy")
)

const redacted = "[REDACTED]"

// Error is a failed Keystone or Nova operation. Its message names the operation, the server group
// and the service's own explanation, and never holds a token or secret.
type Error struct {
	// Op is what was attempted, e.g. "create server group".
	Op string
	// Group is the server group concerned, if any (its name, and id when known).
	Group string
	// StatusCode is the HTTP status, 0 when the service did not answer or nothing was sent.
	StatusCode int
	// Message is the service's error message (or the transport error) with secrets removed.
	Message string
	// Err is the underlying error, for errors.As; it is never printed by Error.
	Err error

	mismatch bool
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("compute: ")
	b.WriteString(e.Op)
	if e.Group != "" {
		b.WriteString(" ")
		b.WriteString(e.Group)
	}
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Is maps the HTTP status (and the policy check) to the sentinels above.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrPolicyMismatch:
		return e.mismatch
	}
	return false
}

func (e *Error) Unwrap() error { return e.Err }

// newError turns a gophercloud or transport error into an *Error; scrub lists secret values that
// took part in the request, replaced wherever a service echoes them back.
func newError(op, group string, err error, scrub ...string) error {
	if err == nil {
		return nil
	}
	e := &Error{Op: op, Group: group, Err: err}
	var code gophercloud.ErrUnexpectedResponseCode
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		e.Message = err.Error()
	case errors.As(err, &code):
		e.StatusCode = code.Actual
		e.Message = serviceMessage(code.Body)
	default:
		// Transport errors (connection refused, TLS, DNS) and decoding errors carry the URL at
		// most; never a header or a body.
		e.Message = err.Error()
	}
	for _, s := range scrub {
		if s != "" {
			e.Message = strings.ReplaceAll(e.Message, s, redacted)
		}
	}
	return e
}

// serviceMessage extracts the message of Nova's {"<faultName>": {"code": …, "message": …}} or
// Keystone's {"error": {"message": …}}; other bodies (an HTML page from a proxy) are summarised.
func serviceMessage(body []byte) string {
	var parsed map[string]json.RawMessage
	if json.Unmarshal(body, &parsed) == nil && len(parsed) == 1 {
		for _, inner := range parsed {
			var fault struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(inner, &fault) == nil && fault.Message != "" {
				return strings.TrimSpace(fault.Message)
			}
		}
	}
	text := strings.TrimSpace(string(body))
	if strings.HasPrefix(text, "<") {
		lower := strings.ToLower(text)
		if start := strings.Index(lower, "<title>"); start >= 0 {
			if end := strings.Index(lower[start:], "</title>"); end >= 0 {
				return "non-JSON answer: " + strings.TrimSpace(text[start+len("<title>"):start+end])
			}
		}
		return fmt.Sprintf("non-JSON answer (%d bytes of HTML)", len(body))
	}
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	const maxLen = 200
	if len(text) > maxLen {
		text = text[:maxLen] + "…"
	}
	return text
}
