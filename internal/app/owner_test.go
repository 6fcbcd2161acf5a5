package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db"
	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
)

// What --check-config and the readiness say of the database's owner, and what a replica does
// when another deployment has taken the database.
func TestDatabaseOwnerLines(t *testing.T) {
	ctx := context.Background()
	st, err := db.Open(ctx, dbtest.NewMySQL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now()

	line, err := checkOwner(ctx, st, "ns/a in management cluster u1", now)
	require.NoError(t, err)
	require.Equal(t, "no bridge deployment owns it yet: this one will (ns/a in management cluster u1)", line)

	a := &databaseOwner{store: st, deployment: "ns/a in management cluster u1", replica: "host-1_1_x", log: slog.Default(), now: time.Now}
	_, err = a.check(ctx)
	require.EqualError(t, err, "not claimed yet")
	require.NoError(t, a.acquire(ctx))
	line, err = a.check(ctx)
	require.NoError(t, err)
	require.Equal(t, "owned by this deployment (ns/a in management cluster u1)", line)
	line, err = checkOwner(ctx, st, "ns/a in management cluster u1", time.Now())
	require.NoError(t, err)
	require.Equal(t, "owned by this deployment (ns/a in management cluster u1)", line)

	_, err = checkOwner(ctx, st, "ns/b in management cluster u1", time.Now())
	// The database keeps whole seconds: a renewal late in its second reads as 1s ago.
	require.Error(t, err)
	require.Regexp(t, `another bridge deployment owns this Magnum database: ns/a in management cluster u1 \(replica host-1_1_x, renewed [01]s ago\)`, err.Error())
	b := &databaseOwner{store: st, deployment: "ns/b in management cluster u1", replica: "host-2_1_y", log: slog.Default(), now: time.Now}
	held, err := b.claim(ctx)
	require.NoError(t, err)
	require.False(t, held)
	_, err = b.check(ctx)
	require.ErrorContains(t, err, "another bridge deployment owns this Magnum database: ns/a")

	line, err = checkOwner(ctx, st, "ns/b in management cluster u1", time.Now().Add(2*time.Minute))
	require.NoError(t, err)
	// The age is the seconds since the renewal, which a loaded machine may round up by one.
	require.Regexp(t, `owned by ns/a in management cluster u1, not renewed for 2m[01]s: this deployment will take it over`, line)
}
