package keystone

import (
	"context"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
)

// ValidateToken asks Keystone who a token belongs to (GET /v3/auth/tokens with the token as both
// X-Auth-Token and X-Subject-Token: Keystone's policy lets a token's owner validate it, so no service
// credential is needed and nothing new is issued). Unlike NewClient it accepts unscoped and
// domain-scoped tokens; the Identity then has no project. An expired, revoked or unknown token gives
// an error matching ErrNotFound or ErrUnauthorized (Keystone answers either); the token never
// appears in an error.
func ValidateToken(ctx context.Context, keystoneURL string, token Secret, opts ...Option) (Identity, error) {
	const op = "validate token"
	if token.IsZero() {
		return Identity{}, &Error{Op: op, StatusCode: http.StatusUnauthorized, Message: "empty token"}
	}
	if err := checkKeystoneURL(keystoneURL); err != nil {
		return Identity{}, err
	}
	o := clientOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	provider, err := newProvider(keystoneURL, o)
	if err != nil {
		return Identity{}, err
	}
	provider.SetToken(token.Reveal()) // no AuthResult: the token is only validated
	identityClient, err := openstack.NewIdentityV3(provider, gophercloud.EndpointOpts{})
	if err != nil {
		return Identity{}, &Error{Op: "configure client", Message: err.Error(), Err: err}
	}
	result := tokens.Get(ctx, identityClient, token.Reveal())
	if result.Err != nil {
		return Identity{}, newError(op, "", result.Err, token.Reveal())
	}
	who, err := identityFromAuthResult(result)
	if err != nil {
		return Identity{}, &Error{Op: op, Message: err.Error()}
	}
	return who, nil
}
