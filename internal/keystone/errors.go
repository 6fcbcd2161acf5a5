package keystone

import (
	"errors"
	"net/http"
	"strings"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/osclient"
)

// Sentinels for the Keystone answers a caller has to tell apart. Test with errors.Is; they match an
// *Error with the corresponding HTTP status, also inside an errors.Join.
var (
	// ErrNotFound: Keystone answered 404. On delete it means the credential is already gone
	// (deleted earlier, or removed by Keystone when its owner was deleted or lost the project role).
	ErrNotFound = errors.New("not found")
	// ErrForbidden: Keystone answered 403. On delete it means this identity may not delete the
	// credential (not the owner and not admin, or authenticated as a restricted application
	// credential); for a non-owner, non-admin caller Keystone answers 403 even when the credential
	// does not exist.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthorized: Keystone answered 401: the token expired or was revoked, or the application
	// credential/password is wrong, expired or its owner lost access.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrConflict: Keystone answered 409 (a credential with that name exists for the user).
	ErrConflict = errors.New("conflict")
	// ErrUnassignedRole: Keystone answered 400 "Cannot create an application credential with
	// unassigned role": the roles it computed for the token at that moment lacked one the
	// credential asks for. For a token that lists the role (CreateClusterCredentials checks that
	// first) this is Keystone contradicting itself, seen under concurrent creates; it passes, so
	// it is worth retrying (CreateClusterCredentials does, with backoff).
	ErrUnassignedRole = errors.New("unassigned role")
	// ErrApplicationCredentialMethod: Keystone answered 403 "Using method 'application_credential'
	// is not allowed for managing additional application credentials": it took the request's token
	// for an application credential's. For a token issued otherwise (Identity.Methods) this is
	// Keystone misreading the request, seen with 8 concurrent creates on the local stack (Keystone
	// under uwsgi with threads); CreateClusterCredentials retries it like ErrUnassignedRole.
	ErrApplicationCredentialMethod = errors.New("application credential method refused")
)

// How Keystone (keystone/api/users.py) words ErrUnassignedRole and ErrApplicationCredentialMethod.
const (
	unassignedRoleMessage        = "with unassigned role"
	applicationCredentialRefusal = "Using method 'application_credential' is not allowed"
)

// Error is a failed Keystone operation. Its message names the operation, the credential and
// Keystone's own explanation, and never contains a token or secret: the request bodies that carry
// secrets are not part of it and Keystone's message is scrubbed of the secrets involved.
type Error struct {
	// Op is what was attempted, e.g. "delete application credential".
	Op string
	// Credential names the application credential concerned ("name (id …)"), if any.
	Credential string
	// StatusCode is Keystone's HTTP status, 0 when Keystone did not answer.
	StatusCode int
	// Message is Keystone's error message (or the transport error) with secrets removed.
	Message string
	// Err is the underlying error (gophercloud's or the transport's), for errors.As.
	Err error
}

func (e *Error) Error() string {
	return osclient.Answer{Status: e.StatusCode, Message: e.Message}.Describe("keystone", e.Op, e.Credential)
}

// statusOf says which HTTP status each status sentinel stands for.
var statusOf = osclient.Sentinels{ErrNotFound: http.StatusNotFound, ErrForbidden: http.StatusForbidden,
	ErrUnauthorized: http.StatusUnauthorized, ErrConflict: http.StatusConflict}

// Is maps the HTTP status (and, for two of Keystone's answers, its words) to the sentinels above.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnassignedRole:
		return e.StatusCode == http.StatusBadRequest && strings.Contains(e.Message, unassignedRoleMessage)
	case ErrApplicationCredentialMethod:
		return e.StatusCode == http.StatusForbidden && strings.Contains(e.Message, applicationCredentialRefusal)
	}
	return statusOf.Match(e.StatusCode, target)
}

func (e *Error) Unwrap() error { return e.Err }

// OnlyNotFound reports whether err is non-nil and every failure inside it (it may be an
// errors.Join) is a Keystone 404: for a cleanup, "everything was already gone".
func OnlyNotFound(err error) bool {
	if err == nil {
		return false
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !OnlyNotFound(e) {
				return false
			}
		}
		return len(joined.Unwrap()) > 0
	}
	var kerr *Error
	return errors.As(err, &kerr) && kerr.StatusCode == http.StatusNotFound
}

// newError turns a gophercloud or transport error into an *Error. scrub lists the secret values
// that were part of the request; any of them echoed back by Keystone is replaced by "[REDACTED]".
func newError(op, credential string, err error, scrub ...string) error {
	if err == nil {
		return nil
	}
	a := osclient.Classify(err, scrub...)
	return &Error{Op: op, Credential: credential, StatusCode: a.Status, Message: a.Message, Err: err}
}
