// Package keystone manages the per-cluster Keystone application credentials of the bridge.
//
// Each Magnum cluster gets two application credentials, created as the user who asked for the
// cluster (Keystone lets a user create application credentials only for themself, with roles they
// hold on the token's project): one for Cluster API Provider OpenStack in the management cluster and
// one for what runs inside the workload cluster (OpenStack cloud controller manager, Cinder CSI), so
// that either can be revoked without the other. RenderCloudsYAML turns one of them into the
// clouds.yaml those components read. See docs/credentials.md for the design decisions.
//
// A Client acts as one Keystone identity: the requesting user's token from the RPC context
// (NewClient), the service user from magnum.conf (NewPasswordClient), or an application credential
// itself (NewApplicationCredentialClient). Secrets are carried in Secret values, which never print.
package keystone

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/osclient"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/tlsclient"
)

// DefaultRequestTimeout bounds every Keystone request of a client built without WithHTTPClient,
// so that a Keystone that accepts connections but never answers cannot hang an RPC handler.
const DefaultRequestTimeout = tlsclient.DefaultTimeout

// Option adjusts how a Client talks to Keystone.
type Option func(*clientOptions)

type clientOptions struct {
	httpClient *http.Client
	userAgent  string
	retry      *RetryPolicy
}

// WithHTTPClient sets the HTTP client (TLS trust, proxies, timeouts). The default is a plain
// client with DefaultRequestTimeout.
func WithHTTPClient(c *http.Client) Option { return func(o *clientOptions) { o.httpClient = c } }

// WithUserAgent prepends a product token to the User-Agent header.
func WithUserAgent(ua string) Option { return func(o *clientOptions) { o.userAgent = ua } }

// Identity is who a Client acts as, read from Keystone's token body.
type Identity struct {
	UserID, UserName, UserDomainID          string
	ProjectID, ProjectName, ProjectDomainID string
	// Roles on the project, as the token lists them (including implied roles).
	Roles []string
	// Methods are the token's authentication methods ("password", "token", "application_credential").
	Methods []string
	// ApplicationCredentialID is set when the token was issued to an application credential.
	ApplicationCredentialID string
	ExpiresAt               time.Time
}

// HasRole reports whether the token carries the role (case-insensitive, as Keystone role names are).
func (i Identity) HasRole(name string) bool {
	return slices.ContainsFunc(i.Roles, func(r string) bool { return strings.EqualFold(r, name) })
}

func (i Identity) String() string {
	via := strings.Join(i.Methods, "+")
	if i.ApplicationCredentialID != "" {
		via = "application credential " + i.ApplicationCredentialID
	}
	return fmt.Sprintf("user %s (%s) in project %s (%s) via %s", i.UserName, i.UserID, i.ProjectName, i.ProjectID, via)
}

// Client performs the application-credential operations as one project-scoped Keystone identity.
// It is safe for concurrent use.
type Client struct {
	identity *gophercloud.ServiceClient
	who      Identity
	retry    RetryPolicy
}

// Identity returns who the client acts as.
func (c *Client) Identity() Identity { return c.who }

// ProviderClient is the authenticated provider behind the client: its token and catalog reach the
// other services as the same identity (Barbican as Magnum's service user), and a password client's
// provider re-authenticates when the token expires.
func (c *Client) ProviderClient() *gophercloud.ProviderClient { return c.identity.ProviderClient }

// String names the identity; the token stays out of every printed form.
func (c *Client) String() string { return "keystone.Client{" + c.who.String() + "}" }

// GoString implements fmt.GoStringer (%#v) so that the struct, which holds the token, never prints.
func (c *Client) GoString() string { return c.String() }

// NewClient acts as the user whose token the RPC context carries (`_context_auth_token`).
// keystoneURL is the Keystone v3 endpoint (the context's `auth_url`, e.g.
// "https://keystone.example:5000/v3"). The token is validated once (GET /v3/auth/tokens) to learn
// the user, project and roles; an expired or revoked token gives an error matching ErrUnauthorized.
// The token must be project-scoped: application credentials belong to a project.
func NewClient(ctx context.Context, keystoneURL string, userToken Secret, opts ...Option) (*Client, error) {
	if userToken.IsZero() {
		return nil, &Error{Op: "validate token", Message: "empty user token (the RPC context carried no auth_token)"}
	}
	return authenticate(ctx, keystoneURL, "validate token", &tokens.AuthOptions{TokenID: userToken.Reveal()}, []string{userToken.Reveal()}, opts)
}

// NewClientFromTokenInfo is NewClient for a token whose body magnum-api sent along
// (`auth_token_info` in the RPC context: keystonemiddleware validated the token and passes its
// body). The identity is read from that body, as Magnum's own conductor does, sparing Keystone a
// validation — on a busy Keystone a second or more of every cluster create. A body that does not
// describe this token, names no user or has expired gets the validation after all.
func NewClientFromTokenInfo(ctx context.Context, keystoneURL string, userToken Secret, tokenInfo []byte, opts ...Option) (*Client, error) {
	who, ok := identityFromTokenInfo(userToken, tokenInfo, time.Now())
	if !ok {
		return NewClient(ctx, keystoneURL, userToken, opts...)
	}
	provider, o, err := providerFor(keystoneURL, opts)
	if err != nil {
		return nil, err
	}
	provider.SetToken(userToken.Reveal())
	return newIdentityClient(provider, who, o)
}

// identityFromTokenInfo reads {"token": {...}} as magnum-api sends it; false when it is not
// usable for userToken (another token's body, no user or project, expired or about to).
func identityFromTokenInfo(userToken Secret, tokenInfo []byte, now time.Time) (Identity, bool) {
	if userToken.IsZero() || len(tokenInfo) == 0 {
		return Identity{}, false
	}
	var doc struct {
		Token json.RawMessage `json:"token"`
	}
	if err := json.Unmarshal(tokenInfo, &doc); err != nil || len(doc.Token) == 0 {
		return Identity{}, false
	}
	var own struct {
		AuthToken string `json:"auth_token"`
	}
	if err := json.Unmarshal(doc.Token, &own); err != nil || own.AuthToken != userToken.Reveal() {
		return Identity{}, false
	}
	who, err := identityFromAuthResult(tokenInfoResult(doc.Token))
	if err != nil || who.ProjectID == "" || who.ExpiresAt.Before(now.Add(time.Minute)) {
		return Identity{}, false
	}
	return who, true
}

// tokenInfoResult lets identityFromAuthResult read a token body that did not come from gophercloud.
type tokenInfoResult json.RawMessage

func (t tokenInfoResult) ExtractInto(v any) error { return json.Unmarshal(t, v) }

// ExtractTokenID is the token the body describes (gophercloud.AuthResult).
func (t tokenInfoResult) ExtractTokenID() (string, error) {
	var own struct {
		AuthToken string `json:"auth_token"`
	}
	err := json.Unmarshal(t, &own)
	return own.AuthToken, err
}

// PasswordAuth is a password identity, e.g. Magnum's service user from `[keystone_auth]`.
type PasswordAuth struct {
	AuthURL string
	// UserID, or Username with UserDomainName or UserDomainID.
	UserID, Username, UserDomainName, UserDomainID string
	Password                                       Secret
	// ProjectID, or ProjectName with ProjectDomainName or ProjectDomainID.
	ProjectID, ProjectName, ProjectDomainName, ProjectDomainID string
	// CAFile and Insecure configure TLS when no WithHTTPClient option is given.
	CAFile   string
	Insecure bool
}

// NewPasswordClient authenticates with a password, project-scoped, and re-authenticates when the
// token expires. The bridge uses it with Magnum's service user (which has the admin role on the
// service project) to delete application credentials of users other than the caller.
func NewPasswordClient(ctx context.Context, auth PasswordAuth, opts ...Option) (*Client, error) {
	if auth.Password.IsZero() {
		return nil, &Error{Op: "authenticate", Message: "empty password"}
	}
	if auth.UserID == "" && auth.Username == "" {
		return nil, &Error{Op: "authenticate", Message: "neither user id nor user name given"}
	}
	if auth.ProjectID == "" && auth.ProjectName == "" {
		return nil, &Error{Op: "authenticate", Message: "neither project id nor project name given: a project-scoped token is required"}
	}
	if auth.CAFile != "" || auth.Insecure {
		hc, err := HTTPClient(auth.CAFile, auth.Insecure)
		if err != nil {
			return nil, err
		}
		opts = append([]Option{WithHTTPClient(hc)}, opts...)
	}
	ao := &tokens.AuthOptions{
		UserID:      auth.UserID,
		Username:    auth.Username,
		Password:    auth.Password.Reveal(),
		AllowReauth: true,
	}
	if auth.UserID == "" {
		ao.DomainID, ao.DomainName = auth.UserDomainID, auth.UserDomainName
	}
	ao.Scope = tokens.Scope{ProjectID: auth.ProjectID}
	if auth.ProjectID == "" {
		ao.Scope = tokens.Scope{ProjectName: auth.ProjectName, DomainID: auth.ProjectDomainID, DomainName: auth.ProjectDomainName}
	}
	return authenticate(ctx, auth.AuthURL, "authenticate", ao, []string{auth.Password.Reveal()}, opts)
}

// NewApplicationCredentialClient authenticates as an application credential (id + secret). The
// token is scoped to the credential's project with the credential's roles, and names its owner, so
// it tells who owns a stored credential and whether it still works. Keystone 22 answers an
// authentication with a deleted credential with 404 (ErrNotFound: the credential is gone, also when
// Keystone removed it because its owner was deleted or lost the project role) and a wrong secret or
// an expired credential with 401 (ErrUnauthorized).
//
// Keystone (Zed and later, see docs/credentials.md) refuses to let a restricted application
// credential delete itself or any other credential, so such a client's deletes end in ErrForbidden.
func NewApplicationCredentialClient(ctx context.Context, keystoneURL, id string, secret Secret, opts ...Option) (*Client, error) {
	if id == "" || secret.IsZero() {
		return nil, &Error{Op: "authenticate", Message: "application credential id and secret are both required"}
	}
	ao := &tokens.AuthOptions{ApplicationCredentialID: id, ApplicationCredentialSecret: secret.Reveal(), AllowReauth: true}
	return authenticate(ctx, keystoneURL, "authenticate as application credential "+id, ao, []string{secret.Reveal()}, opts)
}

// HTTPClient builds an HTTP client that trusts the PEM bundle in caFile (in addition to the system
// pool) or, with insecure, skips verification, like keystoneauth's `cafile` and `insecure` options.
func HTTPClient(caFile string, insecure bool) (*http.Client, error) {
	hc, err := tlsclient.HTTPClient(tlsclient.Options{CAFile: caFile, SystemRoots: true, Insecure: insecure})
	var te *tlsclient.Error
	switch {
	case errors.Is(err, tlsclient.ErrNoCertificate):
		return nil, fmt.Errorf("keystone: CA file %s holds no PEM certificate", caFile)
	case errors.As(err, &te):
		return nil, fmt.Errorf("keystone: read CA file: %w", te.Err)
	case err != nil:
		return nil, fmt.Errorf("keystone: %w", err)
	}
	return hc, nil
}

// checkKeystoneURL refuses what gophercloud would otherwise turn into a confusing request.
func checkKeystoneURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &Error{Op: "configure client", Message: fmt.Sprintf("Keystone URL %q is not an absolute http(s) URL", raw)}
	}
	return nil
}

// newProvider is the gophercloud client for Keystone with the caller's HTTP client and user agent.
func newProvider(keystoneURL string, o clientOptions) (*gophercloud.ProviderClient, error) {
	provider, err := osclient.NewProvider(keystoneURL, o.httpClient, o.userAgent)
	if err != nil {
		return nil, &Error{Op: "configure client", Message: err.Error(), Err: err}
	}
	return provider, nil
}

// authenticate builds the provider client, gets (or validates) the token and reads the identity.
func authenticate(ctx context.Context, keystoneURL, op string, ao *tokens.AuthOptions, scrub []string, opts []Option) (*Client, error) {
	provider, o, err := providerFor(keystoneURL, opts)
	if err != nil {
		return nil, err
	}
	// An empty EndpointOpts makes gophercloud use <keystoneURL base>/v3/ directly instead of
	// looking Keystone up in the catalog: the caller already told us where Keystone is.
	if err := openstack.AuthenticateV3(ctx, provider, ao, gophercloud.EndpointOpts{}); err != nil {
		return nil, newError(op, "", err, scrub...)
	}
	who, err := identityFromAuthResult(provider.GetAuthResult())
	if err != nil {
		return nil, &Error{Op: op, Message: err.Error()}
	}
	if who.ProjectID == "" {
		return nil, &Error{Op: op, Message: fmt.Sprintf("the token of user %s is not project-scoped; application credentials belong to a project", who.UserID)}
	}
	return newIdentityClient(provider, who, o)
}

// providerFor checks the URL, applies the options and makes the provider client.
func providerFor(keystoneURL string, opts []Option) (*gophercloud.ProviderClient, clientOptions, error) {
	o := clientOptions{}
	if err := checkKeystoneURL(keystoneURL); err != nil {
		return nil, o, err
	}
	for _, opt := range opts {
		opt(&o)
	}
	provider, err := newProvider(keystoneURL, o)
	return provider, o, err
}

// newIdentityClient is the Client of an authenticated provider and the identity its token has.
func newIdentityClient(provider *gophercloud.ProviderClient, who Identity, o clientOptions) (*Client, error) {
	// An empty EndpointOpts: <keystoneURL base>/v3/ directly, not Keystone looked up in the catalog.
	identityClient, err := openstack.NewIdentityV3(provider, gophercloud.EndpointOpts{})
	if err != nil {
		return nil, &Error{Op: "configure client", Message: err.Error(), Err: err}
	}
	retry := DefaultRetryPolicy
	if o.retry != nil {
		retry = *o.retry
	}
	return &Client{identity: identityClient, who: who, retry: retry}, nil
}

// tokenBody is the part of Keystone's token body the bridge needs.
type tokenBody struct {
	Methods   []string  `json:"methods"`
	ExpiresAt time.Time `json:"expires_at"`
	User      struct {
		ID, Name string
		Domain   struct{ ID string }
	} `json:"user"`
	Project *struct {
		ID, Name string
		Domain   struct{ ID string }
	} `json:"project"`
	Roles []struct {
		ID, Name string
	} `json:"roles"`
	ApplicationCredential *struct {
		ID string `json:"id"`
	} `json:"application_credential"`
}

func identityFromAuthResult(result gophercloud.AuthResult) (Identity, error) {
	extractor, ok := result.(interface{ ExtractInto(any) error })
	if !ok {
		return Identity{}, fmt.Errorf("unexpected authentication result %T", result)
	}
	var body tokenBody
	if err := extractor.ExtractInto(&body); err != nil {
		return Identity{}, fmt.Errorf("read token body: %w", err)
	}
	who := Identity{
		UserID:       body.User.ID,
		UserName:     body.User.Name,
		UserDomainID: body.User.Domain.ID,
		Methods:      body.Methods,
		ExpiresAt:    body.ExpiresAt,
	}
	if body.Project != nil {
		who.ProjectID, who.ProjectName, who.ProjectDomainID = body.Project.ID, body.Project.Name, body.Project.Domain.ID
	}
	for _, r := range body.Roles {
		who.Roles = append(who.Roles, r.Name)
	}
	if body.ApplicationCredential != nil {
		who.ApplicationCredentialID = body.ApplicationCredential.ID
	}
	if who.UserID == "" {
		return Identity{}, fmt.Errorf("token body names no user")
	}
	return who, nil
}
