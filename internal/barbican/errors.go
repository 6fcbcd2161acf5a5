package barbican

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gophercloud/gophercloud/v2"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/certs"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/osclient"
)

// Service is how errors and logs name the key manager.
const Service = "Barbican"

// Error is a failed Barbican operation. Its message names Barbican, the operation and the ref
// (container or secret href) and carries Barbican's own explanation; never a payload.
type Error struct {
	// Op is what was attempted, e.g. "read certificate container".
	Op string
	// Ref is the container or secret concerned, as stored in the cluster row when known.
	Ref string
	// Status is Barbican's HTTP status, 0 when it did not answer.
	Status int
	// Message is Barbican's explanation, or the transport error.
	Message string
	// Reason is the failure in a few words fit for a tenant: the HTTP status text, "no answer",
	// or what was wrong.
	Reason string
	// Err is the underlying error, for errors.As.
	Err error
}

func (e *Error) Error() string {
	msg := osclient.Answer{Status: e.Status, Message: e.Message}.Describe(Service, e.Op, e.Ref)
	if e.Status == http.StatusForbidden {
		msg += " (refused by Barbican's policy: Magnum's service user needs a role that may manage secrets " +
			"and containers in its project, e.g. admin or creator)"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes a 404 match certs.ErrKeyPairNotFound: the container (or one of its secrets) is gone.
func (e *Error) Is(target error) bool {
	return target == certs.ErrKeyPairNotFound && e.Status == http.StatusNotFound
}

// Brief is the error without Barbican's message or any URL: what a tenant may read (the failing
// operation, the container's or secret's uuid and Reason).
func (e *Error) Brief() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if id := lastSegment(e.Ref); id != "" {
		b.WriteString(" " + id)
	}
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	return b.String()
}

// during names the operation and ref a failure to reach Barbican at all interrupted. The status is
// not carried over: the operation itself got no answer (a 404 from a misconfigured endpoint must not
// read as a container that is gone).
func during(err error, op, ref string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	msg := e.Op
	if e.Status != 0 {
		msg += fmt.Sprintf(": %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return &Error{Op: op, Ref: ref, Message: msg, Reason: e.Reason, Err: e.Err}
}

// IsError reports whether err is (or wraps) a Barbican failure.
func IsError(err error) bool {
	var be *Error
	return errors.As(err, &be)
}

// newError classifies a gophercloud or transport error; secrets are values of the request that
// must never appear in the message (payloads).
func newError(op, ref string, err error, secrets ...string) *Error {
	a := osclient.Classify(err, secrets...)
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		// Barbican's error body, {"code", "title", "description"}, is not one the shared
		// classifier knows.
		var doc struct {
			Description string `json:"description"`
		}
		if json.Unmarshal(code.Body, &doc) == nil && doc.Description != "" {
			a.Message = osclient.Scrub(strings.TrimSpace(doc.Description), secrets...)
		}
	}
	reason := "no answer"
	if a.Status != 0 {
		reason = http.StatusText(a.Status)
	}
	return &Error{Op: op, Ref: ref, Status: a.Status, Message: a.Message, Reason: reason, Err: err}
}
