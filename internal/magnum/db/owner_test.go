package db

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/magnum-capi-bridge/magnum-capi-bridge/internal/magnum/db/dbtest"
)

// Two bridge deployments on one Magnum database: one owns it; the other takes it only once the
// owner has stopped renewing it; replicas of the owner share it.
func TestDatabaseOwnership(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := b.new(t, dbtest.Zed)
			a, other := openTest(t, url), openTest(t, url)
			t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
			setClock(a, t0)
			setClock(other, t0)
			const ttl = time.Minute

			_, found, err := a.DatabaseOwner(ctx)
			require.NoError(t, err)
			require.False(t, found, "a database no bridge has claimed")

			// Both deployments claim at once: exactly one holds it.
			var wg sync.WaitGroup
			held := make([]bool, 2)
			for i, s := range []*Store{a, other} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, h, err := s.ClaimOwnership(ctx, []string{"deployment-a", "deployment-b"}[i], "replica-1", ttl)
					require.NoError(t, err)
					held[i] = h
				}()
			}
			wg.Wait()
			require.NotEqual(t, held[0], held[1], "one owner: %v", held)
			owner, found, err := a.DatabaseOwner(ctx)
			require.NoError(t, err)
			require.True(t, found)
			first, second, secondStore := "deployment-a", "deployment-b", other
			if held[1] {
				first, second, secondStore = "deployment-b", "deployment-a", a
			}
			require.Equal(t, first, owner.Deployment)

			// Another replica of the owner renews it; the other deployment is refused with the owner named.
			setClock(a, t0.Add(30*time.Second))
			setClock(other, t0.Add(30*time.Second))
			firstStore := a
			if secondStore == a {
				firstStore = other
			}
			owner, held2, err := firstStore.ClaimOwnership(ctx, first, "replica-2", ttl)
			require.NoError(t, err)
			require.True(t, held2)
			require.Equal(t, Owner{Deployment: first, Replica: "replica-2", Claimed: t0, Renewed: t0.Add(30 * time.Second)}, owner)
			setClock(secondStore, t0.Add(85*time.Second))
			owner, held2, err = secondStore.ClaimOwnership(ctx, second, "replica-1", ttl)
			require.NoError(t, err)
			require.False(t, held2, "renewed 55 s ago: still the owner's")
			require.Equal(t, first, owner.Deployment)

			// The owner stopped: once its last renewal is older than ttl the other takes it.
			setClock(secondStore, t0.Add(91*time.Second))
			owner, held2, err = secondStore.ClaimOwnership(ctx, second, "replica-1", ttl)
			require.NoError(t, err)
			require.True(t, held2)
			require.Equal(t, Owner{Deployment: second, Replica: "replica-1", Claimed: t0.Add(91 * time.Second), Renewed: t0.Add(91 * time.Second)}, owner)
			// The former owner, back, is refused.
			setClock(firstStore, t0.Add(100*time.Second))
			owner, held2, err = firstStore.ClaimOwnership(ctx, first, "replica-1", ttl)
			require.NoError(t, err)
			require.False(t, held2)
			require.Equal(t, second, owner.Deployment)
		})
	}
}
