package fakeopenstack

import (
	"errors"
	"net/http"
)

// authenticate validates the request's token as keystonemiddleware does in front of every
// OpenStack API, answering 401 (no or invalid token) or 503 (Keystone unreachable) itself. The
// caller is also recorded for the request log.
func (c *Cloud) authenticate(w http.ResponseWriter, r *http.Request) (Caller, bool) {
	token := r.Header.Get("X-Auth-Token")
	if token == "" {
		keystoneError(w, http.StatusUnauthorized, "Unauthorized", "The request you have made requires authentication.")
		return Caller{}, false
	}
	caller, err := c.callers(r.Context(), token)
	switch {
	case errors.Is(err, ErrInvalidToken):
		keystoneError(w, http.StatusUnauthorized, "Unauthorized", "The request you have made requires authentication.")
		return Caller{}, false
	case err != nil:
		keystoneError(w, http.StatusServiceUnavailable, "Service Unavailable", "The Keystone service is temporarily unavailable.")
		return Caller{}, false
	}
	if audit, ok := r.Context().Value(auditKey{}).(*Caller); ok {
		*audit = caller
	}
	return caller, true
}

// optionalCaller is for the seed routes magnum-api and Horizon use, which the fake has always
// served to anybody: a valid token adds the caller's own resources and is logged, a missing or
// invalid one still gets the seed.
func (c *Cloud) optionalCaller(r *http.Request) (Caller, bool) {
	token := r.Header.Get("X-Auth-Token")
	if token == "" {
		return Caller{}, false
	}
	caller, err := c.callers(r.Context(), token)
	if err != nil {
		return Caller{}, false
	}
	if audit, ok := r.Context().Value(auditKey{}).(*Caller); ok {
		*audit = caller
	}
	return caller, true
}
