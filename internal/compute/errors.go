package compute

import (
	"errors"
	"net/http"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/osclient"
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
	return osclient.Answer{Status: e.StatusCode, Message: e.Message}.Describe("compute", e.Op, e.Group)
}

// statusOf says which HTTP status each status sentinel stands for.
var statusOf = osclient.Sentinels{ErrNotFound: http.StatusNotFound, ErrForbidden: http.StatusForbidden, ErrUnauthorized: http.StatusUnauthorized}

// Is maps the HTTP status (and the policy check) to the sentinels above.
func (e *Error) Is(target error) bool {
	if target == ErrPolicyMismatch {
		return e.mismatch
	}
	return statusOf.Match(e.StatusCode, target)
}

func (e *Error) Unwrap() error { return e.Err }

// newError turns a gophercloud or transport error into an *Error; scrub lists secret values that
// took part in the request, replaced wherever a service echoes them back.
func newError(op, group string, err error, scrub ...string) error {
	if err == nil {
		return nil
	}
	a := osclient.Classify(err, scrub...)
	return &Error{Op: op, Group: group, Err: err, StatusCode: a.Status, Message: a.Message}
}
