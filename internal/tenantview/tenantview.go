// Package tenantview lets Keystone users read their own project's Cluster API objects in the
// management cluster: a Kubernetes webhook token authenticator (TokenReview) that validates Keystone
// tokens and maps them to a user and groups. What a group may read is decided by the RoleBinding the
// bridge puts in each project namespace (internal/capi, ProjectViewerRole); see docs/tenant-view.md.
package tenantview

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/kubegroup"
)

// Extra fields of the user the webhook hands to the apiserver (its user and group names are
// kubegroup's). ExtraUserName etc. carry the Keystone names for audit logs; RBAC uses only the group
// names.
const (
	ExtraUserName    = "keystone.openstack.org/user-name"
	ExtraUserDomain  = "keystone.openstack.org/user-domain-id"
	ExtraProjectName = "keystone.openstack.org/project-name"
	ExtraProjectID   = "keystone.openstack.org/project-id"
)

// UserInfo maps a validated Keystone identity to the Kubernetes user: username "keystone:<user id>"
// (ids are stable, names can be reused), the project and project-role groups when the token is
// project-scoped, and the names as extra fields.
func UserInfo(who keystone.Identity) authenticationv1.UserInfo {
	u := authenticationv1.UserInfo{Username: kubegroup.Prefix + who.UserID, UID: who.UserID,
		Extra: map[string]authenticationv1.ExtraValue{ExtraUserName: {who.UserName}}}
	if who.UserDomainID != "" {
		u.Extra[ExtraUserDomain] = authenticationv1.ExtraValue{who.UserDomainID}
	}
	if who.ProjectID != "" {
		u.Groups = append(u.Groups, kubegroup.Project(who.ProjectID))
		roles := map[string]bool{}
		for _, r := range who.Roles {
			roles[strings.ToLower(r)] = true
		}
		names := make([]string, 0, len(roles))
		for r := range roles {
			names = append(names, r)
		}
		sort.Strings(names)
		for _, r := range names {
			u.Groups = append(u.Groups, kubegroup.ProjectRole(who.ProjectID, r))
		}
		u.Extra[ExtraProjectID] = authenticationv1.ExtraValue{who.ProjectID}
		u.Extra[ExtraProjectName] = authenticationv1.ExtraValue{who.ProjectName}
	}
	return u
}

// Validator tells who a Keystone token belongs to. It returns an error matching ErrInvalidToken
// when Keystone says the token is not (or no longer) valid; other errors mean Keystone could not
// answer.
type Validator interface {
	Validate(ctx context.Context, token keystone.Secret) (keystone.Identity, error)
}

// ErrInvalidToken: Keystone does not know the token, or it expired or was revoked.
var ErrInvalidToken = errors.New("invalid token")

// KeystoneValidator validates tokens with Keystone itself (keystone.ValidateToken).
type KeystoneValidator struct {
	URL     string
	Options []keystone.Option
}

func (k KeystoneValidator) Validate(ctx context.Context, token keystone.Secret) (keystone.Identity, error) {
	who, err := keystone.ValidateToken(ctx, k.URL, token, k.Options...)
	if errors.Is(err, keystone.ErrNotFound) || errors.Is(err, keystone.ErrUnauthorized) {
		return keystone.Identity{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	return who, err
}

// Options configure a Webhook.
type Options struct {
	// CacheTTL bounds how long a validation is reused (never past the token's expiry); 0 disables
	// the cache. A revoked token is refused at most CacheTTL (plus the apiserver's own
	// --authentication-token-webhook-cache-ttl) after its revocation.
	CacheTTL time.Duration
	// CacheSize bounds the number of cached validations (least recently used go first).
	CacheSize int
	Logger    *slog.Logger
	// Now is the clock (tests).
	Now func() time.Time
	// OnProject, when set, is called once per process for each project a token is scoped to,
	// before the token is answered: the tenant API makes the project's namespace there, so that a
	// project's first login finds it.
	OnProject func(ctx context.Context, projectID string) error
}

// DefaultCacheTTL and DefaultCacheSize are the defaults of [bridge] tenant_view_cache_ttl and the
// cache bound.
const (
	DefaultCacheTTL  = 30 * time.Second
	DefaultCacheSize = 4096
	maxReviewBytes   = 1 << 20
)

// Webhook is the TokenReview endpoint (POST, authentication.k8s.io/v1 or v1beta1, whose shapes are
// the same). It answers authenticated=false for a token Keystone refuses, which the apiserver turns
// into 401, and 503 when Keystone cannot be asked (the apiserver retries, then refuses). Tokens are
// cached by their SHA-256, never logged, never put in an error.
type Webhook struct {
	validator Validator
	opts      Options
	cache     *cache.LRUExpireCache
	flight    singleflight.Group
	// projects are those OnProject succeeded for.
	projects sync.Map
}

type cached struct {
	who     keystone.Identity
	invalid bool
}

// NewWebhook builds the handler.
func NewWebhook(v Validator, o Options) *Webhook {
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Webhook{validator: v, opts: o, cache: cache.NewLRUExpireCache(o.CacheSize)}
}

func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a TokenReview", http.StatusMethodNotAllowed)
		return
	}
	var review authenticationv1.TokenReview
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err == nil && len(body) > maxReviewBytes {
		err = errors.New("larger than 1 MiB")
	}
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	// The decoding error is not echoed: it could quote the token.
	if err != nil {
		http.Error(w, "the body is not a TokenReview", http.StatusBadRequest)
		return
	}
	if review.Kind != "TokenReview" || (review.APIVersion != "authentication.k8s.io/v1" && review.APIVersion != "authentication.k8s.io/v1beta1") {
		http.Error(w, "want kind TokenReview of authentication.k8s.io/v1 or v1beta1", http.StatusBadRequest)
		return
	}
	token := keystone.NewSecret(review.Spec.Token)
	review.Spec = authenticationv1.TokenReviewSpec{} // the answer does not repeat the token
	status, err := h.review(r.Context(), token)
	if err != nil {
		h.opts.Logger.Warn("token review: Keystone did not answer", "error", err)
		http.Error(w, "Keystone could not validate the token", http.StatusServiceUnavailable)
		return
	}
	review.Status = status
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

func (h *Webhook) review(ctx context.Context, token keystone.Secret) (authenticationv1.TokenReviewStatus, error) {
	refused := authenticationv1.TokenReviewStatus{Authenticated: false, Error: "the Keystone token is invalid, expired or revoked"}
	if token.IsZero() {
		return refused, nil
	}
	c, err := h.validate(ctx, token)
	if err != nil {
		return authenticationv1.TokenReviewStatus{}, err
	}
	if c.invalid {
		h.opts.Logger.Debug("token review: refused")
		return refused, nil
	}
	u := UserInfo(c.who)
	h.opts.Logger.Debug("token review: authenticated", "user", u.Username, "project", c.who.ProjectID)
	return authenticationv1.TokenReviewStatus{Authenticated: true, User: u}, nil
}

// validate answers from the cache or asks the validator, once for concurrent reviews of one token.
func (h *Webhook) validate(ctx context.Context, token keystone.Secret) (cached, error) {
	sum := sha256.Sum256([]byte(token.Reveal()))
	key := string(sum[:])
	if h.opts.CacheTTL > 0 {
		if v, ok := h.cache.Get(key); ok {
			c := v.(cached)
			if c.invalid || h.opts.Now().Before(c.who.ExpiresAt) {
				return c, nil
			}
		}
	}
	v, err, _ := h.flight.Do(key, func() (any, error) {
		who, err := h.validator.Validate(ctx, token)
		if errors.Is(err, ErrInvalidToken) {
			c := cached{invalid: true}
			h.add(key, c, h.opts.CacheTTL)
			return c, nil
		}
		if err != nil {
			return nil, err
		}
		ttl := who.ExpiresAt.Sub(h.opts.Now())
		if ttl <= 0 {
			// Keystone validated a token past its expiry (clock skew): refuse rather than trust it.
			return cached{invalid: true}, nil
		}
		c := cached{who: who}
		h.add(key, c, min(ttl, h.opts.CacheTTL))
		h.seeProject(ctx, who.ProjectID)
		return c, nil
	})
	if err != nil {
		return cached{}, err
	}
	return v.(cached), nil
}

// seeProject runs OnProject for a project not seen yet; a failure is logged and tried again with the
// project's next token, never a reason to refuse this one.
func (h *Webhook) seeProject(ctx context.Context, projectID string) {
	if h.opts.OnProject == nil || projectID == "" {
		return
	}
	if _, done := h.projects.Load(projectID); done {
		return
	}
	if err := h.opts.OnProject(ctx, projectID); err != nil {
		h.opts.Logger.Warn("token review: preparing the project", "project", projectID, "error", err)
		return
	}
	h.projects.Store(projectID, true)
}

func (h *Webhook) add(key string, c cached, ttl time.Duration) {
	if ttl > 0 {
		h.cache.Add(key, c, ttl)
	}
}
