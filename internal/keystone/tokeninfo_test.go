package keystone

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func tokenInfo(t *testing.T, token string, expires time.Time, project bool) []byte {
	body := map[string]any{"auth_token": token, "methods": []string{"password"}, "expires_at": expires.UTC().Format(time.RFC3339),
		"user":  map[string]any{"id": "demo-id", "name": "demo", "domain": map[string]any{"id": "default"}},
		"roles": []map[string]any{{"id": "member-id", "name": "member"}}}
	if project {
		body["project"] = map[string]any{"id": "project-id", "name": "demo", "domain": map[string]any{"id": "default"}}
	}
	b, err := json.Marshal(map[string]any{"token": body})
	require.NoError(t, err)
	return b
}

// TestClientFromTokenInfo: the body magnum-api sends along spares Keystone the validation; a body
// of another token, without a project, or expiring, gets the validation after all.
func TestClientFromTokenInfo(t *testing.T) {
	var validations atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v3/auth/tokens", func(w http.ResponseWriter, r *http.Request) {
		validations.Add(1)
		require.Equal(t, "user-token", r.Header.Get("X-Subject-Token"))
		w.Header().Set("X-Subject-Token", "user-token")
		writeJSON(w, http.StatusOK, map[string]any{"token": map[string]any{"methods": []string{"password"},
			"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"user":       map[string]any{"id": "demo-id", "name": "demo", "domain": map[string]any{"id": "default"}},
			"project":    map[string]any{"id": "validated-project", "name": "demo", "domain": map[string]any{"id": "default"}},
			"roles":      []map[string]any{{"id": "member-id", "name": "member"}}, "catalog": []any{}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	token := NewSecret("user-token")

	c, err := NewClientFromTokenInfo(ctx, srv.URL+"/v3", token, tokenInfo(t, "user-token", time.Now().Add(time.Hour), true))
	require.NoError(t, err)
	require.Zero(t, validations.Load(), "the body was enough")
	require.Equal(t, "project-id", c.Identity().ProjectID)
	require.Equal(t, "demo-id", c.Identity().UserID)
	require.True(t, c.Identity().HasRole("member"))

	for name, info := range map[string][]byte{
		"another token's body": tokenInfo(t, "other-token", time.Now().Add(time.Hour), true),
		"no project":           tokenInfo(t, "user-token", time.Now().Add(time.Hour), false),
		"expiring":             tokenInfo(t, "user-token", time.Now().Add(30*time.Second), true),
		"none":                 nil,
		"not JSON":             []byte("{"),
	} {
		before := validations.Load()
		c, err := NewClientFromTokenInfo(ctx, srv.URL+"/v3", token, info)
		require.NoError(t, err, name)
		require.Equal(t, before+1, validations.Load(), "%s: validated by Keystone", name)
		require.Equal(t, "validated-project", c.Identity().ProjectID, name)
	}
}
