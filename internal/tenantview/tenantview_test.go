package tenantview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/keystone"
)

// fakeValidator knows one token; it counts the validations that reach it.
type fakeValidator struct {
	token string
	who   keystone.Identity
	down  bool
	calls atomic.Int32
}

func (f *fakeValidator) Validate(_ context.Context, token keystone.Secret) (keystone.Identity, error) {
	f.calls.Add(1)
	switch {
	case f.down:
		return keystone.Identity{}, errors.New("connection refused")
	case token.Reveal() != f.token:
		return keystone.Identity{}, ErrInvalidToken
	}
	return f.who, nil
}

func review(t *testing.T, h http.Handler, apiVersion, token string) (*httptest.ResponseRecorder, authenticationv1.TokenReview) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": "TokenReview", "spec": map[string]any{"token": token}})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/tokenreview", bytes.NewReader(body)))
	var out authenticationv1.TokenReview
	if rec.Code == http.StatusOK {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	}
	return rec, out
}

func TestUserInfo(t *testing.T) {
	u := UserInfo(keystone.Identity{UserID: "u1", UserName: "demo", UserDomainID: "default", ProjectID: "p1", ProjectName: "demo",
		Roles: []string{"member", "Reader", "member"}})
	require.Equal(t, "keystone:u1", u.Username)
	require.Equal(t, "u1", u.UID)
	require.Equal(t, []string{"keystone:project:p1", "keystone:project:p1:role:member", "keystone:project:p1:role:reader"}, u.Groups)
	require.Equal(t, authenticationv1.ExtraValue{"demo"}, u.Extra[ExtraProjectName])

	// Unscoped: no group at all, so no project namespace is readable.
	u = UserInfo(keystone.Identity{UserID: "u1", UserName: "system:masters"})
	require.Empty(t, u.Groups)
	require.Equal(t, "keystone:u1", u.Username)
}

func TestWebhook(t *testing.T) {
	now := time.Now()
	v := &fakeValidator{token: "good-token-1234567890", who: keystone.Identity{UserID: "u1", UserName: "demo", ProjectID: "p1",
		Roles: []string{"member"}, ExpiresAt: now.Add(time.Hour)}}
	var logs bytes.Buffer
	h := NewWebhook(v, Options{CacheTTL: time.Minute, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})

	rec, out := review(t, h, "authentication.k8s.io/v1", v.token)
	require.Equal(t, http.StatusOK, rec.Code)
	require.True(t, out.Status.Authenticated)
	require.Equal(t, "keystone:u1", out.Status.User.Username)
	require.Contains(t, out.Status.User.Groups, "keystone:project:p1")
	require.Empty(t, out.Spec.Token, "the answer does not repeat the token")

	// Cached: the second review does not reach Keystone; v1beta1 is answered in kind.
	rec, out = review(t, h, "authentication.k8s.io/v1beta1", v.token)
	require.Equal(t, http.StatusOK, rec.Code)
	require.True(t, out.Status.Authenticated)
	require.Equal(t, "authentication.k8s.io/v1beta1", out.APIVersion)
	require.EqualValues(t, 1, v.calls.Load())

	// A wrong token: authenticated=false (the apiserver's 401), also cached.
	const wrong = "wrong-token-abcdefghijkl"
	for range 2 {
		rec, out = review(t, h, "authentication.k8s.io/v1", wrong)
		require.Equal(t, http.StatusOK, rec.Code)
		require.False(t, out.Status.Authenticated)
		require.NotEmpty(t, out.Status.Error)
	}
	require.EqualValues(t, 2, v.calls.Load())

	// Keystone down: 503 (the apiserver retries, then refuses); not cached.
	v.down = true
	rec, _ = review(t, h, "authentication.k8s.io/v1", "another-token-zzzzzzzz")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.NotContains(t, rec.Body.String(), "another-token")

	// Bad requests.
	rec, _ = review(t, h, "v1", v.token)
	require.Equal(t, http.StatusBadRequest, rec.Code)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"spec":{"token":"bad-json-token`)))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.NotContains(t, rec.Body.String(), "bad-json-token")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)

	for _, secret := range []string{v.token, wrong, "another-token", "bad-json-token"} {
		require.NotContains(t, logs.String(), secret)
	}
	require.Contains(t, logs.String(), "token review: refused")
}

// A cached validation never outlives the token, nor the cache TTL.
func TestWebhookCacheExpiry(t *testing.T) {
	v := &fakeValidator{token: "short-lived", who: keystone.Identity{UserID: "u1", ProjectID: "p1", ExpiresAt: time.Now().Add(300 * time.Millisecond)}}
	h := NewWebhook(v, Options{CacheTTL: time.Hour})
	_, out := review(t, h, "authentication.k8s.io/v1", v.token)
	require.True(t, out.Status.Authenticated)
	time.Sleep(400 * time.Millisecond)
	v.token = "rotated" // Keystone now refuses the old one
	_, out = review(t, h, "authentication.k8s.io/v1", "short-lived")
	require.False(t, out.Status.Authenticated)
	require.EqualValues(t, 2, v.calls.Load())

	v = &fakeValidator{token: "t", who: keystone.Identity{UserID: "u1", ExpiresAt: time.Now().Add(time.Hour)}}
	h = NewWebhook(v, Options{CacheTTL: 200 * time.Millisecond})
	review(t, h, "authentication.k8s.io/v1", "t")
	review(t, h, "authentication.k8s.io/v1", "t")
	require.EqualValues(t, 1, v.calls.Load())
	time.Sleep(300 * time.Millisecond)
	review(t, h, "authentication.k8s.io/v1", "t")
	require.EqualValues(t, 2, v.calls.Load())

	// CacheTTL 0: every review asks Keystone.
	h = NewWebhook(v, Options{})
	review(t, h, "authentication.k8s.io/v1", "t")
	review(t, h, "authentication.k8s.io/v1", "t")
	require.EqualValues(t, 4, v.calls.Load())
}

func TestWebhookPreparesEachProjectOnce(t *testing.T) {
	v := &fakeValidator{token: "t", who: keystone.Identity{UserID: "u1", ProjectID: "p1", ExpiresAt: time.Now().Add(time.Hour)}}
	var prepared []string
	fail := true
	h := NewWebhook(v, Options{OnProject: func(_ context.Context, project string) error {
		prepared = append(prepared, project)
		if fail {
			return errors.New("apiserver busy")
		}
		return nil
	}})
	_, out := review(t, h, "authentication.k8s.io/v1", "t")
	require.True(t, out.Status.Authenticated, "a failure to prepare the project does not refuse the token")
	fail = false
	review(t, h, "authentication.k8s.io/v1", "t")
	review(t, h, "authentication.k8s.io/v1", "t")
	require.Equal(t, []string{"p1", "p1"}, prepared, "tried again after the failure, then not again")

	v.who.ProjectID = ""
	review(t, h, "authentication.k8s.io/v1", "t")
	require.Len(t, prepared, 2, "an unscoped token has no project")
}
