// Package osclient is what the bridge's OpenStack clients (internal/keystone, internal/compute,
// internal/discovery) share: how a gophercloud provider is set up, and how a failed call is
// classified into an HTTP status and a message fit to show a tenant.
package osclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tlsclient"
)

// Product is the User-Agent token every request of the bridge carries.
const Product = "magnum-capi-bridge"

// Redacted replaces a secret wherever a service echoes it back.
const Redacted = "[REDACTED]"

// NewProvider is a gophercloud provider for the Keystone at authURL that sends its requests
// through hc (nil: a client with tlsclient.DefaultTimeout and the system's trust) and names the
// bridge (and userAgent, when given) in its User-Agent.
func NewProvider(authURL string, hc *http.Client, userAgent string) (*gophercloud.ProviderClient, error) {
	provider, err := openstack.NewClient(authURL)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		// Without TLS settings the builder cannot fail.
		if hc, err = tlsclient.HTTPClient(tlsclient.Options{}); err != nil {
			return nil, err
		}
	}
	provider.HTTPClient = *hc
	provider.UserAgent.Prepend(Product)
	if userAgent != "" {
		provider.UserAgent.Prepend(userAgent)
	}
	return provider, nil
}

// Answer is a failed call as the bridge's errors report it.
type Answer struct {
	// Status is the service's HTTP status; 0 when it did not answer (transport error, cancelled
	// context) or the failure was not an HTTP one.
	Status int
	// Message is the service's own explanation, or the error's text when it did not answer, with
	// the secrets given to Classify removed.
	Message string
}

// Classify reads a gophercloud or transport error. secrets are values that took part in the
// request (a token, a password): a service may echo them back, so they never reach Message.
func Classify(err error, secrets ...string) Answer {
	var a Answer
	var code gophercloud.ErrUnexpectedResponseCode
	switch {
	case err == nil:
		return a
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// Checked first: the request never got its answer, whatever else the chain holds.
		a.Message = err.Error()
	case errors.As(err, &code):
		a.Status = code.GetStatusCode()
		a.Message = ServiceMessage(code.Body)
	default:
		// Transport errors (connection refused, TLS, DNS) and decoding errors carry the URL at
		// most; never a header or a body.
		a.Message = err.Error()
	}
	a.Message = Scrub(a.Message, secrets...)
	return a
}

// Describe is how the clients' errors read: "service: op subject: 404 Not Found: the service's
// message", each part present only when known.
func (a Answer) Describe(service, op, subject string) string {
	var b strings.Builder
	b.WriteString(service + ": " + op)
	if subject != "" {
		b.WriteString(" " + subject)
	}
	if a.Status != 0 {
		fmt.Fprintf(&b, ": %d %s", a.Status, http.StatusText(a.Status))
	}
	if a.Message != "" {
		b.WriteString(": " + a.Message)
	}
	return b.String()
}

// Sentinels maps a package's sentinel errors to the HTTP status each stands for, so that its
// Error type's Is method matches them by status.
type Sentinels map[error]int

// Match reports whether target is one of the sentinels and stands for status.
func (s Sentinels) Match(status int, target error) bool {
	want, ok := s[target]
	return ok && status != 0 && want == status
}

// ServiceMessage extracts the message of an OpenStack error body: Keystone's
// {"error": {"message": …}} or Nova's and Glance's {"<faultName>": {"code": …, "message": …}}.
// Other bodies (an HTML page from a proxy or a wrong URL) are summarised by their title or first
// line, cut short, so that no page ends up in a tenant's status reason.
func ServiceMessage(body []byte) string {
	var keystone struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &keystone) == nil && keystone.Error.Message != "" {
		return strings.TrimSpace(keystone.Error.Message)
	}
	var fault map[string]json.RawMessage
	if json.Unmarshal(body, &fault) == nil && len(fault) == 1 {
		for _, inner := range fault {
			var f struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(inner, &f) == nil && f.Message != "" {
				return strings.TrimSpace(f.Message)
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

// Scrub replaces every non-empty secret in s by Redacted.
func Scrub(s string, secrets ...string) string {
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, Redacted)
		}
	}
	return s
}
