package fakeopenstack

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Caller is who a request's token belongs to, as far as the fake's per-project state (server
// groups) needs to know.
type Caller struct {
	ProjectID string
	UserID    string
	// AuthMethods are Keystone's token methods, e.g. ["password"] or ["application_credential"].
	AuthMethods []string
	// ApplicationCredentialID is set when the token was issued for an application credential.
	ApplicationCredentialID string
	// Roles are the role names the token carries in its project ("admin" may set quotas).
	Roles []string
}

// isAdmin: Nova's and Neutron's default policy lets the admin role act on other projects' quotas.
func (c Caller) isAdmin() bool { return slices.Contains(c.Roles, "admin") }

// CallerFunc tells the stateful routes who sent a token. It returns an error matching
// ErrInvalidToken for a token Keystone does not accept (answered 401, as keystonemiddleware does);
// any other error is answered 503.
type CallerFunc func(ctx context.Context, token string) (Caller, error)

// ErrInvalidToken: the token is expired, revoked, malformed or not project-scoped.
var ErrInvalidToken = errors.New("invalid token")

// The caller of every token when no CallerFunc is configured: the fake's in-process users (tests)
// share one project, the way the seed data is shared by everybody.
const (
	SharedProjectID = "fake-openstack-project"
	SharedUserID    = "fake-openstack-user"
)

func sharedCaller(context.Context, string) (Caller, error) {
	return Caller{ProjectID: SharedProjectID, UserID: SharedUserID}, nil
}

// WithCallers sets how the stateful routes learn a token's project (default: one shared project).
func WithCallers(f CallerFunc) Option { return func(c *Cloud) { c.callers = f } }

// keystoneCacheTTL bounds how long a validated token is trusted without asking Keystone again, like
// keystonemiddleware's token cache (shorter, because the fake has few requests to save).
const keystoneCacheTTL = time.Minute

// KeystoneCallers validates tokens with Keystone: GET <keystoneURL>/auth/tokens with the token
// both as X-Auth-Token and X-Subject-Token (Keystone lets a token's own user validate it, so the
// fake needs no service account). keystoneURL is the v3 endpoint, e.g. http://127.0.0.1:5000/v3.
// Successful answers are cached for a minute, keyed by a hash of the token.
func KeystoneCallers(keystoneURL string, client *http.Client) CallerFunc {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	base := strings.TrimSuffix(keystoneURL, "/")
	type entry struct {
		caller Caller
		until  time.Time
	}
	var mu sync.Mutex
	cache := map[[sha256.Size]byte]entry{}
	return func(ctx context.Context, token string) (Caller, error) {
		if token == "" {
			return Caller{}, ErrInvalidToken
		}
		key := sha256.Sum256([]byte(token))
		now := time.Now()
		mu.Lock()
		e, ok := cache[key]
		mu.Unlock()
		if ok && now.Before(e.until) {
			return e.caller, nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/auth/tokens?nocatalog", nil)
		if err != nil {
			return Caller{}, err
		}
		req.Header.Set("X-Auth-Token", token)
		req.Header.Set("X-Subject-Token", token)
		req.Header.Set("User-Agent", "fake-openstack")
		resp, err := client.Do(req)
		if err != nil {
			return Caller{}, fmt.Errorf("validate token with Keystone: %w", err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return Caller{}, fmt.Errorf("validate token with Keystone: %w", err)
		}
		switch {
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound:
			return Caller{}, ErrInvalidToken
		case resp.StatusCode != http.StatusOK:
			return Caller{}, fmt.Errorf("validate token with Keystone: %s", resp.Status)
		}
		var parsed struct {
			Token struct {
				ExpiresAt time.Time `json:"expires_at"`
				Methods   []string  `json:"methods"`
				Roles     []struct {
					Name string `json:"name"`
				} `json:"roles"`
				ApplicationCredential *struct {
					ID string `json:"id"`
				} `json:"application_credential"`
				User struct {
					ID string `json:"id"`
				} `json:"user"`
				Project *struct {
					ID string `json:"id"`
				} `json:"project"`
			} `json:"token"`
		}
		if err := json.Unmarshal(body, &parsed); err != nil {
			return Caller{}, fmt.Errorf("validate token with Keystone: %w", err)
		}
		if parsed.Token.Project == nil || parsed.Token.Project.ID == "" {
			// Nova needs a project-scoped token; keystonemiddleware would pass an unscoped one on and
			// Nova's policy would refuse it. One answer is enough for a fake.
			return Caller{}, ErrInvalidToken
		}
		caller := Caller{ProjectID: parsed.Token.Project.ID, UserID: parsed.Token.User.ID,
			AuthMethods: parsed.Token.Methods}
		for _, r := range parsed.Token.Roles {
			caller.Roles = append(caller.Roles, r.Name)
		}
		if ac := parsed.Token.ApplicationCredential; ac != nil {
			caller.ApplicationCredentialID = ac.ID
		}
		until := now.Add(keystoneCacheTTL)
		if !parsed.Token.ExpiresAt.IsZero() && parsed.Token.ExpiresAt.Before(until) {
			until = parsed.Token.ExpiresAt
		}
		mu.Lock()
		for k, old := range cache {
			if !now.Before(old.until) {
				delete(cache, k)
			}
		}
		cache[key] = entry{caller: caller, until: until}
		mu.Unlock()
		return caller, nil
	}
}
