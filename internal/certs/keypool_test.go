package certs

import (
	"context"
	"crypto/rsa"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// filledPool is a pool of size keys that makes no more (its context is over once it is full).
func filledPool(t *testing.T, size int) *KeyPool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool := NewKeyPool(ctx, 2048, size)
	require.Eventually(t, func() bool { return pool.Ready() == size }, time.Minute, 10*time.Millisecond, "the pool fills up")
	cancel()
	<-pool.stopped
	return pool
}

func TestKeyPoolHandsOutEachKeyOnce(t *testing.T) {
	pool := filledPool(t, 3)
	seen := map[string]bool{}
	for i := range 5 { // three from the pool, then generated on demand
		key, err := pool.take(2048)
		require.NoError(t, err)
		require.Equal(t, 2048, key.N.BitLen())
		require.False(t, seen[key.N.String()], "a key was handed out twice")
		seen[key.N.String()] = true
		require.Equal(t, max(0, 2-i), pool.Ready())
	}
	// Another size is generated, not taken from the pool.
	pool = filledPool(t, 1)
	key, err := pool.take(3072)
	require.NoError(t, err)
	require.Equal(t, 3072, key.N.BitLen())
	require.Equal(t, 1, pool.Ready())
	var none *KeyPool
	_, err = none.take(2048)
	require.NoError(t, err, "no pool: generated")
}

func TestClusterPKIUsesThePool(t *testing.T) {
	pool := filledPool(t, 4)
	pki, err := GenerateClusterWithOptions("pool-test", GenerateOptions{Keys: pool})
	require.NoError(t, err)
	require.Zero(t, pool.Ready(), "the four keys came from the pool")
	require.Equal(t, 2048, pki.KubernetesCA.Key.(*rsa.PrivateKey).N.BitLen())
}
