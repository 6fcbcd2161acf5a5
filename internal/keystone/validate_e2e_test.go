package keystone

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// ValidateToken against the real Keystone: a user's token tells its user, project and roles; a
// garbage token is refused with a 404/401 error that does not quote it.
func TestE2EValidateToken(t *testing.T) {
	env := keystoneE2E(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	who, err := ValidateToken(ctx, env.authURL, env.demoToken)
	if err != nil {
		t.Fatalf("validate demo's token: %v", err)
	}
	want := env.demo.Identity()
	if who.UserID != want.UserID || who.ProjectID != want.ProjectID || who.ProjectName != want.ProjectName || len(who.Roles) == 0 {
		t.Fatalf("validated identity %+v, want user %s project %s with roles", who, want.UserID, want.ProjectID)
	}
	if !who.ExpiresAt.After(time.Now()) {
		t.Fatalf("expiry %s is not in the future", who.ExpiresAt)
	}

	garbage := NewSecret("gAAAAAB-not-a-token-" + uuid.NewString())
	_, err = ValidateToken(ctx, env.authURL, garbage)
	if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("garbage token: want a 404/401 error, got %v", err)
	}
	if strings.Contains(err.Error(), garbage.Reveal()) || strings.Contains(err.Error(), uuidPart(garbage.Reveal())) {
		t.Fatalf("the error quotes the token: %v", err)
	}
	if _, err := ValidateToken(ctx, env.authURL, NewSecret("")); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("empty token: want ErrUnauthorized, got %v", err)
	}
}

func uuidPart(s string) string { return s[len(s)-36:] }
